#include "disasm.hpp"

#include <moejit/error.hpp>

#include <fmt/format.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <string>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace moejit::detail {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void fail(std::string message, const fs::path& file, const char* call, int err) {
  throw Error({.kind = ErrorKind::io, .message = std::move(message), .file = file.string(), .call = call, .code = std::strerror(err)});
}

class Fd {
 public:
  explicit Fd(int fd = -1) noexcept : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const noexcept { return fd_; }
  void reset() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

// The cubin in an anonymous memory file (memfd): nothing to remove, even when a signal ends the
// process, and no writable temporary directory needed. Rewound, for the child's own open of it.
Fd memory_file(std::string_view cubin) {
  Fd fd(::memfd_create("moejit-cubin", MFD_CLOEXEC));
  if (fd.get() < 0) fail("cannot create a memory file for nvdisasm", "memfd", "memfd_create", errno);
  for (std::size_t done = 0; done < cubin.size();) {
    const auto n = ::write(fd.get(), cubin.data() + done, cubin.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("cannot write the cubin for nvdisasm", "memfd", "write", n == 0 ? EIO : errno);
    done += static_cast<std::size_t>(n);
  }
  if (::lseek(fd.get(), 0, SEEK_SET) != 0) fail("cannot rewind the cubin for nvdisasm", "memfd", "lseek", errno);
  return fd;
}

// Reads both pipes to their ends together (either one filling up would stall the child).
void drain(int out_fd, int err_fd, std::string& out, std::string& err, const fs::path& tool) {
  pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  std::string* into[2] = {&out, &err};
  int open_count = 2;
  char buf[65536];
  while (open_count > 0) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      fail("cannot read nvdisasm's output", tool, "poll", errno);
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const auto n = ::read(fds[i].fd, buf, sizeof buf);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n < 0) fail("cannot read nvdisasm's output", tool, "read", errno);
      if (n == 0) {
        fds[i].fd = -1;  // poll skips a negative descriptor
        --open_count;
      } else {
        into[i]->append(buf, static_cast<std::size_t>(n));
      }
    }
  }
}

}  // namespace

fs::path find_nvdisasm(const fs::path& cuda_home) {
  const fs::path tool = cuda_home / "bin" / "nvdisasm";
  struct stat st{};
  if (::stat(tool.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || ::access(tool.c_str(), X_OK) != 0) {
    throw Error({.kind = ErrorKind::io, .message = "the CUDA toolkit's nvdisasm was not found: --emit sass runs it on the cubin",
                 .found = fmt::format("no executable file at {}", tool.string()),
                 .expected = "an executable nvdisasm in $CUDA_HOME/bin (a full CUDA toolkit; set CUDA_HOME), or --emit cubin "
                             "and a disassembler of your own"});
  }
  return tool;
}

std::string disassemble(const fs::path& cuda_home, std::string_view cubin) {
  const fs::path tool = find_nvdisasm(cuda_home);
  const Fd file = memory_file(cubin);
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) fail("cannot start nvdisasm", tool, "pipe2", errno);
  Fd out_read(out_pipe[0]), out_write(out_pipe[1]);
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) fail("cannot start nvdisasm", tool, "pipe2", errno);
  Fd err_read(err_pipe[0]), err_write(err_pipe[1]);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_write.get(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_write.get(), STDERR_FILENO);
  posix_spawn_file_actions_adddup2(&actions, file.get(), STDIN_FILENO);  // the cubin, as /dev/stdin
  // NOTE: the CLI blocks SIGINT, SIGTERM and SIGHUP in every thread (tools/signals.hpp) and a
  // child inherits the mask: nvdisasm starts with none blocked, so that Ctrl-C stops it too.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  std::string arg0 = tool.string(), code_only = "-c", input = "/dev/stdin";
  char* argv[] = {arg0.data(), code_only.data(), input.data(), nullptr};
  pid_t pid = 0;
  const int spawned = ::posix_spawn(&pid, arg0.c_str(), &actions, &attr, argv, environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) fail("cannot start nvdisasm", tool, "posix_spawn", spawned);
  out_write.reset();  // the child holds the write ends now: the pipes end when it does
  err_write.reset();

  std::string out, err;
  try {
    drain(out_read.get(), err_read.get(), out, err, tool);
  } catch (...) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    throw;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) fail("cannot wait for nvdisasm", tool, "waitpid", errno);
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    const std::string how = WIFEXITED(status) ? fmt::format("exit status {}", WEXITSTATUS(status))
                                              : fmt::format("signal {}", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    throw Error({.kind = ErrorKind::io, .message = "nvdisasm could not disassemble the cubin", .file = tool.string(),
                 .found = how, .log = err});
  }
  return out;
}

}  // namespace moejit::detail
