#include "experts.hpp"

#include "spec/canonical.hpp"
#include "spec/spec_reader.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>

namespace moejit {

std::string_view to_string(ExpertsLayout layout) noexcept {
  return layout == ExpertsLayout::standard ? "standard" : "masked";
}

namespace {

int width(detail::SpecReader& r, std::string_view key) {
  const auto w = static_cast<int>(r.integer(key, ExpertsSpec::kWidthMultiple, ExpertsSpec::kMaxWidth));
  if (w % ExpertsSpec::kWidthMultiple != 0) {
    r.fail(key, fmt::format("{} {} is not a multiple of {} (the GEMM tiles)", key, w, ExpertsSpec::kWidthMultiple),
           fmt::format("a multiple of {} in [{}, {}]", ExpertsSpec::kWidthMultiple, ExpertsSpec::kWidthMultiple, ExpertsSpec::kMaxWidth));
  }
  return w;
}

ActivationParams read_activation(detail::SpecReader& r) {
  r.allow("activation");
  if (!r.has("activation")) {
    r.fail("activation", "missing required field 'activation'",
           "an object with the activation's fields: kind (silu, gelu, gelu_tanh, swiglu_oai, situ), and beta, "
           "linear_beta, alpha, limit, interleaved as its kind takes them");
  }
  detail::SpecReader a(r.value("activation"), r.file(), r.pointer_to("activation"));
  ActivationParams p;
  p.kind = read_activation_kind(a);
  read_activation_params(a, p);
  a.finish();
  return p;
}

}  // namespace

std::shared_ptr<OpSpec> parse_experts(detail::SpecReader& r) {
  auto s = std::make_shared<ExpertsSpec>();
  s->hidden = width(r, "hidden");
  s->intermediate = width(r, "intermediate");
  s->num_experts = static_cast<int>(r.integer("num_experts", 1, ExpertsSpec::kMaxExperts));
  s->layout = r.choice("layout", {"standard", "masked"}, "standard") == "standard" ? ExpertsLayout::standard
                                                                                 : ExpertsLayout::masked;
  if (s->masked()) {
    // Rows arrive grouped by expert: no ids, no router weights, no combine.
    for (const char* key : {"topk", "ids_dtype", "apply_router_weight_on_input", "global_experts"}) {
      r.forbid(key, "applies only to layout standard (masked rows come grouped by expert, without router weights)");
    }
  } else {
    // Read over the full range first, so that a value below num_experts gets its own message.
    s->global_experts = static_cast<int>(r.integer("global_experts", 1, ExpertsSpec::kMaxGlobalExperts, 0));
    if (r.has("global_experts") && s->global_experts < s->num_experts) {
      r.fail("global_experts", fmt::format("global_experts {} is below num_experts {}", s->global_experts, s->num_experts),
             fmt::format("an integer in [{}, {}] (num_experts or more)", s->num_experts, ExpertsSpec::kMaxGlobalExperts));
    }
    s->topk = static_cast<int>(r.integer("topk", 1, ExpertsSpec::kMaxTopK));
    if (s->topk > s->id_range()) {
      r.fail("topk", fmt::format("topk {} exceeds {} {}", s->topk, s->global_experts > 0 ? "global_experts" : "num_experts", s->id_range()),
             fmt::format("an integer in [1, {}]", std::min(ExpertsSpec::kMaxTopK, s->id_range())));
    }
    s->ids_dtype = r.dtype("ids_dtype", {DType::i32, DType::i64}, DType::i32);
    s->weight_on_input = r.boolean("apply_router_weight_on_input", false);
  }
  s->activation = read_activation(r);
  s->dtype = r.dtype("dtype", {DType::bf16, DType::f16}, DType::bf16);
  s->bias = r.boolean("bias", false);
  s->max_tokens_ = r.integer("max_tokens", 1, std::int64_t{1} << 20, 4096);
  const std::int64_t pairs = s->max_tokens_ * (s->masked() ? s->num_experts : s->topk);
  if (pairs > ExpertsSpec::kMaxPairs) {
    r.fail("max_tokens", fmt::format("max_tokens x {} = {} rows exceed what the kernels index", s->masked() ? "num_experts" : "topk", pairs),
           fmt::format("at most {} rows", ExpertsSpec::kMaxPairs));
  }
  r.finish();
  return s;
}

std::int64_t ExpertsSpec::expert_bytes() const noexcept {
  const std::int64_t h = hidden, i = intermediate;
  return static_cast<std::int64_t>(size_of(dtype)) * (3 * h * i + (bias ? 2 * i + h : 0));
}

std::string ExpertsSpec::canonical_json() const {
  nlohmann::json j{{"op", "experts"},
                   {"hidden", hidden},
                   {"intermediate", intermediate},
                   {"num_experts", num_experts},
                   {"layout", to_string(layout)},
                   {"activation", nlohmann::json::parse(activation_params_json(activation))},
                   {"dtype", spec_name(dtype)},
                   {"bias", bias},
                   {"max_tokens", max_tokens_}};
  if (!masked()) {
    j["topk"] = topk;
    j["ids_dtype"] = spec_name(ids_dtype);
    j["apply_router_weight_on_input"] = weight_on_input;
    if (global_experts > 0) j["global_experts"] = global_experts;
  }
  return j.dump();
}

std::vector<TensorDecl> ExpertsSpec::tensors() const {
  const auto T = Extent::token_count();
  const auto E = Extent::fixed(num_experts), H = Extent::fixed(hidden), I2 = Extent::fixed(2 * std::int64_t{intermediate}),
             I = Extent::fixed(intermediate);
  std::vector<TensorDecl> t;
  if (masked()) {
    t.push_back({.name = "x", .dtype = dtype, .shape = {E, T, H}, .role = TensorRole::input, .note = "each expert's rows"});
    t.push_back({.name = "expert_num_tokens", .dtype = DType::i32, .shape = {E}, .role = TensorRole::input,
                 .note = "rows of each expert to compute (clamped to [0, T])"});
  } else {
    const auto K = Extent::fixed(topk);
    t.push_back({.name = "x", .dtype = dtype, .shape = {T, H}, .role = TensorRole::input, .note = "hidden states"});
    t.push_back({.name = "topk_ids", .dtype = ids_dtype, .shape = {T, K}, .role = TensorRole::input,
                 .note = global_experts > 0 ? "global expert ids (mapped by expert_map)" : "expert ids; outside [0, E) skipped"});
    t.push_back({.name = "topk_weights", .dtype = DType::f32, .shape = {T, K}, .role = TensorRole::input,
                 .note = weight_on_input ? "router weights, applied to x" : "router weights, applied to GEMM2's output"});
  }
  t.push_back({.name = "w13", .dtype = dtype, .shape = {E, I2, H}, .role = TensorRole::input,
               .note = activation.interleaved ? "gate/up rows interleaved, K-contiguous" : "gate rows then up rows, K-contiguous"});
  t.push_back({.name = "w2", .dtype = dtype, .shape = {E, H, I}, .role = TensorRole::input, .note = "K-contiguous"});
  if (bias) {
    t.push_back({.name = "b13", .dtype = dtype, .shape = {E, I2}, .role = TensorRole::input, .note = "GEMM1 bias, rows as w13"});
    t.push_back({.name = "b2", .dtype = dtype, .shape = {E, H}, .role = TensorRole::input, .note = "GEMM2 bias"});
  }
  if (global_experts > 0) {
    t.push_back({.name = "expert_map", .dtype = DType::i32, .shape = {Extent::fixed(global_experts)}, .role = TensorRole::input,
                 .note = "local expert of each global id; -1: not on this rank"});
  }
  if (masked()) {
    t.push_back({.name = "y", .dtype = dtype, .shape = {E, T, H}, .role = TensorRole::output, .keeps_unwritten = true,
                 .note = "rows t >= expert_num_tokens[e] keep their contents"});
  } else {
    t.push_back({.name = "y", .dtype = dtype, .shape = {T, H}, .role = TensorRole::output, .note = "sum of each token's slots"});
  }
  return t;
}

}  // namespace moejit
