#include "activation.hpp"

#include "spec/canonical.hpp"
#include "spec/spec_reader.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>

namespace moejit {

namespace {

constexpr std::int64_t kMaxWidth = std::int64_t{1} << 20;

ActivationKind parse_kind(std::string_view s) {
  if (s == "silu") return ActivationKind::silu;
  if (s == "gelu") return ActivationKind::gelu;
  if (s == "gelu_tanh") return ActivationKind::gelu_tanh;
  if (s == "swiglu_oai") return ActivationKind::swiglu_oai;
  return ActivationKind::situ;
}

}  // namespace

std::string_view to_string(ActivationKind kind) noexcept {
  switch (kind) {
    case ActivationKind::silu: return "silu";
    case ActivationKind::gelu: return "gelu";
    case ActivationKind::gelu_tanh: return "gelu_tanh";
    case ActivationKind::swiglu_oai: return "swiglu_oai";
    case ActivationKind::situ: return "situ";
  }
  return "?";
}

std::string_view to_string(ActivationLayout layout) noexcept {
  return layout == ActivationLayout::dense ? "dense" : "masked";
}

ActivationKind read_activation_kind(detail::SpecReader& r) {
  return parse_kind(r.choice("kind", {"silu", "gelu", "gelu_tanh", "swiglu_oai", "situ"}));
}

void read_activation_params(detail::SpecReader& r, ActivationParams& p) {
  p.interleaved = r.boolean("interleaved", false);
  if (p.kind == ActivationKind::situ) {
    // The kernels multiply by 1/beta and 1/linear_beta: both the value and its reciprocal must
    // be normal fp32 numbers.
    constexpr double kBetaMax = 1 / detail::kF32Min;
    if (!r.has("beta")) {
      r.fail("beta", "situ needs 'beta' (it is never defaulted)", fmt::format("a finite number > 0, in [{:g}, {:g}]", detail::kF32Min, kBetaMax));
    }
    p.beta = r.f32("beta", detail::kF32Min, kBetaMax);
    // <= 0 (or absent) means unset: the up half passes through.
    const bool linear = r.has("linear_beta") && r.number("linear_beta") > 0;
    p.linear_beta = linear ? r.f32("linear_beta", detail::kF32Min, kBetaMax) : 0.0f;
  } else {
    r.forbid("beta", "applies only to kind situ");
    r.forbid("linear_beta", "applies only to kind situ");
  }
  if (p.kind == ActivationKind::swiglu_oai) {
    p.alpha = r.f32("alpha", detail::kF32Min, detail::kF32Max, 1.702);
    p.limit = r.f32("limit", detail::kF32Min, detail::kF32Max, 7.0);
  } else {
    r.forbid("alpha", "applies only to kind swiglu_oai");
    r.forbid("limit", "applies only to kind swiglu_oai");
  }
}

std::string activation_params_json(const ActivationParams& p) {
  nlohmann::json j{{"kind", to_string(p.kind)}, {"interleaved", p.interleaved}};
  if (p.kind == ActivationKind::situ) {
    j["beta"] = detail::canonical_number(p.beta);
    if (p.linear_beta > 0) j["linear_beta"] = detail::canonical_number(p.linear_beta);
  }
  if (p.kind == ActivationKind::swiglu_oai) {
    j["alpha"] = detail::canonical_number(p.alpha);
    j["limit"] = detail::canonical_number(p.limit);
  }
  return j.dump();
}

std::shared_ptr<OpSpec> parse_activation(detail::SpecReader& r) {
  auto s = std::make_shared<ActivationSpec>();
  s->kind = read_activation_kind(r);
  s->layout = r.choice("layout", {"dense", "masked"}, "dense") == "dense" ? ActivationLayout::dense
                                                                          : ActivationLayout::masked;
  s->d = r.integer("d", 1, kMaxWidth);
  if (s->layout == ActivationLayout::masked) {
    s->num_experts = r.integer("num_experts", 1, 65535);
  } else {
    r.forbid("num_experts", "applies only to layout masked");
  }
  s->dtype = r.dtype("dtype", {DType::bf16, DType::f16, DType::f32}, DType::bf16);
  s->out_dtype = r.dtype("out_dtype", {DType::bf16, DType::f16, DType::f32}, s->dtype);
  read_activation_params(r, *s);
  r.finish();
  return s;
}

std::string ActivationSpec::canonical_json() const {
  nlohmann::json j = nlohmann::json::parse(activation_params_json(*this));
  j["op"] = "activation";
  j["layout"] = to_string(layout);
  j["d"] = d;
  j["dtype"] = spec_name(dtype);
  j["out_dtype"] = spec_name(out_dtype);
  if (layout == ActivationLayout::masked) j["num_experts"] = num_experts;
  return j.dump();
}

std::vector<TensorDecl> ActivationSpec::tensors() const {
  const bool masked = layout == ActivationLayout::masked;
  auto shape = [&](std::int64_t width) {
    std::vector<Extent> s;
    if (masked) s.push_back(Extent::fixed(num_experts));
    s.push_back(Extent::token_count());
    s.push_back(Extent::fixed(width));
    return s;
  };
  std::vector<TensorDecl> t;
  t.push_back({.name = "x", .dtype = dtype, .shape = shape(2 * d), .role = TensorRole::input,
               .note = interleaved ? "gate/up interleaved [g0, u0, g1, u1, ...]" : "[gate (d) | up (d)] per row"});
  if (masked) {
    t.push_back({.name = "expert_num_tokens", .dtype = DType::i32, .shape = {Extent::fixed(num_experts)},
                 .role = TensorRole::input, .note = "rows of each expert to process (clamped to [0, T])"});
  }
  t.push_back({.name = "out", .dtype = out_dtype, .shape = shape(d), .role = TensorRole::output,
               .keeps_unwritten = masked,
               .note = masked ? "rows t >= expert_num_tokens[e] keep their contents" : ""});
  return t;
}

}  // namespace moejit
