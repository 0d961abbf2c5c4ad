#pragma once
// Small POSIX helpers for the disk cache: RAII file descriptors and lock files, durable writes
// (write + fsync), directory fsync and recursive removal. Failures raise moejit::Error (io).

#include <filesystem>
#include <string>
#include <string_view>

namespace moejit::detail {

class FileDescriptor {
 public:
  FileDescriptor() = default;
  explicit FileDescriptor(int fd) noexcept : fd_(fd) {}
  FileDescriptor(FileDescriptor&& o) noexcept : fd_(o.release()) {}
  FileDescriptor& operator=(FileDescriptor&& o) noexcept;
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor();

  int get() const noexcept { return fd_; }
  int release() noexcept {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_ = -1;
};

/// An exclusive flock(2) on a lock file, held until destruction. Waits for other holders
/// (other processes, and other threads of this one, since each lock opens its own file).
class FileLock {
 public:
  explicit FileLock(const std::filesystem::path& path);
  FileLock(FileLock&&) noexcept = default;
  FileLock& operator=(FileLock&&) noexcept = default;
  ~FileLock();

 private:
  FileDescriptor fd_;
};

/// Writes `data` to a new file (0600) and fsyncs it.
void write_file_durable(const std::filesystem::path& path, std::string_view data);
/// Reads a whole file; throws when it cannot be opened.
std::string read_file(const std::filesystem::path& path);
/// fsync(2) on a directory, so a rename or create inside it is durable.
void fsync_directory(const std::filesystem::path& dir);
/// Creates a directory (and parents) with mode 0700 where missing.
void make_private_dirs(const std::filesystem::path& dir);
/// Removes a file or tree, ignoring errors (best effort cleanup).
void remove_quietly(const std::filesystem::path& path) noexcept;
/// A name unique to this process and call: "<pid>.<counter>.<random>".
std::string unique_suffix();

}  // namespace moejit::detail
