#pragma once
// CPU reference of the routing op (numerics.md "routing"), computed exactly as the kernels do:
// the same keys, the same fixed-point softmax sum, the same order of the renormalizing sum.

#include "spec/ops/routing.hpp"
#include "harness.hpp"

#include <cstdint>
#include <vector>

namespace moejit::reference {

/// One row's selection: every expert's key, the chosen ids and their weights.
struct RoutingRow {
  std::vector<std::uint64_t> keys;  ///< (class or orderable key) << 32 | (0xFFFF - expert)
  std::vector<float> key_values;    ///< the fp32 selection key c of each expert (NaN when invalid)
  std::vector<int> ids;
  std::vector<float> weights;
};

/// Routes one row; `x` and `bias` (may be null) are already upcast to float.
RoutingRow route_row(const RoutingSpec& op, const float* x, const float* bias);
/// The weights rule 5/6 gives for a given list of ids of the row (used to check a GPU result
/// that picked the other side of a near-tie).
std::vector<float> weights_for(const RoutingSpec& op, const float* x, const RoutingRow& row, const std::vector<int>& ids);

class RoutingHarness final : public OpHarness {
 public:
  int variants() const override { return 3; }
  std::string variant_name(int variant) const override;
  std::vector<std::int64_t> bench_tokens(const OpSpec& op) const override;
  void fill_inputs(const OpSpec& op, std::span<HostTensor> tensors, std::int64_t tokens, Rng& rng,
                   int variant) const override;
  void run(const OpSpec& op, std::span<HostTensor> tensors, std::int64_t tokens) const override;
  std::vector<std::string> compare(const OpSpec& op, std::span<const HostTensor> want,
                                   std::span<const HostTensor> got, std::int64_t tokens) const override;
};

}  // namespace moejit::reference
