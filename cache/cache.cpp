#include "cache.hpp"

#include <moejit/error.hpp>

#include "fs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>

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

std::uint64_t tree_bytes(const fs::path& dir) {
  std::uint64_t total = 0;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec)) {
    if (e.is_regular_file(ec)) total += e.file_size(ec);
  }
  return total;
}

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

void check_private_directory(const fs::path& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw Error({.kind = ErrorKind::cache, .message = "the cache path is not a directory", .file = dir.string()});
  }
  if (st.st_uid != ::geteuid()) {
    throw Error({.kind = ErrorKind::cache, .message = "refusing a cache directory owned by another user",
                 .file = dir.string(), .found = fmt::format("owner uid {}", st.st_uid),
                 .expected = fmt::format("owner uid {} (this user); set MOEJIT_CACHE_DIR", ::geteuid())});
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    throw Error({.kind = ErrorKind::cache, .message = "refusing a group- or world-writable cache directory",
                 .file = dir.string(), .found = fmt::format("mode {:04o}", st.st_mode & 07777),
                 .expected = "no group or world write permission (chmod go-w)"});
  }
}

std::shared_ptr<CacheEntry> read_entry(const fs::path& dir, const Key& key, std::string& problem) {
  auto entry = std::make_shared<CacheEntry>();
  try {
    entry->manifest = Manifest::from_json(read_file(dir / kManifestFile));
    entry->cubin = read_file(dir / kCubinFile);
  } catch (const Error& e) {
    problem = e.what();
    return nullptr;
  }
  const auto& m = entry->manifest;
  if (m.inputs.schema_version != kCacheSchemaVersion) {
    problem = fmt::format("schema {} (expected {})", m.inputs.schema_version, kCacheSchemaVersion);
  } else if (!(m.key == key)) {
    problem = fmt::format("manifest key {} does not match its directory", m.key.hex());
  } else if (!(make_key(m.inputs) == key)) {
    problem = "the key recomputed from the manifest does not match";
  } else if (entry->cubin.empty() || entry->cubin.size() != m.cubin_bytes) {
    problem = fmt::format("truncated cubin: {} bytes, manifest says {}", entry->cubin.size(), m.cubin_bytes);
  } else if (checksum(entry->cubin) != m.cubin_checksum) {
    problem = "cubin checksum mismatch";
  } else if (m.kernels.empty()) {
    problem = "no kernels in manifest";
  }
  return problem.empty() ? entry : nullptr;
}

Cache::Cache(const Options& options, const Compiler& compiler) : compiler_(compiler) {
  if (!options.disk_cache) return;
  make_private_dirs(options.cache_dir);
  check_private_directory(options.cache_dir);
  root_ = options.cache_dir / fmt::format("v{}", kCacheSchemaVersion);
  make_private_dirs(root_);
  check_private_directory(root_);
  for (const char* sub : {"tmp", "quarantine", "locks"}) make_private_dirs(root_ / sub);
}

KeyInputs Cache::inputs_of(const Contract& contract) const { return key_inputs(contract, compiler_.toolchain()); }

Key Cache::key_of(const Contract& contract) const { return make_key(inputs_of(contract)); }

fs::path Cache::entry_dir(const Key& key) const {
  const auto hex = key.hex();
  return root_ / hex.substr(0, 2) / hex;
}

fs::path Cache::lock_path(const Key& key) const { return root_ / "locks" / (key.hex() + ".lock"); }

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

void Cache::quarantine(const fs::path& dir) const {
  const auto target = root_ / "quarantine" / fmt::format("{}.{}", dir.filename().string(), unique_suffix());
  std::error_code ec;
  fs::rename(dir, target, ec);  // NOTE: if another process moved it first, it is gone already
}

std::shared_ptr<CacheEntry> Cache::load(const Key& key) const {
  const auto dir = entry_dir(key);
  std::error_code ec;
  if (!fs::exists(dir, ec)) return nullptr;
  std::string problem;
  auto entry = read_entry(dir, key, problem);
  if (!entry) {
    quarantine(dir);
    return nullptr;
  }
  // Last use, for `cache prune`: the manifest's mtime.
  fs::last_write_time(dir / kManifestFile, fs::file_time_type::clock::now(), ec);
  return entry;
}

std::shared_ptr<CacheEntry> Cache::publish(std::shared_ptr<CacheEntry> entry) const {
  const auto& key = entry->manifest.key;
  const auto stage = root_ / "tmp" / fmt::format("{}.{}", key.hex(), unique_suffix());
  make_private_dirs(stage);
  try {
    write_file_durable(stage / kCubinFile, entry->cubin);
    write_file_durable(stage / kManifestFile, entry->manifest.to_json());
    fsync_directory(stage);
    const auto final_dir = entry_dir(key);
    make_private_dirs(final_dir.parent_path());
    for (int attempt = 0; attempt < 2; ++attempt) {
      if (::rename(stage.c_str(), final_dir.c_str()) == 0) {
        fsync_directory(final_dir.parent_path());
        return entry;
      }
      if (errno != EEXIST && errno != ENOTEMPTY) {
        throw Error({.kind = ErrorKind::io, .message = "cannot publish cache entry", .file = final_dir.string(),
                     .call = "rename", .code = std::strerror(errno)});
      }
      // Another process published this key first: use theirs (load() moves it aside if corrupt,
      // and then the second attempt publishes ours).
      if (auto theirs = load(key)) {
        remove_quietly(stage);
        return theirs;
      }
    }
  } catch (...) {
    remove_quietly(stage);
    throw;
  }
  remove_quietly(stage);
  throw Error({.kind = ErrorKind::cache, .message = "could not publish cache entry", .found = key.hex()});
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
    key_lock.emplace(lock_path(key));
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

std::vector<EntryInfo> Cache::list() const {
  std::vector<EntryInfo> out;
  if (root_.empty()) return out;
  std::error_code ec;
  for (const auto& shard : fs::directory_iterator(root_, ec)) {
    const auto name = shard.path().filename().string();
    if (name.size() != 2 || !shard.is_directory()) continue;
    for (const auto& dir : fs::directory_iterator(shard.path(), ec)) {
      EntryInfo info;
      info.dir = dir.path();
      info.key_hex = dir.path().filename().string();
      info.bytes = tree_bytes(dir.path());
      info.last_used = fs::last_write_time(dir.path() / kManifestFile, ec);
      if (ec) info.last_used = fs::last_write_time(dir.path(), ec);
      try {
        info.manifest = Manifest::from_json(read_file(dir.path() / kManifestFile));
      } catch (const Error&) {
      }
      out.push_back(std::move(info));
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.key_hex < b.key_hex; });
  return out;
}

std::vector<EntryInfo> Cache::verify(bool repair) const {
  reclaim_staging();
  std::vector<EntryInfo> bad;
  for (auto& info : list()) {
    auto key = Key::from_hex(info.key_hex);
    if (!key) {
      info.problem = "directory name is not a key";
    } else {
      read_entry(info.dir, *key, info.problem);
    }
    if (info.problem.empty()) continue;
    if (repair) quarantine(info.dir);
    bad.push_back(std::move(info));
  }
  return bad;
}

Cache::PruneResult Cache::prune(std::uint64_t max_bytes) const {
  PruneResult r;
  auto entries = list();
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.last_used < b.last_used; });
  std::uint64_t total = 0;
  for (const auto& e : entries) total += e.bytes;
  for (const auto& e : entries) {
    if (total <= max_bytes) break;
    // NOTE: rename first, so a concurrent reader never sees a half-removed entry.
    const auto doomed = root_ / "tmp" / fmt::format("{}.prune.{}", e.key_hex, unique_suffix());
    std::error_code ec;
    fs::rename(e.dir, doomed, ec);
    if (ec) continue;
    remove_quietly(doomed);
    total -= e.bytes;
    r.freed_bytes += e.bytes;
    ++r.removed;
  }
  r.kept_bytes = total;
  std::error_code ec;
  for (const auto& q : fs::directory_iterator(root_ / "quarantine", ec)) remove_quietly(q.path());
  reclaim_staging();
  return r;
}

std::size_t Cache::reclaim_staging() const {
  if (root_.empty()) return 0;
  std::size_t reclaimed = 0;
  const auto now = fs::file_time_type::clock::now();
  const auto here = host_tag();
  std::error_code ec;
  for (const auto& t : fs::directory_iterator(root_ / "tmp", ec)) {
    const auto writer = staging_writer(t.path().filename().string());
    // NOTE: a stage is written only under its key's lock (get(), import_bundle()); holding it
    // here also keeps a new stage of that key from starting while this one goes.
    std::optional<FileLock> lock;
    if (writer.key && !writer.pruning) {
      lock = FileLock::try_lock(lock_path(*writer.key));
      if (!lock) continue;  // its writer is publishing it right now
    }
    std::error_code age_ec;
    const bool dead_here = writer.host == here && !process_alive(writer.pid);
    const bool old = now - fs::last_write_time(t.path(), age_ec) > kStaleStaging && !age_ec;
    if (!dead_here && !old) continue;
    remove_quietly(t.path());
    ++reclaimed;
  }
  return reclaimed;
}

}  // namespace moejit::detail
