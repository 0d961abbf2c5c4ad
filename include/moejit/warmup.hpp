#pragma once
/// Warming the kernel cache ahead of time, in process: what `moejit warmup` and Python's
/// `moejit.warmup()` run. Needs no GPU: NVRTC compiles the contracts into the disk cache, where
/// a later Context::load on any machine of the same arch finds them.

#include <moejit/contract.hpp>
#include <moejit/options.hpp>
#include <moejit/spec.hpp>

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace moejit {

/// One distinct contract of a warmup: every (spec, op, arch) that needed the same key shares it.
struct WarmupEntry {
  std::vector<std::string> labels;  ///< "FILE OP" of each op that needed this kernel
  std::string arch;
  std::string source;  ///< "compiled", "disk", "waited" (another process compiled it), "memory" or "failed"
  double seconds = 0;  ///< the time its key took, waits included
  std::string key;  ///< the cache key, hex
  int registers = 0;  ///< the most registers a thread of its kernels uses
  int spill_bytes = 0;  ///< spill stores, spill loads and stack of its kernels, summed
  std::string error;  ///< empty unless failed
  bool bad_input = false;  ///< the failure is the user's (Error::is_bad_input: an unsafe cache)
};

struct WarmupReport {
  std::size_t specs = 0;  ///< the specs given
  std::size_t jobs = 0;  ///< (op, arch) contracts asked for, before deduplication
  unsigned threads = 0;  ///< the threads it ran on: options.jobs, at most one a key
  double seconds = 0;
  std::string cache;  ///< the cache's directory
  std::vector<WarmupEntry> entries;  ///< one a distinct contract, in the order first asked for

  /// Entries whose source is `source` ("failed" counts the failures).
  std::size_t count(std::string_view source) const noexcept;
  /// No entry failed.
  bool ok() const noexcept { return count("failed") == 0; }
};

/// Called as each entry finishes, from the thread that finished it (calls never overlap).
using WarmupProgress = std::function<void(const WarmupEntry& done, std::size_t finished, std::size_t total)>;

/// The contracts a warmup of `spec` compiles: each op's for `archs`, or for the spec's own archs
/// when `archs` is empty, op by op (what a warm start of the spec loads).
std::vector<Contract> warmup_contracts(const Spec& spec, std::span<const std::string> archs = {});

/// Compiles every contract of `specs` -- each op for the spec's archs, or for `archs` when not
/// empty -- into the disk cache that `options` names, on options.jobs threads, each key once,
/// after reclaiming what killed writers left behind. A contract that fails is reported in its
/// entry, never thrown; an unsupported arch in `archs`, or a cache that cannot be opened,
/// throws moejit::Error.
WarmupReport warmup(std::span<const Spec> specs, const Options& options = Options::from_environment(),
                    std::span<const std::string> archs = {}, const WarmupProgress& progress = {});

}  // namespace moejit
