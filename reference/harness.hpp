#pragma once
// What `moejit check` and `moejit bench` (and the GPU tests) need of each op beyond its tensor
// declarations: random inputs, the CPU reference, the comparison with its tolerance, and the
// bytes the op must move. One harness per op family; the CLI is generic over them.

#include <moejit/spec.hpp>

#include "host_tensor.hpp"
#include "spec/ops/registry.hpp"

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace moejit::reference {

class OpHarness {
 public:
  virtual ~OpHarness() = default;

  /// Input distributions a check sweeps (0 = the op's ordinary inputs; others add ties,
  /// non-finite values, empty experts, ...).
  virtual int variants() const { return 1; }
  virtual std::string variant_name(int variant) const;
  /// The input distributions `bench` can time (`--inputs NAME`), the op's typical ones first
  /// (the default). Each names a variant of fill_inputs, not necessarily one a check sweeps.
  struct BenchInputs {
    std::string name;   ///< as given to --inputs
    int variant = 0;    ///< passed to fill_inputs
    std::string about;  ///< one line for the bench's output
  };
  virtual std::vector<BenchInputs> bench_inputs(const OpSpec& op) const;
  /// Token counts a check sweeps, and those a bench times.
  virtual std::vector<std::int64_t> check_tokens(const OpSpec& op) const;
  virtual std::vector<std::int64_t> bench_tokens(const OpSpec& op) const;

  /// Fills the input tensors (outputs are left alone). `tensors` follows OpSpec::tensors().
  virtual void fill_inputs(const OpSpec& op, std::span<HostTensor> tensors, std::int64_t tokens, Rng& rng,
                           int variant) const = 0;
  /// Computes the outputs from the inputs. Outputs arrive holding their initial contents (an
  /// op that leaves elements unwritten leaves them as they were).
  virtual void run(const OpSpec& op, std::span<HostTensor> tensors, std::int64_t tokens) const = 0;
  /// Compares the outputs in `got` (from the GPU; its inputs may be left empty) with `want`
  /// (inputs + reference outputs). Returns one line per failure, empty when the check passes.
  virtual std::vector<std::string> compare(const OpSpec& op, std::span<const HostTensor> want,
                                           std::span<const HostTensor> got, std::int64_t tokens) const = 0;
  /// The fewest bytes the op must move (each input read once, each output written once).
  virtual double bytes_moved(const OpSpec& op, std::span<const HostTensor> tensors, std::int64_t tokens) const;
  /// The floating-point operations the op's math needs on these inputs (a multiply-add counts
  /// two); 0 for ops whose cost is their bytes alone.
  virtual double flops(const OpSpec& op, std::span<const HostTensor> tensors, std::int64_t tokens) const;
};

using HarnessOf = const OpHarness& (*)();
/// The reference's table of op families (spec/ops/registry.hpp says the shape).
std::span<const detail::Family<HarnessOf>> reference_families() noexcept;
/// The harness of an op family; throws moejit::Error (usage) when none exists.
const OpHarness& harness_for(std::string_view family);

/// Runs body(row) for rows [0, rows) on all cores (references of large checks).
void parallel_rows(std::int64_t rows, const std::function<void(std::int64_t)>& body);
/// The random stream of row `row` of a fill seeded with `seed`: rows that draw from their own
/// streams fill in parallel and hold the same values whatever the thread count.
Rng row_rng(std::uint64_t seed, std::int64_t row);

/// Allocates host tensors for an op at `tokens` (zeros).
std::vector<HostTensor> make_tensors(const OpSpec& op, std::int64_t tokens);

/// The rows of [0, tokens) a check compares when it samples `count` of them: the first, the last
/// and rows drawn from `seed` without repeats (at least those two), in increasing order; every
/// row when `count` is 0 or at least `tokens`. A token-major op's tokens are independent, so its reference computes
/// these rows alone as a call of that many tokens (gather_rows) and gives each the outputs the
/// whole call would.
std::vector<std::int64_t> sample_rows(std::int64_t tokens, std::int64_t count, std::uint64_t seed);
/// Rows `rows` of `from` along its first dimension, as a tensor of rows.size() rows.
HostTensor gather_rows(const HostTensor& from, std::span<const std::int64_t> rows);

}  // namespace moejit::reference
