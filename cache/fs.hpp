#pragma once
// Small POSIX helpers for the disk cache and the files the CLI reads and writes: RAII file
// descriptors, directories held open so that every name below one is reached without following
// a link (openat, O_NOFOLLOW), lock files, bounded reads, durable writes and removal that never
// leaves the tree it was given. Failures raise moejit::Error (io unless said otherwise).

#include <moejit/error.hpp>

#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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

/// Throws moejit::Error (io): `message`, the path, the call and the errno's text.
[[noreturn]] void throw_io(std::string message, const std::filesystem::path& path, const char* call, int err = errno);
/// "a regular file", "a symbolic link", "a FIFO", ... for messages.
std::string_view file_type_name(mode_t mode);

/// A directory held open (O_DIRECTORY): names below it are opened relative to it (openat), so a
/// link swapped in for a directory above never redirects them. `path` is for messages only.
class Dir {
 public:
  Dir() = default;
  Dir(FileDescriptor fd, std::filesystem::path path) noexcept : fd_(std::move(fd)), path_(std::move(path)) {}

  int fd() const noexcept { return fd_.get(); }
  const std::filesystem::path& path() const noexcept { return path_; }
  explicit operator bool() const noexcept { return fd_.get() >= 0; }

  /// What `name` is, not following a link; none when it does not exist.
  std::optional<struct stat> stat(std::string_view name) const;
  /// The names it holds, "." and ".." left out. A name that is not valid UTF-8 is kept as it is.
  std::vector<std::string> names() const;
  struct Listed {
    std::string name;
    unsigned char type;  ///< as the listing says: DT_REG, DT_DIR, DT_LNK, ...; DT_UNKNOWN where the file system does not
  };
  /// names() with each name's type, read through this descriptor from its start (no descriptor
  /// of its own: a few system calls fewer, for a Dir no other thread lists at the same time).
  std::vector<Listed> typed_names() const;
  /// The child directory `name`, not through a link; none when it does not exist, or when it is
  /// a link or not a directory (`what` then says which, e.g. "a symbolic link").
  std::optional<Dir> open_dir(std::string_view name, std::string* what = nullptr) const;

 private:
  FileDescriptor fd_;
  std::filesystem::path path_;
};

/// A directory by the path the user gave (a link to one is followed); throws io naming it.
Dir open_directory(const std::filesystem::path& dir);

/// An exclusive flock(2) on a lock file, held until destruction. Waits for other holders
/// (other processes, and other threads of this one, since each lock opens its own file). The
/// lock file is opened O_NOFOLLOW: a link or anything but a regular file in its place is refused
/// (moejit::Error, cache), never followed nor created through.
class FileLock {
 public:
  FileLock(const Dir& dir, const std::string& name);
  explicit FileLock(const std::filesystem::path& path);
  FileLock(FileLock&&) noexcept = default;
  FileLock& operator=(FileLock&&) noexcept = default;
  ~FileLock();

  /// The lock if nobody holds it now, else none; never waits.
  static std::optional<FileLock> try_lock(const Dir& dir, const std::string& name);

 private:
  explicit FileLock(FileDescriptor fd) noexcept : fd_(std::move(fd)) {}
  FileDescriptor fd_;
};

/// Creates `name` in `dir` as a new file (O_EXCL, never through a link; `mode` less the umask),
/// writes all of `data` and fsyncs it.
void write_new_file(const Dir& dir, const std::string& name, std::string_view data, unsigned mode = 0600);
/// A regular file opened for reading, its size when opened, and its path (for messages).
struct OpenFile {
  FileDescriptor fd;
  std::uint64_t bytes = 0;
  std::filesystem::path path;
};
/// The regular file `name` of `dir` opened for reading as read_file_at opens it (not through a
/// link; refused before it is opened when stat says it is not a regular file, and after, with
/// fstat, for what was there by then; O_NONBLOCK; its size checked). `listed_regular`: a listing
/// of `dir` (Dir::typed_names) has just said that it is a regular file, which spares the stat.
OpenFile open_file_at(const Dir& dir, const std::string& name, std::uint64_t max_bytes, bool exact = false,
                      bool listed_regular = false);
/// What an opened file holds, read and checked as read_file_at reads and checks it.
std::string read_open_file(const OpenFile& file, std::uint64_t max_bytes, bool exact = false);
/// Reads the regular file `name` of `dir`, not through a link. A link, FIFO, device, socket or
/// directory is refused before a byte is read (opened O_NONBLOCK, then fstat), as is a file
/// larger than `max_bytes`; `exact` also refuses one of another size. Errors are io errors whose
/// message says what was wrong ("a FIFO, not a regular file").
std::string read_file_at(const Dir& dir, const std::string& name, std::uint64_t max_bytes, bool exact = false);

/// Read-only bytes that share what holds them: a string of their own, or a private read-only
/// mapping of a file (map_file_at). Copies share the holder.
class Bytes {
 public:
  Bytes() = default;
  Bytes(std::string owned);  // NOLINT(google-explicit-constructor): a string is bytes
  const char* data() const noexcept { return view_.data(); }
  std::size_t size() const noexcept { return view_.size(); }
  bool empty() const noexcept { return view_.empty(); }
  std::string_view view() const noexcept { return view_; }
  operator std::string_view() const noexcept { return view_; }  // NOLINT(google-explicit-constructor)
  friend bool operator==(const Bytes& a, std::string_view b) noexcept { return a.view_ == b; }

 private:
  friend Bytes map_open_file(const OpenFile& file);
  std::shared_ptr<const void> holder_;
  std::string_view view_;
};

/// The regular file `name` of `dir`, of exactly `bytes` bytes, checked as read_file_at checks it,
/// mapped read-only rather than read: no copy, and no fresh pages to fault in and zero (most of a
/// warm start's time went there). Where the file system cannot map it, it is read. NOTE: a mapped file cut short under the mapping faults (SIGBUS) on access;
/// the cache never writes a published file again (it stages new files and renames them in, and
/// removes by rename then unlink, which leave a mapping whole), so only a hand that truncates a
/// cache file in place could.
Bytes map_file_at(const Dir& dir, const std::string& name, std::uint64_t bytes);
/// An opened file's `bytes` mapped as map_file_at maps them (read where they cannot be mapped).
Bytes map_open_file(const OpenFile& file);
/// A file the user named for moejit to read, and what it may hold.
struct InputFile {
  std::filesystem::path path;
  std::string_view what;         ///< ".npy file", "cache bundle": named in messages
  std::uint64_t max_bytes = 0;   ///< the documented limit for such files
  std::string pointer = {};      ///< goes in Error::pointer (a tensor's name), may be empty
};
/// Reads a whole file the user named (a link to one is followed: they named it). A FIFO, device,
/// socket or directory is refused before it is opened for reading (stat, then an O_NONBLOCK open
/// checked with fstat), and a file larger than `max_bytes` before a byte is read. Every failure,
/// a missing or unreadable file included, is moejit::Error (input) naming the file.
std::string read_input_file(const InputFile& file);
/// fsync(2) on a directory, so a rename or create inside it is durable.
void fsync_directory(const std::filesystem::path& dir);
void fsync_directory(const Dir& dir);
/// Creates a directory (and parents) with mode 0700 where missing; a link is followed (the user
/// named the path). Throws io naming the path.
void make_private_dirs(const std::filesystem::path& dir);
/// Removes `name` from `dir`: a file or link is unlinked (a link's target is never touched), a
/// directory emptied the same way, depth first, and removed. Returns 0, or the errno of the first
/// failure (ENOENT counts as done).
int remove_tree(const Dir& dir, const std::string& name) noexcept;
/// Removes a file or tree by path, ignoring errors, never following a link below `path`.
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

/// Files the user asked for, published together: add() checks a target as check_output_file()
/// does, then writes its data to a new file beside it (`<file>.tmp.<unique>`, created O_EXCL and
/// O_NOFOLLOW, so nothing is written through a link planted there) and fsyncs it; publish()
/// checks every target again and renames each staged file over it, once all were written. Any
/// failure before publish() leaves every target as it was and no staged file; errors name the
/// user's path, never the staged one. Files are made as a shell redirection makes them (0666 less
/// the umask).
class OutputFiles {
 public:
  /// `option` ("-o", "--out-dir", or empty) goes in Error::pointer.
  explicit OutputFiles(std::string option = {}) : option_(std::move(option)) {}
  OutputFiles(const OutputFiles&) = delete;
  OutputFiles& operator=(const OutputFiles&) = delete;
  ~OutputFiles();

  void add(const std::filesystem::path& file, std::string_view data);
  void publish();

 private:
  struct Staged {
    std::filesystem::path target, staged;
  };
  std::string option_;
  std::vector<Staged> files_;
  bool published_ = false;
};

/// One file written as OutputFiles writes a set of them.
void write_output_file(const std::filesystem::path& file, std::string_view data, std::string_view option = {});
/// Makes a directory the user named for output files (`option`: "--out-dir"), with its parents.
/// An empty path, an existing path that is not a directory (or a link to one), or one that
/// cannot be created is a usage error naming `option` and `dir`.
void make_output_dir(const std::filesystem::path& dir, std::string_view option);

}  // namespace moejit::detail
