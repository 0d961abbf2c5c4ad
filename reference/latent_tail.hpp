#pragma once
// CPU reference of the latent-MoE tail (numerics.md "latent_tail"), for any tp: the reduction
// before the norm, rank-order sums, the norm's sum of squares in the kernels' own order.

#include "spec/ops/latent_tail.hpp"
#include "harness.hpp"

#include <cstdint>
#include <vector>

namespace moejit::reference {

struct TailInputs {
  std::int64_t tokens = 0;
  std::vector<std::vector<std::uint16_t>> routed;  ///< per rank [T, L] bf16 bits
  std::vector<std::vector<std::uint16_t>> shared;  ///< per rank [T, H] bf16 bits (empty without)
  std::vector<std::uint16_t> gamma;                ///< [L]
  std::vector<std::uint16_t> w_up;                 ///< [H, L]
};

struct TailOutputs {
  std::vector<std::uint16_t> latent_sum;   ///< R [T, L]
  std::vector<std::uint16_t> latent_norm;  ///< z [T, L]
  std::vector<std::uint16_t> out;          ///< [T, H]
};

TailOutputs latent_tail_reference(const LatentTailSpec& op, const TailInputs& in);
/// The wrong order, kept to show it differs: normalize each rank's partial, then sum.
std::vector<std::uint16_t> norm_then_sum(const LatentTailSpec& op, const TailInputs& in);
/// The column stripe rank `rank` of `tp` owns: rows [first, first + count) of W_up.
struct Stripe {
  int first = 0;
  int count = 0;
};
Stripe stripe_of(const LatentTailSpec& op, int rank);

class LatentTailHarness final : public OpHarness {
 public:
  int variants() const override { return 2; }
  std::string variant_name(int variant) const override;
  std::vector<std::int64_t> check_tokens(const OpSpec& op) const override;
  std::vector<std::int64_t> bench_tokens(const OpSpec& op) const override;
  void fill_inputs(const OpSpec& op, std::span<HostTensor> tensors, std::int64_t tokens, Rng& rng, int variant) const override;
  void run(const OpSpec& op, std::span<HostTensor> tensors, std::int64_t tokens) const override;
  std::vector<std::string> compare(const OpSpec& op, std::span<const HostTensor> want, std::span<const HostTensor> got,
                                   std::int64_t tokens) const override;
  double bytes_moved(const OpSpec& op, std::span<const HostTensor> tensors, std::int64_t tokens) const override;
};

/// Fills one rank's inputs: integer-valued partials (variant 0: their sums are exact) with
/// some -0.0, or normal values (variant 1).
void fill_tail_rank(const LatentTailSpec& op, std::int64_t tokens, Rng& rng, int variant, std::vector<std::uint16_t>& routed,
                    std::vector<std::uint16_t>& shared);
void fill_tail_weights(const LatentTailSpec& op, Rng& rng, std::vector<std::uint16_t>& gamma, std::vector<std::uint16_t>& w_up);

}  // namespace moejit::reference
