#pragma once
// The `activation` op: gated activations, dense or masked-batched (numerics.md "activation").

#include <moejit/spec.hpp>

#include <cstdint>
#include <memory>
#include <string_view>

namespace moejit {

namespace detail {
class SpecReader;
}

enum class ActivationKind { silu, gelu, gelu_tanh, swiglu_oai, situ };
enum class ActivationLayout { dense, masked };

std::string_view to_string(ActivationKind kind) noexcept;
std::string_view to_string(ActivationLayout layout) noexcept;

struct ActivationSpec final : OpSpec {
  ActivationKind kind = ActivationKind::silu;
  ActivationLayout layout = ActivationLayout::dense;
  std::int64_t d = 0;            ///< output width; the input row is 2d wide
  std::int64_t num_experts = 0;  ///< masked layout only
  DType dtype = DType::bf16;     ///< input
  DType out_dtype = DType::bf16;
  bool interleaved = false;      ///< [g0, u0, g1, u1, ...] instead of [gate | up]
  float beta = 0;                ///< situ: > 0, required
  float linear_beta = 0;         ///< situ: <= 0 means unset (normalized to 0)
  float alpha = 1.702f;          ///< swiglu_oai
  float limit = 7.0f;            ///< swiglu_oai

  std::string_view family() const noexcept override { return "activation"; }
  std::string canonical_json() const override;
  std::vector<Contract> contracts(std::string_view arch) const override;
  std::vector<TensorDecl> tensors() const override;

  /// Tile choice (part of the contract): elements per vector, threads, chunks per thread.
  /// One chunk per thread: these kernels are latency- and issue-bound (SituGLU ~67 instructions
  /// an element), so resident warps beat per-thread ILP (unroll 2 or 4: 1.2-1.6x slower at large
  /// T on the H200, with fewer blocks an SM).
  int vec() const noexcept;
  static constexpr int kThreads = 256;
  static constexpr int kUnroll = 1;
};

std::shared_ptr<OpSpec> parse_activation(detail::SpecReader& reader);

}  // namespace moejit
