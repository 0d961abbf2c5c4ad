#pragma once
// The cubin cache: a memory map in front of a disk store under $MOEJIT_CACHE_DIR/v<schema>/.
//
//   v1/<2 hex>/<key>/{kernel.cubin, manifest.json}   published entries
//   v1/tmp/<key>.<host>.<pid>.<random>/               entries being staged (never read)
//   v1/quarantine/<key>.<unique>/                     corrupt entries moved aside
//   v1/locks/<key>.lock                               flock(2): one compile per key at a time
//
// An entry is staged, fsynced and renamed into place, so a reader sees a whole entry or none.
// Every read verifies the checksum and recomputes the key from the manifest; an entry that fails
// is moved aside and recompiled, never loaded.

#include <moejit/contract.hpp>
#include <moejit/options.hpp>

#include "compiler/key.hpp"
#include "compiler/nvrtc.hpp"
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
  std::string cubin;
};

/// One entry of the disk store as `cache ls` / `verify` see it.
struct EntryInfo {
  std::filesystem::path dir;
  std::string key_hex;
  std::uint64_t bytes = 0;
  std::filesystem::file_time_type last_used;
  std::optional<Manifest> manifest;  ///< absent when unreadable
  std::string problem;               ///< empty when the entry verifies
};

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
  /// Verifies every entry; with `repair`, moves the bad ones aside. Returns the bad ones.
  std::vector<EntryInfo> verify(bool repair) const;
  struct PruneResult {
    std::size_t removed = 0;
    std::uint64_t freed_bytes = 0;
    std::uint64_t kept_bytes = 0;
  };
  /// Removes least recently used entries until the store holds at most `max_bytes`, plus
  /// quarantined entries and stale staging directories.
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
  /// Verifies a bundle and publishes its entries. Throws (input) on a corrupt bundle.
  ImportResult import_bundle(const std::filesystem::path& file);

 private:
  std::filesystem::path entry_dir(const Key& key) const;
  std::filesystem::path lock_path(const Key& key) const;
  /// A verified entry, or null when absent; a corrupt entry is moved aside (null).
  std::shared_ptr<CacheEntry> load(const Key& key) const;
  /// Stages, fsyncs and renames an entry into place; when another process won the race, its
  /// entry is loaded and returned instead.
  std::shared_ptr<CacheEntry> publish(std::shared_ptr<CacheEntry> entry) const;
  void quarantine(const std::filesystem::path& dir) const;
  std::shared_ptr<const CacheEntry> remember(std::shared_ptr<CacheEntry> entry);

  const Compiler& compiler_;
  std::filesystem::path root_;
  mutable std::shared_mutex mutex_;
  std::unordered_map<Key, std::shared_ptr<const CacheEntry>, KeyHash> memory_;
};

/// Verifies one entry directory; returns the entry or sets `problem`.
std::shared_ptr<CacheEntry> read_entry(const std::filesystem::path& dir, const Key& key, std::string& problem);
/// Refuses a directory another user owns or that is group- or world-writable.
void check_private_directory(const std::filesystem::path& dir);

}  // namespace moejit::detail
