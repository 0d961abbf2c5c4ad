#include "fs.hpp"

#include <moejit/error.hpp>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
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

void write_file_durable(const std::filesystem::path& path, std::string_view data) {
  FileDescriptor fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
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

std::string unique_suffix() {
  std::random_device rd;  // no state kept between calls: the kernel's entropy makes names unique
  return fmt::format("{}.{:08x}{:08x}", ::getpid(), rd(), rd());
}

}  // namespace moejit::detail
