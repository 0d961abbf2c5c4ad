#pragma once
// The generic device side of `moejit check`, `bench` and `run` (and the GPU tests): tensors
// go up and down by their declarations, the op's harness supplies inputs, the reference and the
// tolerance. No per-op code lives here.

#include <moejit/context.hpp>
#include <moejit/op.hpp>

#include "reference/harness.hpp"
#include "runtime/device.hpp"
#include "runtime/yardstick.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace moejit::tools {

/// One device buffer per declared tensor, and the bindings to launch with.
struct DeviceTensors {
  std::vector<detail::DeviceBuffer> buffers;
  std::vector<Buffer> bindings;
};

DeviceTensors upload(const detail::Driver& driver, std::span<const reference::HostTensor> tensors);
/// Copies the op's outputs back into `tensors` (inputs are left alone).
void download_outputs(const Op& op, const DeviceTensors& device, std::span<reference::HostTensor> tensors);

/// The byte outputs are filled with before a launch: finite in every dtype, so an unwritten
/// element is caught by comparison and a NaN written by mistake is not taken for the poison.
inline constexpr std::byte kPoison{0x5A};

struct CheckCase {
  int variant = 0;
  std::int64_t tokens = 0;
  std::uint64_t seed = 0;
  LaunchHints hints = {};
  /// Past this many tokens a token-major op is compared at that many of its rows alone
  /// (reference::sample_rows: the first, the last and rows drawn from the seed), the reference
  /// computing only those; 0: every row.
  std::int64_t sample_rows = 0;
};

struct CheckResult {
  std::vector<std::string> failures;  ///< empty when the case passed
  std::int64_t rows = 0;              ///< the token rows compared (fewer than the call's where sampled)
  bool passed() const noexcept { return failures.empty(); }
};

/// Runs one case on the GPU and on the CPU reference and compares them.
CheckResult check_case(Context& context, const Op& op, CheckCase c);
/// check_case of one variant at each of `tokens` (seeds seed, seed + 1, ...); an op with large
/// fixed tensors (weights) fills them once, each T running on the first rows of one fill.
std::vector<CheckResult> check_cases(Context& context, const Op& op, int variant, std::span<const std::int64_t> tokens,
                                     std::uint64_t seed, std::int64_t sample_rows = 0);

struct BenchResult {
  std::int64_t tokens = 0;
  double us_per_call = 0;
  double bytes = 0;     ///< the op's minimum bytes moved
  double flops = 0;     ///< the op's floating-point operations (0 where it has no GEMM)
  double gb_per_s = 0;
  double copy_fraction = 0;  ///< achieved bandwidth over the SM copy's (Yardsticks)
  double read_fraction = 0;  ///< over the streaming read's: the ceiling of ops that mostly read (the experts' weights)
  double peak_fraction = 0;  ///< achieved bandwidth over the HBM peak of the device attributes
};
/// Tensor sets a graph of `calls` launches rotates through so that they read 3x the L2, a set
/// reading `set_bytes` (hot tensors, one buffer bound in every set, count for none): 1 to calls.
int set_count(const Context& context, std::size_t set_bytes, int calls);

/// The fewest bytes and the flops of a call: what its floors divide.
struct Work {
  double bytes = 0;
  double flops = 0;
};
/// The mean Work of `windows` calls of `tokens` tokens, call w on token rows [w tokens, (w + 1)
/// tokens) of `host` (a token-major op's tensors, filled for at least windows x tokens rows): the
/// harness's bytes_moved and flops of each window (its rows brought to the front and put back
/// after). Each window routes its own rows, so one window's count of experts is not the mean's.
Work mean_work(const OpSpec& spec, std::span<reference::HostTensor> host, std::int64_t tokens, std::int64_t windows);

/// How bench_case times an op.
struct BenchPlan {
  int variant = 0;   ///< which of the harness's bench_inputs()
  int calls = 20;    ///< launches per graph replay
  int replays = 7;   ///< graph replays; the median is reported
  /// Tensors bound as one copy in every call, as data the kernel before the op has just written
  /// or read (a masked activation's expert_num_tokens, written by the dispatch).
  std::vector<std::string> hot;
  /// Every launch carries LaunchHints::expected_rows = mean_expert_rows of the inputs.
  bool hint_rows = false;
};

/// Times `plan.calls` launches per graph replay (median of `plan.replays`), rotating through
/// enough copies of the tensors (set_count) that successive calls are not served from L2, but
/// for the hot ones.
BenchResult bench_case(Context& context, const Op& op, const detail::Stream& stream, std::int64_t tokens,
                       const detail::Yardsticks& yardsticks, const BenchPlan& plan);
/// bench_case for each of `tokens`; an op whose weights alone pass the L2 (one tensor set a
/// call) is filled and uploaded once, with rows for the largest T (and at least `calls` calls of
/// the smallest, up to 2048), each call of a T running on the next T rows.
std::vector<BenchResult> bench_cases(Context& context, const Op& op, const detail::Stream& stream,
                                     std::span<const std::int64_t> tokens, const detail::Yardsticks& yardsticks,
                                     const BenchPlan& plan);
/// The mean rows an expert holds in `tensors` (its expert_num_tokens clamped to [0, tokens]), the
/// launch hint a caller who knows its data would give; 0 when the op has no such input.
std::int64_t mean_expert_rows(const Op& op, std::span<const reference::HostTensor> tensors, std::int64_t tokens);

}  // namespace moejit::tools
