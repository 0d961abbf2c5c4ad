#pragma once
// CPU reference of the experts op (numerics.md "experts"), at the kernels' rounding points:
// GEMM1 rounded to the dtype D, the activation element on the rounded gate/up values, GEMM2
// with the router weight rounded to D per slot, and an fp32 combine in slot order.

#include "spec/ops/experts.hpp"
#include "harness.hpp"

#include <cstdint>
#include <span>

namespace moejit::reference {

/// Where each tensor sits in ExpertsSpec::tensors(); -1 for the ones the op does not have.
struct ExpertsTensors {
  int x = 0;
  int ids = -1, weights = -1;  ///< standard layout
  int counts = -1;             ///< masked layout: expert_num_tokens
  int w13 = -1, w2 = -1;
  int b13 = -1, b2 = -1;       ///< with bias
  int map = -1;                ///< with global_experts: expert_map
  int y = -1;
};
ExpertsTensors experts_tensors(const ExpertsSpec& op) noexcept;

/// The local expert of a routed id: -1 (the slot contributes nothing) unless id is in
/// [0, id_range()) and its expert (expert_map[id] with a map, else id) is in [0, E).
int local_expert(const ExpertsSpec& op, std::int64_t id, const std::int32_t* expert_map) noexcept;

/// Converts n elements of D (bf16 or fp16 bits) to fp32 by bit moves (vectorizable; exact,
/// as load() converts them).
void to_float_row(DType d, const std::uint16_t* src, float* dst, std::int64_t n) noexcept;

/// The reference's dot product of two fp32 rows of n elements (n a multiple of 64). Its order:
/// within each 64-element block, 16 fp32 lanes, lane l summing the products of elements l,
/// l + 16, l + 32, l + 48 in that order; each block's lanes are added to 16 double lanes; the
/// double lanes are summed in lane order and the total rounded to fp32 once. (The GPU's fp32
/// order differs anyway; this one is close to the exact sum and vectorizes.)
float experts_dot(const float* a, const float* b, std::int64_t n) noexcept;

/// Computes y from the inputs (`tensors` in ExpertsSpec::tensors() order). Standard: every
/// token's row (a token with no valid slot gets +0). Masked: the first clamp(count, 0, T) rows
/// of each expert; the other rows keep y's contents.
void experts_reference(const ExpertsSpec& op, std::span<HostTensor> tensors, std::int64_t tokens);

class ExpertsHarness final : public OpHarness {
 public:
  /// Checked: 0 uniform routing (masked: 0, T, T/2 and random counts), 1 skewed routing with
  /// invalid slots (masked: counts outside [0, T]) and an inf, -inf or NaN in x rows 3 and 5 mod 8
  /// (their y non-finite wherever the reference's is), 2 exact GEMMs, so that y is the activation
  /// of slot 0's gate/up values at its rounding points. Bench only: 3 uniform (masked: every
  /// expert full), 4 skewed (slot 0 of every token on expert 0; masked: expert 0 full, the
  /// others an eighth), both without invalid slots.
  int variants() const override { return 3; }
  std::string variant_name(int variant) const override;
  std::vector<BenchInputs> bench_inputs(const OpSpec& op) const override;
  std::vector<std::int64_t> check_tokens(const OpSpec& op) const override;
  std::vector<std::int64_t> bench_tokens(const OpSpec& op) const override;
  void fill_inputs(const OpSpec& op, std::span<HostTensor> tensors, std::int64_t tokens, Rng& rng,
                   int variant) const override;
  void run(const OpSpec& op, std::span<HostTensor> tensors, std::int64_t tokens) const override;
  /// Variants 0 and 1: ||y - ref|| / ||ref|| <= 5e-3 over the written rows; variant 2: equal in
  /// D but 1 ulp on at most 1e-3 of the elements (the activation test's rule). Always: rows the
  /// reference leaves unwritten are bitwise untouched, no NaN or infinity where the reference is
  /// finite, and a token with no valid slot is exactly 0.
  std::vector<std::string> compare(const OpSpec& op, std::span<const HostTensor> want,
                                   std::span<const HostTensor> got, std::int64_t tokens) const override;
  /// x, ids, weights and y (masked: the counted rows of x and y, and the counts), and the
  /// weights of every expert that a valid slot or row uses, once.
  double bytes_moved(const OpSpec& op, std::span<const HostTensor> tensors, std::int64_t tokens) const override;
  /// 2 * 3 * H * I per valid slot (masked: per counted row).
  double flops(const OpSpec& op, std::span<const HostTensor> tensors, std::int64_t tokens) const override;
};

}  // namespace moejit::reference
