#include "fs.hpp"

#include <moejit/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <limits>
#include <random>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace moejit::detail {

namespace {

[[noreturn]] void throw_errno(std::string message, const std::filesystem::path& path, const char* call) {
  throw Error({.kind = ErrorKind::io, .message = std::move(message), .file = path.string(), .call = call,
               .code = std::strerror(errno)});
}

}  // namespace

FileDescriptor& FileDescriptor::operator=(FileDescriptor&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.release();
  }
  return *this;
}

FileDescriptor::~FileDescriptor() {
  if (fd_ >= 0) ::close(fd_);
}

FileLock::FileLock(const std::filesystem::path& path)
    : fd_(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600)) {
  if (fd_.get() < 0) throw_errno("cannot open lock file", path, "open");
  while (::flock(fd_.get(), LOCK_EX) != 0) {
    if (errno != EINTR) throw_errno("cannot lock", path, "flock");
  }
}

FileLock::~FileLock() {
  if (fd_.get() >= 0) ::flock(fd_.get(), LOCK_UN);
}

std::optional<FileLock> FileLock::try_lock(const std::filesystem::path& path) {
  FileDescriptor fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (fd.get() < 0) throw_errno("cannot open lock file", path, "open");
  while (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) return std::nullopt;
    if (errno != EINTR) throw_errno("cannot lock", path, "flock");
  }
  return FileLock(std::move(fd));
}

void write_file_durable(const std::filesystem::path& path, std::string_view data, unsigned mode) {
  FileDescriptor fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, static_cast<mode_t>(mode)));
  if (fd.get() < 0) throw_errno("cannot create file", path, "open");
  std::size_t done = 0;
  while (done < data.size()) {
    const auto n = ::write(fd.get(), data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw_errno("cannot write file", path, "write");
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd.get()) != 0) throw_errno("cannot sync file", path, "fsync");
}

std::string read_file(const std::filesystem::path& path) {
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) throw_errno("cannot open file", path, "open");
  std::string data;
  char buf[1 << 16];
  for (;;) {
    const auto n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno("cannot read file", path, "read");
    if (n == 0) break;
    data.append(buf, static_cast<std::size_t>(n));
  }
  return data;
}

void fsync_directory(const std::filesystem::path& dir) {
  FileDescriptor fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) throw_errno("cannot open directory", dir, "open");
  if (::fsync(fd.get()) != 0) throw_errno("cannot sync directory", dir, "fsync");
}

void make_private_dirs(const std::filesystem::path& dir) {
  if (dir.empty() || std::filesystem::is_directory(dir)) return;
  make_private_dirs(dir.parent_path());
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) throw_errno("cannot create directory", dir, "mkdir");
}

void remove_quietly(const std::filesystem::path& path) noexcept {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

namespace {

[[noreturn]] void refuse_output(const std::filesystem::path& file, std::string_view option, std::string message,
                                std::string found, std::string expected) {
  throw Error({.kind = ErrorKind::usage, .message = std::move(message), .file = file.string(),
               .pointer = std::string(option), .found = std::move(found), .expected = std::move(expected)});
}

std::string_view file_type_name(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// The staged copy of an output file: removed on destruction unless renamed into place.
class StagedFile {
 public:
  explicit StagedFile(const std::filesystem::path& target)
      : target_(target), path_(target.string() + ".tmp." + unique_suffix()) {}
  StagedFile(const StagedFile&) = delete;
  StagedFile& operator=(const StagedFile&) = delete;
  ~StagedFile() {
    if (!published_) remove_quietly(path_);
  }

  const std::filesystem::path& path() const noexcept { return path_; }
  void publish() {
    if (::rename(path_.c_str(), target_.c_str()) != 0) throw_errno("cannot write output file", target_, "rename");
    published_ = true;
  }

 private:
  std::filesystem::path target_, path_;
  bool published_ = false;
};

}  // namespace

void check_output_file(const std::filesystem::path& file, std::string_view option) {
  const std::string regular = "a regular file or a new name in an existing directory";
  if (file.empty()) refuse_output(file, option, "no output file named", "an empty path", regular);
  struct stat st {};
  if (::lstat(file.c_str(), &st) == 0) {
    if (S_ISREG(st.st_mode)) return;
    refuse_output(file, option, "refusing to write over what is not a regular file", std::string(file_type_name(st.st_mode)),
                  S_ISLNK(st.st_mode) ? regular + " (a symbolic link is not followed: name its target)" : regular);
  }
  if (errno != ENOENT && errno != ENOTDIR) throw_errno("cannot inspect output file", file, "lstat");
  const auto parent = file.parent_path().empty() ? std::filesystem::path(".") : file.parent_path();
  std::error_code ec;
  if (!std::filesystem::is_directory(parent, ec)) {
    refuse_output(file, option, "the output file's directory does not exist or is not a directory", parent.string(),
                  "an existing directory");
  }
}

void make_output_dir(const std::filesystem::path& dir, std::string_view option) {
  const std::string wanted = "a directory, or a path where one can be created";
  if (dir.empty()) refuse_output(dir, option, "no output directory named", "an empty path", wanted);
  std::error_code ec;
  const auto status = std::filesystem::status(dir, ec);
  if (std::filesystem::is_directory(status)) return;
  if (std::filesystem::exists(status)) {
    struct stat st {};
    const bool known = ::stat(dir.c_str(), &st) == 0;
    refuse_output(dir, option, "not a directory", known ? std::string(file_type_name(st.st_mode)) : "", wanted);
  }
  if (!std::filesystem::create_directories(dir, ec) && ec) {
    refuse_output(dir, option, fmt::format("cannot create the directory ({})", ec.message()), "", wanted);
  }
}

void write_output_file(const std::filesystem::path& file, std::string_view data, std::string_view option) {
  check_output_file(file, option);
  StagedFile staged(file);
  try {
    write_file_durable(staged.path(), data, 0666);
  } catch (const Error& e) {
    auto f = e.fields();  // NOTE: the user named `file`; the staged name means nothing to them
    f.message = "cannot write output file";
    f.file = file.string();
    f.pointer = std::string(option);
    throw Error(std::move(f));
  }
  staged.publish();
  fsync_directory(file.parent_path().empty() ? std::filesystem::path(".") : file.parent_path());
}

std::string unique_suffix() {
  std::random_device rd;  // no state kept between calls: the kernel's entropy makes names unique
  return fmt::format("{}.{}.{:08x}{:08x}", host_tag(), ::getpid(), rd(), rd());
}

std::string host_tag() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "host";
  std::string tag(name, std::min<std::size_t>(std::strlen(name), 64));
  for (char& c : tag) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') c = '-';
  }
  return tag;
}

bool process_alive(long pid) noexcept {
  if (pid <= 0 || pid > std::numeric_limits<pid_t>::max()) return false;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH;
}

}  // namespace moejit::detail
