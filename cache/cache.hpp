#pragma once
// The cubin cache: a memory map in front of a disk store under $MOEJIT_CACHE_DIR/v<schema>/.
//
//   v3/<2 hex>/<key>/{kernel.cubin, manifest.json}   published entries (v3: compiler/key.hpp's schema)
//   v3/tmp/<key>.<host>.<pid>.<random>/               entries being staged (never read)
//   v3/quarantine/<key>.<unique>/                     bad entries moved aside
//   v3/locks/<key>.lock                               flock(2): one compile per key at a time
//
// An entry is staged, fsynced and renamed into place, so a reader sees a whole entry or none.
// Every read checks the manifest's own checksum, recomputes the key from it and checks the
// cubin's checksum; an entry that fails is moved aside and recompiled, never loaded.
//
// NOTE: every name inside the tree is reached from a directory held open (openat, O_NOFOLLOW):
// no link is ever followed, and only regular files and directories are used. Each directory of
// the tree must be owned by this user and not writable by group or others; a tree that breaks
// this is refused (ErrorKind::cache), a single bad entry is moved aside.

#include <moejit/contract.hpp>
#include <moejit/options.hpp>

#include "compiler/key.hpp"
#include "compiler/nvrtc.hpp"
#include "fs.hpp"
#include "manifest.hpp"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace moejit::detail {

/// Where a lookup found its entry.
enum class Source {
  memory,    ///< already in this process
  disk,      ///< read from the disk store
  waited,    ///< another process compiled it while this one waited on the key's lock
  compiled,  ///< compiled by NVRTC here, then published
};
std::string_view to_string(Source source) noexcept;

struct CacheEntry {
  Manifest manifest;
  Bytes cubin;  ///< compiled here, or the disk store's file mapped
};

/// One entry of the disk store as `cache ls` / `verify` see it.
struct EntryInfo {
  std::filesystem::path dir;         ///< for messages
  std::string shard;                 ///< the two hex digits it is filed under
  std::string key_hex;               ///< its directory's name, as found (it may not be a key)
  std::uint64_t bytes = 0;           ///< its regular files' sizes
  std::int64_t last_used_ns = 0;     ///< the manifest's mtime (else the directory's)
  std::optional<Manifest> manifest;  ///< absent when unreadable or its checksum fails
  std::string problem;               ///< empty when the entry verifies
  std::string not_moved;             ///< verify(repair): why it could not be moved aside
};

/// The most a manifest and a cubin may hold: a file beyond is never read.
inline constexpr std::uint64_t kMaxManifestBytes = std::uint64_t{1} << 20;
inline constexpr std::uint64_t kMaxCubinBytes = std::uint64_t{1} << 30;
/// The largest bundle `cache import` reads (and `cache export` writes).
inline constexpr std::uint64_t kMaxBundleBytes = std::uint64_t{4} << 30;

class Cache {
 public:
  Cache(const Options& options, const Compiler& compiler);
  Cache(const Cache&) = delete;
  Cache& operator=(const Cache&) = delete;

  struct Result {
    std::shared_ptr<const CacheEntry> entry;
    Source source = Source::memory;
  };

  /// The entry of a contract: from memory, else the disk store (verified), else compiled and
  /// published. Thread-safe.
  Result get(const Contract& contract);
  /// Memory lookup by a precomputed key: no allocation, no hashing of strings.
  const CacheEntry* find(const Key& key) const noexcept;
  Key key_of(const Contract& contract) const;
  KeyInputs inputs_of(const Contract& contract) const;
  const Compiler& compiler() const noexcept { return compiler_; }
  /// `<cache_dir>/v<schema>`; empty when the cache is memory-only.
  const std::filesystem::path& root() const noexcept { return root_; }

  // Upkeep of the disk store.
  std::vector<EntryInfo> list() const;
  /// Verifies every entry; with `repair`, moves the bad ones aside (EntryInfo::not_moved says
  /// why one could not be). Returns the bad ones.
  std::vector<EntryInfo> verify(bool repair) const;
  struct PruneResult {
    std::size_t removed = 0;
    std::uint64_t freed_bytes = 0;
    std::uint64_t kept_bytes = 0;
  };
  /// Removes least recently used entries until the store holds at most `max_bytes`, plus
  /// quarantined entries and stale staging directories. Throws (io) when something it had to
  /// remove could not be (a read-only cache), after removing what it could.
  PruneResult prune(std::uint64_t max_bytes) const;
  /// Removes what a writer that died (a warmup killed while publishing) left under tmp/: a
  /// directory is reclaimed when nobody holds its key's lock (a stage is only written under it)
  /// and its writer is a process of this machine that no longer exists, or when it is older than
  /// an hour (a writer on another machine sharing the cache). Run by warmup, verify and prune;
  /// returns how many it removed.
  std::size_t reclaim_staging() const;
  /// Writes every valid entry into one bundle file; returns the number of entries. The file is
  /// written as write_output_file() does: a bad path (empty, a directory, device, FIFO, socket or
  /// symbolic link, a missing directory) is a usage error, and a failed write leaves nothing.
  std::size_t export_bundle(const std::filesystem::path& file) const;
  struct ImportResult {
    std::size_t imported = 0;
    std::size_t present = 0;
  };
  /// Reads a bundle (at most kMaxBundleBytes), verifies every entry as verify() does, then
  /// publishes them all; a bundle that fails any check publishes nothing (moejit::Error, input,
  /// naming the bundle), and a failure while publishing removes what this import published.
  ImportResult import_bundle(const std::filesystem::path& file);

 private:
  /// The shard directory of a key's two hex digits (created when `create`); none when missing.
  std::optional<Dir> shard(std::string_view name, bool create) const;
  /// A verified entry, or null when absent; a bad entry is moved aside (null).
  std::shared_ptr<CacheEntry> load(const Key& key) const;
  /// Stages, fsyncs and renames an entry into place; when another process won the race, its
  /// entry is loaded and returned instead.
  std::shared_ptr<CacheEntry> publish(std::shared_ptr<CacheEntry> entry) const;
  /// Moves `name` of `from` (whatever it is: never followed) into quarantine/; returns 0 or the
  /// errno (a name already gone counts as moved).
  int quarantine(const Dir& from, const std::string& name) const;
  /// Removes a published entry (renamed under tmp/ first, so no reader sees half of it); returns
  /// 0 or the errno.
  int remove_entry(const Dir& shard, const std::string& name) const;
  std::shared_ptr<const CacheEntry> remember(std::shared_ptr<CacheEntry> entry);
  /// The name of a key's lock file under locks/.
  static std::string lock_name(const Key& key);

  const Compiler& compiler_;
  std::filesystem::path root_;
  Dir dir_, tmp_, quarantine_, locks_;
  mutable std::shared_mutex mutex_;
  std::unordered_map<Key, std::shared_ptr<const CacheEntry>, KeyHash> memory_;
};

/// Verifies the entry `name` of a shard directory (a directory of this user holding exactly a
/// regular kernel.cubin and manifest.json, never through a link); returns the entry or sets
/// `problem`.
std::shared_ptr<CacheEntry> read_entry(const Dir& shard, const std::string& name, const Key& key, std::string& problem);
/// What is wrong with an entry filed under `key` (manifest and cubin); empty when nothing. The
/// checks of read_entry() once the files are read, and of `cache import`.
std::string entry_problem(const CacheEntry& entry, const Key& key);

}  // namespace moejit::detail
