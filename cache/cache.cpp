#include "cache.hpp"

#include <moejit/error.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace moejit::detail {

namespace fs = std::filesystem;

namespace {

constexpr const char* kCubinFile = "kernel.cubin";
constexpr const char* kManifestFile = "manifest.json";
constexpr auto kStaleStaging = std::chrono::hours(1);

// Who wrote a directory under tmp/, from its name: "<key>.<host>.<pid>.<random>" for a stage,
// "<key>.prune.<host>.<pid>.<random>" for an entry being pruned (unique_suffix() makes the tail;
// names from before it held the host have no host and are judged by age alone).
struct StagingWriter {
  std::optional<Key> key;
  bool pruning = false;
  std::string host;
  long pid = 0;
};

StagingWriter staging_writer(std::string_view name) {
  std::vector<std::string_view> parts;
  for (std::size_t start = 0;;) {
    const auto dot = std::min(name.find('.', start), name.size());
    parts.push_back(name.substr(start, dot - start));
    if (dot == name.size()) break;
    start = dot + 1;
  }
  StagingWriter w;
  w.key = Key::from_hex(parts[0]);
  w.pruning = parts.size() > 1 && parts[1] == "prune";
  if (parts.size() == (w.pruning ? 5u : 4u)) {
    const auto pid = parts[parts.size() - 2];
    const auto [end, ec] = std::from_chars(pid.data(), pid.data() + pid.size(), w.pid);
    if (ec == std::errc() && end == pid.data() + pid.size()) w.host = std::string(parts[parts.size() - 3]);
  }
  return w;
}

bool is_shard_name(std::string_view name) {
  const auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); };
  return name.size() == 2 && std::all_of(name.begin(), name.end(), hex);
}

std::int64_t mtime_ns(const struct stat& st) {
  return static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

const std::string kNoLinks = "(inside the cache a link is never followed)";

[[noreturn]] void refuse_tree(const fs::path& path, std::string message, std::string found, std::string expected) {
  throw Error({.kind = ErrorKind::cache, .message = std::move(message), .file = path.string(), .found = std::move(found),
               .expected = std::move(expected)});
}

// What keeps a directory of the tree from being this user's own; empty when nothing.
std::string not_private(const struct stat& st) {
  if (!S_ISDIR(st.st_mode)) return fmt::format("{}, not a directory", file_type_name(st.st_mode));
  if (st.st_uid != ::geteuid()) return fmt::format("owned by uid {}, not this user (uid {})", st.st_uid, ::geteuid());
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return fmt::format("mode {:04o}, writable by group or others", st.st_mode & 07777);
  }
  return {};
}

// The cache's rule for every directory of its tree, the root's included, on what fstat says of it.
void check_private(const struct stat& st, const fs::path& path) {
  if (st.st_uid != ::geteuid()) {
    refuse_tree(path, "refusing a cache directory owned by another user", fmt::format("owner uid {}", st.st_uid),
                fmt::format("owner uid {} (this user); set MOEJIT_CACHE_DIR", ::geteuid()));
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    refuse_tree(path, "refusing a group- or world-writable cache directory", fmt::format("mode {:04o}", st.st_mode & 07777),
                "no group or world write permission (chmod go-w)");
  }
}

void check_private(const Dir& dir) {
  struct stat st {};
  if (::fstat(dir.fd(), &st) != 0) throw_io("cannot inspect cache directory", dir.path(), "fstat");
  check_private(st, dir.path());
}

void refuse_in_place_of_dir(const fs::path& path, std::string what) {
  refuse_tree(path, "refusing what the cache holds in place of a directory", std::move(what), "a directory " + kNoLinks);
}

// The directory `name` of the tree below `parent`, made (0700) when `create`; none when missing.
// Anything but this user's private directory there is refused, never followed.
std::optional<Dir> tree_dir(const Dir& parent, const std::string& name, bool create) {
  if (create && ::mkdirat(parent.fd(), name.c_str(), 0700) != 0 && errno != EEXIST) {
    throw_io("cannot create cache directory", parent.path() / name, "mkdirat");
  }
  std::string what;
  auto dir = parent.open_dir(name, &what);
  if (!dir && !what.empty()) refuse_in_place_of_dir(parent.path() / name, what);
  if (dir) check_private(*dir);
  return dir;
}

Dir required_dir(const Dir& parent, const std::string& name) {
  auto dir = tree_dir(parent, name, /*create=*/true);
  if (!dir) throw_io("cache directory removed while opened", parent.path() / name, "openat", ENOENT);
  return std::move(*dir);
}

// The root named by the user: made when missing; a link to it is followed only when it is this
// user's or root's (another user's link could point the cache anywhere, at any time).
Dir open_root(const fs::path& path) {
  make_private_dirs(path);
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) throw_io("cannot inspect the cache directory", path, "lstat");
  if (S_ISLNK(st.st_mode) && st.st_uid != ::geteuid() && st.st_uid != 0) {
    refuse_tree(path, "refusing a cache directory reached through another user's symbolic link",
                fmt::format("a link owned by uid {}", st.st_uid),
                fmt::format("a link of uid {} (this user) or root", ::geteuid()));
  }
  if (::stat(path.c_str(), &st) != 0) throw_io("cannot inspect the cache directory", path, "stat");
  if (!S_ISDIR(st.st_mode)) {
    refuse_tree(path, "the cache path is not a directory", std::string(file_type_name(st.st_mode)), "a directory");
  }
  Dir root = open_directory(path);
  check_private(root);
  return root;
}

// The name an entry gets when moved under tmp/ or quarantine/: its key, or a stand-in when its
// directory's name is not one (it could be anything, and too long once a suffix is added).
std::string moved_name(const std::string& name, std::string_view infix) {
  const auto key = Key::from_hex(name);
  return fmt::format("{}{}.{}", key ? key->hex() : "not-a-key", infix, unique_suffix());
}

// The directory of a stage, removed on destruction unless published.
class Stage {
 public:
  Stage(const Dir& tmp, std::string name) : tmp_(tmp), name_(std::move(name)) {
    if (::mkdirat(tmp_.fd(), name_.c_str(), 0700) != 0) {
      throw_io("cannot create staging directory", tmp_.path() / name_, "mkdirat");
    }
    dir_ = required_dir(tmp_, name_);
  }
  Stage(const Stage&) = delete;
  Stage& operator=(const Stage&) = delete;
  ~Stage() {
    if (!published_) remove_tree(tmp_, name_);
  }

  const Dir& dir() const noexcept { return dir_; }
  const std::string& name() const noexcept { return name_; }
  void published() noexcept { published_ = true; }

 private:
  const Dir& tmp_;
  std::string name_;
  Dir dir_;
  bool published_ = false;
};

}  // namespace

std::string_view to_string(Source source) noexcept {
  switch (source) {
    case Source::memory: return "memory";
    case Source::disk: return "disk";
    case Source::waited: return "waited";
    case Source::compiled: return "compiled";
  }
  return "?";
}

namespace {

std::string truncated(std::uint64_t bytes, std::uint64_t declared) {
  return fmt::format("truncated cubin: {} bytes, manifest says {}", bytes, declared);
}

// What is wrong with the manifest of an entry filed under `key`; empty when nothing. Its own
// checksum was checked by Manifest::from_json.
std::string manifest_problem(const Manifest& m, const Key& key) {
  if (m.inputs.schema_version != kCacheSchemaVersion) {
    return fmt::format("schema {} (expected {})", m.inputs.schema_version, kCacheSchemaVersion);
  }
  if (!(m.key == key)) return fmt::format("manifest key {} does not match its directory", m.key.hex());
  if (!(make_key(m.inputs) == key)) return "the key recomputed from the manifest does not match";
  if (m.cubin_bytes == 0 || m.cubin_bytes > kMaxCubinBytes) {
    return fmt::format("the manifest declares a cubin of {} bytes (expected 1 to {})", m.cubin_bytes, kMaxCubinBytes);
  }
  if (m.kernels.empty()) return "no kernels in manifest";
  for (const auto& k : m.kernels) {
    if (k.name_expression.empty() || k.lowered_name.empty()) return "a kernel of the manifest has no name";
  }
  return {};
}

// What is wrong with the cubin of an entry whose manifest checks; empty when nothing.
std::string cubin_problem(const CacheEntry& entry) {
  const auto& m = entry.manifest;
  if (entry.cubin.size() != m.cubin_bytes) return truncated(entry.cubin.size(), m.cubin_bytes);
  if (checksum(entry.cubin) != m.cubin_checksum) return "cubin checksum mismatch";
  return {};
}

}  // namespace

std::string entry_problem(const CacheEntry& entry, const Key& key) {
  if (auto problem = manifest_problem(entry.manifest, key); !problem.empty()) return problem;
  return cubin_problem(entry);
}

namespace {

// What is wrong with the files of an entry directory: exactly a regular kernel.cubin and
// manifest.json, in a directory of this user's; empty when nothing. `listed` gets the listing
// (kernel.cubin first).
std::string layout_problem(const Dir& dir, std::vector<Dir::Listed>& listed) {
  struct stat st {};
  if (::fstat(dir.fd(), &st) != 0) return fmt::format("cannot inspect ({})", std::strerror(errno));
  if (auto why = not_private(st); !why.empty()) return fmt::format("the entry's directory is {}", why);
  listed = dir.typed_names();
  if (listed.size() != 2 || listed[0].name != kCubinFile || listed[1].name != kManifestFile) {
    std::vector<std::string> names;
    for (const auto& l : listed) names.push_back(l.name);
    const auto held = names.empty() ? "nothing" : fmt::format("{}", fmt::join(names, ", "));
    return fmt::format("the entry holds {} (expected {} and {})", held, kCubinFile, kManifestFile);
  }
  for (const auto& [name, type] : listed) {
    if (type == DT_REG) continue;  // NOTE: the listing's type spares a stat
    const auto file = dir.stat(name);
    if (file && !S_ISREG(file->st_mode)) {
      return fmt::format("{} is {}, not a regular file", name, file_type_name(file->st_mode));
    }
  }
  return {};
}

// read_entry() on the entry's directory, opened.
std::shared_ptr<CacheEntry> read_entry_dir(const Dir& dir, const Key& key, std::string& problem) {
  try {
    std::vector<Dir::Listed> listed;
    problem = layout_problem(dir, listed);
    if (!problem.empty()) return nullptr;
    // NOTE: each file opened once; the cubin's size from its fstat, before its manifest is read.
    const auto cubin = open_file_at(dir, kCubinFile, kMaxCubinBytes, /*exact=*/false, listed[0].type == DT_REG);
    auto entry = std::make_shared<CacheEntry>();
    entry->manifest = Manifest::from_json(
        read_open_file(open_file_at(dir, kManifestFile, kMaxManifestBytes, /*exact=*/false, listed[1].type == DT_REG), kMaxManifestBytes));
    // NOTE: the manifest is checked before the cubin is read: its size bounds the read.
    if (problem = manifest_problem(entry->manifest, key); !problem.empty()) return nullptr;
    if (cubin.bytes != entry->manifest.cubin_bytes) {
      problem = truncated(cubin.bytes, entry->manifest.cubin_bytes);
      return nullptr;
    }
    entry->cubin = map_open_file(cubin);
    problem = cubin_problem(*entry);
    return problem.empty() ? entry : nullptr;
  } catch (const Error& e) {
    problem = e.what();
    return nullptr;
  }
}

}  // namespace

std::shared_ptr<CacheEntry> read_entry(const Dir& shard, const std::string& name, const Key& key, std::string& problem) {
  try {
    std::string what;
    const auto dir = shard.open_dir(name, &what);
    if (!dir) {
      problem = what.empty() ? "the entry is gone" : fmt::format("the entry is {}, not a directory", what);
      return nullptr;
    }
    return read_entry_dir(*dir, key, problem);
  } catch (const Error& e) {
    problem = e.what();
    return nullptr;
  }
}

Cache::Cache(const Options& options, const Compiler& compiler) : compiler_(compiler) {
  if (!options.disk_cache) return;
  if (options.cache_dir.empty()) {
    throw Error({.kind = ErrorKind::usage, .message = "no cache directory: MOEJIT_CACHE_DIR, XDG_CACHE_HOME and HOME are unset",
                 .expected = "MOEJIT_CACHE_DIR set to a directory of this user's"});
  }
  const Dir top = open_root(options.cache_dir);
  root_ = options.cache_dir / fmt::format("v{}", kCacheSchemaVersion);
  dir_ = required_dir(top, root_.filename().string());
  tmp_ = required_dir(dir_, "tmp");
  quarantine_ = required_dir(dir_, "quarantine");
  locks_ = required_dir(dir_, "locks");
  // The shards too, now: a bad one refuses the whole cache once, not each key filed under it. A
  // stat each is enough here: every use opens the shard and checks it again (tree_dir).
  for (const auto& name : dir_.names()) {
    if (!is_shard_name(name)) continue;
    const auto st = dir_.stat(name);
    if (!st) continue;  // removed since listed
    if (!S_ISDIR(st->st_mode)) refuse_in_place_of_dir(dir_.path() / name, std::string(file_type_name(st->st_mode)));
    check_private(*st, dir_.path() / name);
  }
}

KeyInputs Cache::inputs_of(const Contract& contract) const { return key_inputs(contract, compiler_.toolchain()); }

Key Cache::key_of(const Contract& contract) const { return make_key(inputs_of(contract)); }

std::string Cache::lock_name(const Key& key) { return key.hex() + ".lock"; }

std::optional<Dir> Cache::shard(std::string_view name, bool create) const {
  return tree_dir(dir_, std::string(name), create);
}

const CacheEntry* Cache::find(const Key& key) const noexcept {
  std::shared_lock lock(mutex_);
  auto it = memory_.find(key);
  return it == memory_.end() ? nullptr : it->second.get();
}

std::shared_ptr<const CacheEntry> Cache::remember(std::shared_ptr<CacheEntry> entry) {
  std::unique_lock lock(mutex_);
  auto [it, inserted] = memory_.emplace(entry->manifest.key, std::move(entry));
  return it->second;
}

int Cache::quarantine(const Dir& from, const std::string& name) const {
  const auto target = moved_name(name, "");
  if (::renameat(from.fd(), name.c_str(), quarantine_.fd(), target.c_str()) == 0) return 0;
  return errno == ENOENT ? 0 : errno;  // NOTE: ENOENT: another process moved it first
}

int Cache::remove_entry(const Dir& from, const std::string& name) const {
  // NOTE: rename first, so a concurrent reader never sees a half-removed entry.
  const auto doomed = moved_name(name, ".prune");
  if (::renameat(from.fd(), name.c_str(), tmp_.fd(), doomed.c_str()) != 0) return errno == ENOENT ? 0 : errno;
  return remove_tree(tmp_, doomed);
}

std::shared_ptr<CacheEntry> Cache::load(const Key& key) const {
  const auto hex = key.hex();
  const auto dir = shard(hex.substr(0, 2), /*create=*/false);
  if (!dir) return nullptr;
  std::string what, problem;
  std::shared_ptr<CacheEntry> entry;
  try {
    const auto entry_dir = dir->open_dir(hex, &what);
    if (!entry_dir && what.empty()) return nullptr;  // not there
    if (entry_dir) entry = read_entry_dir(*entry_dir, key, problem);
    // Last use, for `cache prune`: the manifest's mtime (best effort: a read-only cache serves too).
    if (entry) ::utimensat(entry_dir->fd(), kManifestFile, nullptr, AT_SYMLINK_NOFOLLOW);
  } catch (const Error&) {
  }
  if (!entry) quarantine(*dir, hex);  // NOTE: where it cannot be moved (a read-only cache), publishing fails next
  return entry;
}

std::shared_ptr<CacheEntry> Cache::publish(std::shared_ptr<CacheEntry> entry) const {
  const auto hex = entry->manifest.key.hex();
  Stage stage(tmp_, fmt::format("{}.{}", hex, unique_suffix()));
  write_new_file(stage.dir(), kCubinFile, entry->cubin);
  write_new_file(stage.dir(), kManifestFile, entry->manifest.to_json());
  fsync_directory(stage.dir());
  const auto target = shard(hex.substr(0, 2), /*create=*/true);
  if (!target) throw_io("cache directory removed while opened", dir_.path() / hex.substr(0, 2), "openat", ENOENT);
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (::renameat(tmp_.fd(), stage.name().c_str(), target->fd(), hex.c_str()) == 0) {
      stage.published();
      fsync_directory(*target);
      return entry;
    }
    if (errno != EEXIST && errno != ENOTEMPTY && errno != ENOTDIR) {
      throw_io("cannot publish cache entry", target->path() / hex, "renameat");
    }
    // Something is there: another process's entry (use it), or something bad (a file, a link:
    // load() moves it aside, and the second attempt publishes ours).
    if (auto theirs = load(entry->manifest.key)) return theirs;
  }
  throw Error({.kind = ErrorKind::io, .message = "could not publish cache entry", .file = (target->path() / hex).string()});
}

Cache::Result Cache::get(const Contract& contract) {
  const auto inputs = inputs_of(contract);
  const auto key = make_key(inputs);
  {
    std::shared_lock lock(mutex_);
    if (auto it = memory_.find(key); it != memory_.end()) return {it->second, Source::memory};
  }
  std::optional<FileLock> key_lock;
  if (!root_.empty()) {
    if (auto e = load(key)) return {remember(std::move(e)), Source::disk};
    key_lock.emplace(locks_, lock_name(key));
    if (auto e = load(key)) return {remember(std::move(e)), Source::waited};
  }

  auto out = compiler_.compile(contract);
  if (out.binary.empty()) {
    throw Error({.kind = ErrorKind::compile, .message = "NVRTC produced an empty cubin", .source = contract.source});
  }
  auto entry = std::make_shared<CacheEntry>();
  entry->manifest = Manifest{.key = key, .inputs = inputs, .cubin_bytes = out.binary.size(),
                             .cubin_checksum = checksum(out.binary), .kernels = std::move(out.kernels),
                             .compile_seconds = out.seconds, .created = utc_now()};
  entry->cubin = std::move(out.binary);
  if (!root_.empty()) entry = publish(std::move(entry));
  return {remember(std::move(entry)), Source::compiled};
}

namespace {

// One entry as `cache ls` shows it: never through a link, the manifest only when it checks.
EntryInfo entry_info(const Dir& shard, const std::string& shard_name, const std::string& name) {
  EntryInfo info{.dir = shard.path() / name, .shard = shard_name, .key_hex = name};
  const auto st = shard.stat(name);
  if (st) info.last_used_ns = mtime_ns(*st);
  const auto dir = st && S_ISDIR(st->st_mode) ? shard.open_dir(name) : std::nullopt;
  if (!dir) return info;
  for (const auto& file : dir->names()) {
    const auto f = dir->stat(file);
    if (!f || !S_ISREG(f->st_mode)) continue;
    info.bytes += static_cast<std::uint64_t>(f->st_size);
    if (file == kManifestFile) info.last_used_ns = mtime_ns(*f);
  }
  try {
    info.manifest = Manifest::from_json(read_file_at(*dir, kManifestFile, kMaxManifestBytes));
  } catch (const Error&) {
  }
  return info;
}

}  // namespace

std::vector<EntryInfo> Cache::list() const {
  std::vector<EntryInfo> out;
  if (root_.empty()) return out;
  for (const auto& shard_name : dir_.names()) {
    if (!is_shard_name(shard_name)) continue;
    const auto dir = shard(shard_name, /*create=*/false);
    if (!dir) continue;
    for (const auto& name : dir->names()) out.push_back(entry_info(*dir, shard_name, name));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.key_hex < b.key_hex; });
  return out;
}

std::vector<EntryInfo> Cache::verify(bool repair) const {
  reclaim_staging();
  std::vector<EntryInfo> bad;
  for (auto& info : list()) {
    const auto dir = shard(info.shard, /*create=*/false);
    if (!dir) continue;  // removed since listed
    const auto key = Key::from_hex(info.key_hex);
    if (!key || key->hex() != info.key_hex) {
      info.problem = "directory name is not a key";
    } else if (info.key_hex.substr(0, 2) != info.shard) {
      info.problem = fmt::format("filed under {}, not under its key's first two digits", info.shard);
    } else {
      read_entry(*dir, info.key_hex, *key, info.problem);
    }
    if (info.problem.empty()) continue;
    if (repair) {
      if (const int err = quarantine(*dir, info.key_hex)) info.not_moved = std::strerror(err);
    }
    bad.push_back(std::move(info));
  }
  return bad;
}

Cache::PruneResult Cache::prune(std::uint64_t max_bytes) const {
  PruneResult r;
  auto entries = list();
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.last_used_ns < b.last_used_ns; });
  std::uint64_t total = 0;
  for (const auto& e : entries) total += e.bytes;
  std::size_t failed = 0;
  int first_error = 0;
  auto failure = [&](int err) {
    ++failed;
    if (first_error == 0) first_error = err;
  };
  for (const auto& e : entries) {
    if (total <= max_bytes) break;
    const auto dir = shard(e.shard, /*create=*/false);
    if (const int err = dir ? remove_entry(*dir, e.key_hex) : 0) {
      failure(err);
      continue;
    }
    total -= e.bytes;
    r.freed_bytes += e.bytes;
    ++r.removed;
  }
  r.kept_bytes = total;
  for (const auto& q : quarantine_.names()) {
    if (const int err = remove_tree(quarantine_, q)) failure(err);
  }
  reclaim_staging();
  if (failed > 0) {
    throw Error({.kind = ErrorKind::io,
                 .message = fmt::format("prune could not remove {} of what it had to ({} entries removed)", failed, r.removed),
                 .file = root_.string(), .code = std::strerror(first_error)});
  }
  return r;
}

std::size_t Cache::reclaim_staging() const {
  if (root_.empty()) return 0;
  std::size_t reclaimed = 0;
  const auto now = now_ns();
  const auto stale = std::chrono::duration_cast<std::chrono::nanoseconds>(kStaleStaging).count();
  const auto here = host_tag();
  for (const auto& name : tmp_.names()) {
    const auto writer = staging_writer(name);
    // NOTE: a stage is written only under its key's lock (get(), import_bundle()); holding it
    // here also keeps a new stage of that key from starting while this one goes.
    std::optional<FileLock> lock;
    if (writer.key && !writer.pruning) {
      try {
        lock = FileLock::try_lock(locks_, lock_name(*writer.key));
      } catch (const Error&) {
        continue;  // a lock it cannot take (a read-only cache, a bad lock file): leave the stage
      }
      if (!lock) continue;  // its writer is publishing it right now
    }
    const auto st = tmp_.stat(name);
    if (!st) continue;
    const bool dead_here = writer.host == here && !process_alive(writer.pid);
    const bool old = now - mtime_ns(*st) > stale;
    if (!dead_here && !old) continue;
    if (remove_tree(tmp_, name) == 0) ++reclaimed;
  }
  return reclaimed;
}

}  // namespace moejit::detail
