#include "fs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <set>
#include <utility>

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <unistd.h>

namespace moejit::detail {

namespace fs = std::filesystem;

void throw_io(std::string message, const fs::path& path, const char* call, int err) {
  throw Error({.kind = ErrorKind::io, .message = std::move(message), .file = path.string(), .call = call,
               .code = std::strerror(err)});
}

namespace {

// NOTE: only regular files and directories belong in the cache; anything else there was planted
// or left by mistake, and following it could read, write or delete outside the cache.
[[noreturn]] void refuse_in_cache(const fs::path& path, std::string_view found, std::string expected) {
  throw Error({.kind = ErrorKind::cache, .message = "refusing what the cache holds here", .file = path.string(),
               .found = std::string(found), .expected = std::move(expected)});
}

// What a name that open() refused is, for a message: "a symbolic link", "a directory", ...
std::string what_is(const Dir& dir, const std::string& name) {
  const auto st = dir.stat(name);
  return st ? std::string(file_type_name(st->st_mode)) : "nothing";
}

void write_all(int fd, std::string_view data, const fs::path& path) {
  std::size_t done = 0;
  while (done < data.size()) {
    const auto n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw_io("cannot write file", path, "write", n == 0 ? EIO : errno);
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) throw_io("cannot sync file", path, "fsync");
}

// Reads what an open regular file holds, at most `max_bytes` + 1 bytes (so that a larger one,
// or one that grew since fstat, shows as larger). `size` is the size fstat gave: a read that
// stops short there is the end (a regular file reads short only at its end), which spares the
// read that would return nothing.
std::string read_bounded(int fd, std::uint64_t size, std::uint64_t max_bytes, const fs::path& path) {
  std::string data;
  data.reserve(static_cast<std::size_t>(std::min(size, max_bytes)));
  char buf[1 << 16];
  while (data.size() <= max_bytes) {
    const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(sizeof buf, max_bytes + 1 - data.size()));
    const auto n = ::read(fd, buf, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_io("cannot read file", path, "read");
    if (n == 0) break;
    data.append(buf, static_cast<std::size_t>(n));
    if (static_cast<std::size_t>(n) < want && data.size() == size) break;
  }
  return data;
}

}  // namespace

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

std::optional<struct stat> Dir::stat(std::string_view name) const {
  const std::string n(name);
  struct stat st {};
  if (::fstatat(fd(), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) return st;
  if (errno == ENOENT) return std::nullopt;
  throw_io("cannot inspect", path_ / n, "fstatat");
}

std::vector<Dir::Listed> Dir::typed_names() const {
  if (::lseek(fd(), 0, SEEK_SET) != 0) throw_io("cannot list directory", path_, "lseek");
  std::vector<Listed> out;
  alignas(8) char buf[4096];
  for (;;) {
    const auto n = ::getdents64(fd(), buf, sizeof buf);
    if (n < 0) throw_io("cannot list directory", path_, "getdents64");
    if (n == 0) break;
    for (ssize_t at = 0; at < n;) {
      const auto* e = reinterpret_cast<const dirent64*>(buf + at);
      const std::string_view name = e->d_name;
      if (name != "." && name != "..") out.push_back({std::string(name), e->d_type});
      at += e->d_reclen;
    }
  }
  std::sort(out.begin(), out.end(), [](const Listed& a, const Listed& b) { return a.name < b.name; });
  return out;
}

std::vector<std::string> Dir::names() const {
  // NOTE: a descriptor of its own ("." reopened), so that listing never moves the offset of ours.
  FileDescriptor own(::openat(fd(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (own.get() < 0) throw_io("cannot list directory", path_, "openat");
  std::vector<std::string> out;
  for (auto& l : Dir(std::move(own), path_).typed_names()) out.push_back(std::move(l.name));
  return out;
}

std::optional<Dir> Dir::open_dir(std::string_view name, std::string* what) const {
  const std::string n(name);
  FileDescriptor child(::openat(fd(), n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (child.get() >= 0) return Dir(std::move(child), path_ / n);
  if (errno == ENOENT) return std::nullopt;
  if (errno == ELOOP || errno == ENOTDIR) {
    if (what) *what = what_is(*this, n);
    return std::nullopt;
  }
  throw_io("cannot open directory", path_ / n, "openat");
}

Dir open_directory(const fs::path& dir) {
  FileDescriptor fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) throw_io("cannot open directory", dir, "open");
  return Dir(std::move(fd), dir);
}

namespace {

FileDescriptor open_lock_file(const Dir& dir, const std::string& name) {
  const auto path = dir.path() / name;
  const std::string expected = "a regular lock file (a link is never followed inside the cache)";
  FileDescriptor fd(::openat(dir.fd(), name.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600));
  if (fd.get() < 0 && (errno == ELOOP || errno == EISDIR || errno == ENXIO)) {
    refuse_in_cache(path, what_is(dir, name), expected);
  }
  if (fd.get() < 0) throw_io("cannot open lock file", path, "openat");
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw_io("cannot inspect lock file", path, "fstat");
  if (!S_ISREG(st.st_mode)) refuse_in_cache(path, file_type_name(st.st_mode), expected);
  return fd;
}

Dir parent_of(const fs::path& file) {
  return open_directory(file.parent_path().empty() ? fs::path(".") : file.parent_path());
}

}  // namespace

FileLock::FileLock(const Dir& dir, const std::string& name) : fd_(open_lock_file(dir, name)) {
  while (::flock(fd_.get(), LOCK_EX) != 0) {
    if (errno != EINTR) throw_io("cannot lock", dir.path() / name, "flock");
  }
}

FileLock::FileLock(const fs::path& path) : FileLock(parent_of(path), path.filename().string()) {}

FileLock::~FileLock() {
  if (fd_.get() >= 0) ::flock(fd_.get(), LOCK_UN);
}

std::optional<FileLock> FileLock::try_lock(const Dir& dir, const std::string& name) {
  FileDescriptor fd = open_lock_file(dir, name);
  while (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) return std::nullopt;
    if (errno != EINTR) throw_io("cannot lock", dir.path() / name, "flock");
  }
  return FileLock(std::move(fd));
}

void write_new_file(const Dir& dir, const std::string& name, std::string_view data, unsigned mode) {
  FileDescriptor fd(::openat(dir.fd(), name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                             static_cast<mode_t>(mode)));
  if (fd.get() < 0) throw_io("cannot create file", dir.path() / name, "openat");
  write_all(fd.get(), data, dir.path() / name);
}

namespace {

[[noreturn]] void refuse_cache_file(const fs::path& path, std::string message, std::string found, std::uint64_t bytes,
                                    bool exact) {
  throw Error({.kind = ErrorKind::io, .message = std::move(message), .file = path.string(), .found = std::move(found),
               .expected = fmt::format("a regular file of {}{} bytes", exact ? "" : "at most ", bytes)});
}

// An error about a file the user named: input, naming the file (and the tensor, if any).
[[noreturn]] void input_failure(const InputFile& file, ErrorFields f) {
  f.kind = ErrorKind::input;
  f.file = file.path.string();
  f.pointer = file.pointer;
  throw Error(std::move(f));
}

}  // namespace

OpenFile open_file_at(const Dir& dir, const std::string& name, std::uint64_t max_bytes, bool exact, bool listed_regular) {
  auto path = dir.path() / name;
  const auto not_regular = [&](mode_t mode) {
    refuse_cache_file(path, "not a regular file", std::string(file_type_name(mode)), max_bytes, exact);
  };
  if (!listed_regular) {
    const auto before = dir.stat(name);
    if (!before) throw_io("cannot open file", path, "openat", ENOENT);
    if (!S_ISREG(before->st_mode)) not_regular(before->st_mode);
  }
  FileDescriptor fd(::openat(dir.fd(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0) throw_io("cannot open file", path, "openat");
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw_io("cannot inspect file", path, "fstat");
  if (!S_ISREG(st.st_mode)) not_regular(st.st_mode);
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size > max_bytes || (exact && size != max_bytes)) {
    refuse_cache_file(path, "unexpected file size", fmt::format("{} bytes", size), max_bytes, exact);
  }
  return {std::move(fd), size, std::move(path)};
}

std::string read_open_file(const OpenFile& file, std::uint64_t max_bytes, bool exact) {
  auto data = read_bounded(file.fd.get(), file.bytes, max_bytes, file.path);
  if (data.size() > max_bytes || (exact && data.size() != max_bytes)) {
    refuse_cache_file(file.path, "the file changed size while read", fmt::format("{} bytes", data.size()), max_bytes, exact);
  }
  return data;
}

std::string read_file_at(const Dir& dir, const std::string& name, std::uint64_t max_bytes, bool exact) {
  return read_open_file(open_file_at(dir, name, max_bytes, exact), max_bytes, exact);
}

Bytes::Bytes(std::string owned) {
  auto held = std::make_shared<const std::string>(std::move(owned));
  view_ = *held;
  holder_ = std::move(held);
}

Bytes map_open_file(const OpenFile& file) {
  const auto bytes = file.bytes;
  void* p = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, file.fd.get(), 0);
  if (p == MAP_FAILED) return Bytes(read_open_file(file, bytes, /*exact=*/true));
  Bytes out;
  out.holder_ = std::shared_ptr<const void>(p, [bytes](const void* q) { ::munmap(const_cast<void*>(q), bytes); });
  out.view_ = std::string_view(static_cast<const char*>(p), bytes);
  return out;
}

Bytes map_file_at(const Dir& dir, const std::string& name, std::uint64_t bytes) {
  return map_open_file(open_file_at(dir, name, bytes, /*exact=*/true));
}

std::string read_input_file(const InputFile& file) {
  const auto cannot = fmt::format("cannot read {}", file.what);
  const auto refuse_type = [&](mode_t mode) {
    input_failure(file, {.message = fmt::format("refusing to read a {} that is not a regular file", file.what),
                         .found = std::string(file_type_name(mode)), .expected = "a regular file"});
  };
  const auto refuse_size = [&](std::string found) {
    input_failure(file, {.message = fmt::format("{} too large", file.what), .found = std::move(found),
                         .expected = fmt::format("at most {} bytes (moejit's limit for a {})", file.max_bytes, file.what)});
  };
  // NOTE: stat before open, so that a device is never opened and a FIFO never waited on; the
  // open is O_NONBLOCK and checked again with fstat, for what was there by then.
  struct stat st {};
  if (::stat(file.path.c_str(), &st) != 0) {
    input_failure(file, {.message = cannot, .call = "stat", .code = std::strerror(errno)});
  }
  if (!S_ISREG(st.st_mode)) refuse_type(st.st_mode);
  if (static_cast<std::uint64_t>(st.st_size) > file.max_bytes) refuse_size(fmt::format("{} bytes", st.st_size));
  FileDescriptor fd(::open(file.path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0) input_failure(file, {.message = cannot, .call = "open", .code = std::strerror(errno)});
  if (::fstat(fd.get(), &st) != 0) input_failure(file, {.message = cannot, .call = "fstat", .code = std::strerror(errno)});
  if (!S_ISREG(st.st_mode)) refuse_type(st.st_mode);
  std::string data;
  try {
    data = read_bounded(fd.get(), static_cast<std::uint64_t>(st.st_size), file.max_bytes, file.path);
  } catch (const Error& e) {
    auto f = e.fields();
    f.message = cannot;
    input_failure(file, std::move(f));
  }
  if (data.size() > file.max_bytes) refuse_size(fmt::format("more than {} bytes", file.max_bytes));
  return data;
}

void fsync_directory(const fs::path& dir) { fsync_directory(open_directory(dir)); }

void fsync_directory(const Dir& dir) {
  if (::fsync(dir.fd()) != 0) throw_io("cannot sync directory", dir.path(), "fsync");
}

void make_private_dirs(const fs::path& dir) {
  struct stat st {};
  if (dir.empty() || ::stat(dir.c_str(), &st) == 0) return;  // what it is, the caller checks
  if (errno != ENOENT) throw_io("cannot inspect directory", dir, "stat");
  make_private_dirs(dir.parent_path());
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) throw_io("cannot create directory", dir, "mkdir");
}

int remove_tree(const Dir& dir, const std::string& name) noexcept {
  if (::unlinkat(dir.fd(), name.c_str(), 0) == 0 || errno == ENOENT) return 0;
  if (errno != EISDIR) return errno;
  try {
    std::string what;
    const auto sub = dir.open_dir(name, &what);
    if (!sub) return what.empty() ? 0 : ENOTDIR;  // gone, or swapped for a file since: leave it
    int first = 0;
    for (const auto& child : sub->names()) {
      const int err = remove_tree(*sub, child);
      if (first == 0) first = err;
    }
    if (::unlinkat(dir.fd(), name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT && first == 0) first = errno;
    return first;
  } catch (...) {
    return EIO;
  }
}

void remove_quietly(const fs::path& path) noexcept {
  try {
    remove_tree(parent_of(path), path.filename().string());
  } catch (...) {
  }
}

namespace {

[[noreturn]] void refuse_output(const fs::path& file, std::string_view option, std::string message, std::string found,
                                std::string expected) {
  throw Error({.kind = ErrorKind::usage, .message = std::move(message), .file = file.string(),
               .pointer = std::string(option), .found = std::move(found), .expected = std::move(expected)});
}

}  // namespace

void check_output_file(const fs::path& file, std::string_view option) {
  const std::string regular = "a regular file or a new name in an existing directory";
  if (file.empty()) refuse_output(file, option, "no output file named", "an empty path", regular);
  struct stat st {};
  if (::lstat(file.c_str(), &st) == 0) {
    if (S_ISREG(st.st_mode)) return;
    refuse_output(file, option, "refusing to write over what is not a regular file", std::string(file_type_name(st.st_mode)),
                  S_ISLNK(st.st_mode) ? regular + " (a symbolic link is not followed: name its target)" : regular);
  }
  if (errno != ENOENT && errno != ENOTDIR) throw_io("cannot inspect output file", file, "lstat");
  const auto parent = file.parent_path().empty() ? fs::path(".") : file.parent_path();
  std::error_code ec;
  if (!fs::is_directory(parent, ec)) {
    refuse_output(file, option, "the output file's directory does not exist or is not a directory", parent.string(),
                  "an existing directory");
  }
}

void make_output_dir(const fs::path& dir, std::string_view option) {
  const std::string wanted = "a directory, or a path where one can be created";
  if (dir.empty()) refuse_output(dir, option, "no output directory named", "an empty path", wanted);
  std::error_code ec;
  const auto status = fs::status(dir, ec);
  if (fs::is_directory(status)) return;
  if (fs::exists(status)) {
    struct stat st {};
    const bool known = ::stat(dir.c_str(), &st) == 0;
    refuse_output(dir, option, "not a directory", known ? std::string(file_type_name(st.st_mode)) : "", wanted);
  }
  if (!fs::create_directories(dir, ec) && ec) {
    refuse_output(dir, option, fmt::format("cannot create the directory ({})", ec.message()), "", wanted);
  }
}

OutputFiles::~OutputFiles() {
  if (published_) return;
  for (const auto& f : files_) ::unlink(f.staged.c_str());
}

void OutputFiles::add(const fs::path& file, std::string_view data) {
  check_output_file(file, option_);
  if (std::any_of(files_.begin(), files_.end(), [&](const Staged& f) { return f.target == file; })) {
    throw Error({.kind = ErrorKind::internal, .message = "one output file written twice", .file = file.string()});
  }
  const auto staged = fs::path(file).concat(".tmp." + unique_suffix());
  try {
    const Dir parent = parent_of(file);
    const auto name = staged.filename().string();
    FileDescriptor fd(::openat(parent.fd(), name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666));
    if (fd.get() < 0) throw_io("cannot create file", staged, "openat");
    files_.push_back({file, staged});  // created: from here on, removed unless published
    write_all(fd.get(), data, staged);
  } catch (const Error& e) {
    auto f = e.fields();  // NOTE: the user named `file`; the staged name means nothing to them
    f.message = "cannot write output file";
    f.file = file.string();
    f.pointer = option_;
    throw Error(std::move(f));
  }
}

void OutputFiles::publish() {
  // NOTE: checked again: a target that became a link or a directory since add() is refused
  // while every file can still be left as it was.
  for (const auto& f : files_) check_output_file(f.target, option_);
  std::set<fs::path> parents;
  for (const auto& f : files_) {
    if (::rename(f.staged.c_str(), f.target.c_str()) != 0) throw_io("cannot write output file", f.target, "rename");
    parents.insert(f.target.parent_path().empty() ? fs::path(".") : f.target.parent_path());
  }
  published_ = true;
  for (const auto& dir : parents) fsync_directory(dir);
}

void write_output_file(const fs::path& file, std::string_view data, std::string_view option) {
  OutputFiles out{std::string(option)};
  out.add(file, data);
  out.publish();
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
