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

/// What a gated activation computes (numerics.md "activation"): the activation op's and the
/// experts op's GEMM1 epilogue's.
struct ActivationParams {
  ActivationKind kind = ActivationKind::silu;
  bool interleaved = false;      ///< [g0, u0, g1, u1, ...] instead of [gate | up]
  float beta = 0;                ///< situ: > 0, required
  float linear_beta = 0;         ///< situ: <= 0 means unset (normalized to 0)
  float alpha = 1.702f;          ///< swiglu_oai
  float limit = 7.0f;            ///< swiglu_oai
};

struct ActivationSpec final : OpSpec, ActivationParams {
  ActivationLayout layout = ActivationLayout::dense;
  std::int64_t d = 0;            ///< output width; the input row is 2d wide
  std::int64_t num_experts = 0;  ///< masked layout only
  DType dtype = DType::bf16;     ///< input
  DType out_dtype = DType::bf16;

  std::string_view family() const noexcept override { return "activation"; }
  std::string canonical_json() const override;
  std::vector<TensorDecl> tensors() const override;
};

std::shared_ptr<OpSpec> parse_activation(detail::SpecReader& reader);

/// The kind field of an activation's fields (the first one read, so that the rest can depend on it).
ActivationKind read_activation_kind(detail::SpecReader& reader);
/// The rest of an activation's fields (interleaved, beta, linear_beta, alpha, limit) for `p.kind`.
void read_activation_params(detail::SpecReader& reader, ActivationParams& p);
/// The activation's fields in canonical JSON (kind, interleaved and those of its kind).
std::string activation_params_json(const ActivationParams& p);

}  // namespace moejit
