#pragma once
// CPU reference of the activation op (numerics.md "activation").

#include "spec/ops/activation.hpp"
#include "harness.hpp"

#include <cstdint>

namespace moejit::reference {

/// One output element from fp32 gate and up values, rounded to the output dtype (returned as
/// float), with exactly the rounding points and operation order of numerics.md.
float activation_element(const ActivationSpec& op, float g, float u) noexcept;
/// The gate value act(g) of silu, gelu and gelu_tanh in fp32, before rounding (1 for the others).
float activation_gate(const ActivationSpec& op, float g) noexcept;

/// x [T, 2d] or [E, T, 2d] -> out [T, d] or [E, T, d]; masked rows past counts are left alone.
void activation_reference(const ActivationSpec& op, const HostTensor& x, const std::int32_t* counts,
                          HostTensor& out, std::int64_t tokens);

class ActivationHarness final : public OpHarness {
 public:
  /// 0 normal inputs, 1 special values (masked: counts below 0 and past T, to int32's ends), 2
  /// bench-sized inputs with half-full experts; 3 to 5 (bench only) the same values with 0-12
  /// rows an expert, expert 0 full and the rest empty, or every expert full.
  int variants() const override { return 3; }
  std::vector<BenchInputs> bench_inputs(const OpSpec& op) const override;
  std::string variant_name(int variant) const override;
  std::vector<std::int64_t> check_tokens(const OpSpec& op) const override;
  /// Dense: the common list. Masked: the T_max at which half-full experts hold that list's real
  /// rows (a 896-expert layout at T_max 32768 would be 360 GB of input).
  std::vector<std::int64_t> bench_tokens(const OpSpec& op) const override;
  void fill_inputs(const OpSpec& op, std::span<HostTensor> tensors, std::int64_t tokens, Rng& rng,
                   int variant) const override;
  void run(const OpSpec& op, std::span<HostTensor> tensors, std::int64_t tokens) const override;
  std::vector<std::string> compare(const OpSpec& op, std::span<const HostTensor> want,
                                   std::span<const HostTensor> got, std::int64_t tokens) const override;
  double bytes_moved(const OpSpec& op, std::span<const HostTensor> tensors, std::int64_t tokens) const override;
};

}  // namespace moejit::reference
