#pragma once
// Small POSIX helpers for the disk cache: RAII file descriptors and lock files, durable writes
// (write + fsync), directory fsync and recursive removal. Failures raise moejit::Error (io).

#include <filesystem>
#include <optional>
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

  /// The lock if nobody holds it now, else none; never waits.
  static std::optional<FileLock> try_lock(const std::filesystem::path& path);

 private:
  explicit FileLock(FileDescriptor fd) noexcept : fd_(std::move(fd)) {}
  FileDescriptor fd_;
};

/// Writes `data` to a new file (`mode`, less the umask) and fsyncs it.
void write_file_durable(const std::filesystem::path& path, std::string_view data, unsigned mode = 0600);
/// Reads a whole file; throws when it cannot be opened.
std::string read_file(const std::filesystem::path& path);
/// fsync(2) on a directory, so a rename or create inside it is durable.
void fsync_directory(const std::filesystem::path& dir);
/// Creates a directory (and parents) with mode 0700 where missing.
void make_private_dirs(const std::filesystem::path& dir);
/// Removes a file or tree, ignoring errors (best effort cleanup).
void remove_quietly(const std::filesystem::path& path) noexcept;
/// A name unique to this process and call: "<host>.<pid>.<random>", <host> as host_tag().
std::string unique_suffix();
/// This machine's name as unique_suffix() writes it: letters, digits and '-' (anything else
/// becomes '-'), at most 64 characters.
std::string host_tag();
/// True when a process with this id exists on this machine (kill(pid, 0) does not say ESRCH).
bool process_alive(long pid) noexcept;

/// Refuses (moejit::Error, usage) a path the user asked moejit to write a file at, when writing
/// there could not end in a regular file holding the data: an empty path, an existing directory,
/// device, FIFO or socket, a symbolic link (never followed nor replaced: name its target), or a
/// parent directory that does not exist. `option` ("--json", or empty) goes in Error::pointer.
void check_output_file(const std::filesystem::path& file, std::string_view option = {});
/// Writes a whole file at a path the user gave, so that it holds all of `data` or is left as it
/// was: checked as above, staged next to it as `<file>.tmp.<unique>`, fsynced, renamed over it.
/// On any failure the staged file is removed and the error (io) names `file`, never the staged
/// name. The file is made as a shell redirection makes one (0666 less the umask).
void write_output_file(const std::filesystem::path& file, std::string_view data, std::string_view option = {});
/// Makes a directory the user named for output files (`option`: "--out-dir"), with its parents.
/// An empty path, an existing path that is not a directory (or a link to one), or one that
/// cannot be created is a usage error naming `option` and `dir`.
void make_output_dir(const std::filesystem::path& dir, std::string_view option);

}  // namespace moejit::detail
