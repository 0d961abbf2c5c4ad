#pragma once
// Warmup: compiles many contracts at once on a thread pool, each key once.

#include "cache.hpp"

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace moejit::detail {

struct WarmupJob {
  std::string label;  ///< "specs/kimi-k3.json router sm_90a"
  Contract contract;
};

struct WarmupOutcome {
  Key key;
  std::vector<std::string> labels;  ///< every job that needed this key
  const Contract* contract = nullptr;
  Source source = Source::memory;
  double seconds = 0;
  std::shared_ptr<const CacheEntry> entry;
  std::string error;  ///< empty on success
  bool bad_input = false;  ///< the error is the user's (an unsafe cache: Error::is_bad_input)
};

using WarmupProgress = std::function<void(const WarmupOutcome& done, std::size_t finished, std::size_t total)>;

/// Deduplicates the jobs by key and gets each key through the cache on warmup_threads(threads,
/// keys) threads, after reclaiming what killed writers left in the cache (reclaim_staging).
/// Failures are reported per key, never thrown. `progress` is called under a lock.
std::vector<WarmupOutcome> warmup(Cache& cache, std::span<const WarmupJob> jobs, unsigned threads,
                                  const WarmupProgress& progress = {});
/// The threads warmup() runs when asked for `threads` with `keys` distinct keys: one a key at
/// most, at least one.
unsigned warmup_threads(unsigned threads, std::size_t keys) noexcept;

}  // namespace moejit::detail
