#pragma once
/// Options of a moejit process. The environment is read once, here, into this struct.

#include <filesystem>

namespace moejit {

/// The most warmup threads moejit starts ($MOEJIT_JOBS, `moejit warmup --jobs`).
inline constexpr unsigned kMaxJobs = 1024;

struct Options {
  /// Root of the disk cache: $MOEJIT_CACHE_DIR, else $XDG_CACHE_HOME/moejit, else
  /// $HOME/.cache/moejit; empty when none of them is set (a disk cache then refuses to start).
  std::filesystem::path cache_dir;
  /// The CUDA toolkit whose include/ and include/cccl/ NVRTC needs: $CUDA_HOME, else $CUDA_PATH,
  /// else /usr/local/cuda. Checked when the first compile needs it.
  std::filesystem::path cuda_home;
  /// Threads for warmup compiles: $MOEJIT_JOBS (a decimal integer in [1, kMaxJobs]), else the
  /// number of cores (at most kMaxJobs).
  unsigned jobs = 1;
  /// Use the disk store; when false the cache lives in memory only.
  bool disk_cache = true;
  /// Launch the activation and routing kernels with programmatic dependent launch: a kernel may
  /// be scheduled while the previous kernel in its stream (or CUDA graph) still runs, and waits
  /// for it on the GPU before its first load or store. Hides the launch gap between
  /// back-to-back kernels; results are the same either way. $MOEJIT_PDL=1 turns it on.
  bool programmatic_launch = false;
  /// Which GEMMs the experts op runs: by its measured crossover (runtime/experts_crossover.json),
  /// or always the decode streamer, or the prefill GEMMs wherever its contract has them (sm_90a):
  /// $MOEJIT_EXPERTS_PATH = auto | decode | prefill. For benchmarks and tests of one path; both
  /// give results within numerics.md's bounds, not the same bits.
  enum class ExpertsPath { automatic, decode, prefill };
  ExpertsPath experts_path = ExpertsPath::automatic;
  /// Let the experts' one-token GEMM2 stash its first slots' weights in shared memory before
  /// GEMM1's h is ready (templates/experts.cuh). The same bits either way;
  /// $MOEJIT_EXPERTS_STASH = 0 | 1 (the default), for A/B benchmarks.
  bool experts_stash = true;

  /// Reads the environment. Throws moejit::Error (usage) naming the variable when a value is
  /// malformed (MOEJIT_JOBS that is not a thread count): a bad setting is never silently ignored.
  static Options from_environment();
};

}  // namespace moejit
