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
  std::vector<TensorDecl> tensors() const override;
};

std::shared_ptr<OpSpec> parse_activation(detail::SpecReader& reader);

}  // namespace moejit
