#include "experts.hpp"

#include "spec/canonical.hpp"
#include "spec/spec_reader.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <utility>

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

// The values of [lo, hi] (in steps of `step`) that `ok` takes, listed for an error message.
template <class Ok>
std::string allowed(int lo, int hi, int step, Ok&& ok) {
  std::string out;
  for (int v = lo; v <= hi; v += step) {
    if (ok(v)) out += fmt::format("{}{}", out.empty() ? "" : ", ", v);
  }
  return out;
}

// One of `tiles`' fields: an integer in [lo, hi], a multiple of `step`, that `ok` takes (`why`
// says what it failed, `rule` what the allowed values have in common); 0 where absent.
template <class Ok>
int tile(detail::SpecReader& t, std::string_view key, int lo, int hi, int step, Ok&& ok, std::string_view why, std::string_view rule) {
  if (!t.has(key)) {
    t.allow(key);
    return 0;
  }
  const auto v = static_cast<int>(t.integer(key, lo, hi));
  if (v % step != 0 || !ok(v)) {
    t.fail(key, fmt::format("{} {} {}", key, v, why), fmt::format("one of {} ({})", allowed(lo, hi, step, ok), rule));
  }
  return v;
}

// A decode GEMM's CTA shape: row groups and K-split warps, set together, at most kMaxWarps.
void cta_shape(detail::SpecReader& t, std::string_view groups_key, std::string_view split_key, int& groups, int& split) {
  if (t.has(groups_key) != t.has(split_key)) {
    const auto missing = t.has(groups_key) ? split_key : groups_key;
    t.fail(missing, fmt::format("{} and {} are set together (the warps of a CTA)", groups_key, split_key),
           fmt::format("an integer in [1, {}]", ExpertsTiles::kMaxWarps));
  }
  if (groups * split > ExpertsTiles::kMaxWarps) {
    t.fail(split_key, fmt::format("{} x {} = {} x {} warps exceed a CTA's {}", groups_key, split_key, groups, split, ExpertsTiles::kMaxWarps),
           fmt::format("at most {} / {} = {}", ExpertsTiles::kMaxWarps, groups_key, ExpertsTiles::kMaxWarps / groups));
  }
}

ExpertsTiles read_tiles(detail::SpecReader& r, const ExpertsSpec& s) {
  r.allow("tiles");
  ExpertsTiles x;
  if (!r.has("tiles")) return x;
  detail::SpecReader t(r.value("tiles"), r.file(), r.pointer_to("tiles"));
  const int h = s.hidden, i = s.intermediate, w = ExpertsTiles::kMaxWarps;
  constexpr int kBlockK = 32;  // k a decode GEMM's warp loads a block (templates/weight_stream.cuh)
  x.groups1 = tile(t, "groups1", 1, w, 1, [i](int v) { return i % (8 * v) == 0; },
                   fmt::format("does not split intermediate {} into CTAs of 8 x groups1 h columns", i), "intermediate / 8 divisible by it");
  x.split1 = tile(t, "split1", 1, w, 1, [h](int v) { return h / kBlockK % v == 0; },
                  fmt::format("does not split hidden {}'s {} k blocks of 32 evenly", h, h / kBlockK), "hidden / 32 divisible by it");
  cta_shape(t, "groups1", "split1", x.groups1, x.split1);
  x.groups2 = tile(t, "groups2", 1, w, 1, [h](int v) { return h % (16 * v) == 0; },
                   fmt::format("does not split hidden {} into CTAs of 16 x groups2 output columns", h), "hidden / 16 divisible by it");
  x.split2 = tile(t, "split2", 1, w, 1, [i](int v) { return i / kBlockK % v == 0; },
                  fmt::format("does not split intermediate {}'s {} k blocks of 32 evenly", i, i / kBlockK), "intermediate / 32 divisible by it");
  cta_shape(t, "groups2", "split2", x.groups2, x.split2);
  x.ring1 = static_cast<int>(t.integer("ring1", 1, ExpertsTiles::kMaxRing, 0));
  x.ring2 = static_cast<int>(t.integer("ring2", 1, ExpertsTiles::kMaxRing, 0));
  if (s.masked()) t.forbid("ring_one", "applies only to layout standard (the one-token kernels)");
  x.ring_one = static_cast<int>(t.integer("ring_one", 1, ExpertsTiles::kMaxRing, 0));
  const int n_max = ExpertsTiles::kWgmmaN.back();
  x.cols1 = tile(t, "cols1", 8, n_max / 2, 8, [i](int v) { return ExpertsTiles::wgmma_n(2 * v) && i % v == 0; },
                 fmt::format("is not a wgmma N / 2 dividing intermediate {}", i), "2 cols1 a wgmma N, dividing intermediate");
  x.n2 = tile(t, "n2", 8, n_max, 8, [h](int v) { return ExpertsTiles::wgmma_n(v) && h % v == 0; },
              fmt::format("is not a wgmma N dividing hidden {}", h), "a wgmma N dividing hidden");
  x.band1 = static_cast<int>(t.integer("band1", 1, ExpertsTiles::kMaxBand, 0));
  x.band2 = static_cast<int>(t.integer("band2", 1, ExpertsTiles::kMaxBand, 0));
  t.finish();
  return x;
}

}  // namespace

bool ExpertsTiles::any() const noexcept {
  return groups1 || split1 || groups2 || split2 || ring1 || ring2 || ring_one || cols1 || n2 || band1 || band2;
}

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
  s->tiles = read_tiles(r, *s);
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
  if (tiles.any()) {
    auto& t = j["tiles"] = nlohmann::json::object();
    const std::pair<const char*, int> fields[] = {{"groups1", tiles.groups1}, {"split1", tiles.split1}, {"groups2", tiles.groups2},
                                                  {"split2", tiles.split2},   {"ring1", tiles.ring1},   {"ring2", tiles.ring2},
                                                  {"ring_one", tiles.ring_one}, {"cols1", tiles.cols1}, {"n2", tiles.n2},
                                                  {"band1", tiles.band1},     {"band2", tiles.band2}};
    for (const auto& [key, value] : fields) {
      if (value > 0) t[key] = value;
    }
  }
  return j.dump();
}

std::vector<TensorDecl> ExpertsSpec::tensors() const {
  const auto T = Extent::token_count();
  const auto E = Extent::fixed(num_experts), H = Extent::fixed(hidden), I2 = Extent::fixed(2 * std::int64_t{intermediate}),
             I = Extent::fixed(intermediate);
  std::vector<TensorDecl> t;
  if (masked()) {
    t.push_back({.name = "x", .dtype = dtype, .shape = {E, T, H}, .role = TensorRole::input, .align = kVectorAlign, .note = "each expert's rows"});
    t.push_back({.name = "expert_num_tokens", .dtype = DType::i32, .shape = {E}, .role = TensorRole::input,
                 .note = "rows of each expert to compute (clamped to [0, T])"});
  } else {
    const auto K = Extent::fixed(topk);
    t.push_back({.name = "x", .dtype = dtype, .shape = {T, H}, .role = TensorRole::input, .align = kVectorAlign, .note = "hidden states"});
    t.push_back({.name = "topk_ids", .dtype = ids_dtype, .shape = {T, K}, .role = TensorRole::input,
                 .note = global_experts > 0 ? "global expert ids (mapped by expert_map)" : "expert ids; outside [0, E) skipped"});
    t.push_back({.name = "topk_weights", .dtype = DType::f32, .shape = {T, K}, .role = TensorRole::input,
                 .note = weight_on_input ? "router weights, applied to x" : "router weights, applied to GEMM2's output"});
  }
  t.push_back({.name = "w13", .dtype = dtype, .shape = {E, I2, H}, .role = TensorRole::input, .align = kVectorAlign,
               .note = activation.interleaved ? "gate/up rows interleaved, K-contiguous" : "gate rows then up rows, K-contiguous"});
  t.push_back({.name = "w2", .dtype = dtype, .shape = {E, H, I}, .role = TensorRole::input, .align = kVectorAlign, .note = "K-contiguous"});
  if (bias) {
    t.push_back({.name = "b13", .dtype = dtype, .shape = {E, I2}, .role = TensorRole::input, .note = "GEMM1 bias, rows as w13"});
    t.push_back({.name = "b2", .dtype = dtype, .shape = {E, H}, .role = TensorRole::input, .note = "GEMM2 bias"});
  }
  if (global_experts > 0) {
    t.push_back({.name = "expert_map", .dtype = DType::i32, .shape = {Extent::fixed(global_experts)}, .role = TensorRole::input,
                 .note = "local expert of each global id; -1: not on this rank"});
  }
  if (masked()) {
    t.push_back({.name = "y", .dtype = dtype, .shape = {E, T, H}, .role = TensorRole::output, .keeps_unwritten = true, .align = kVectorAlign,
                 .note = "rows t >= expert_num_tokens[e] keep their contents"});
  } else {
    t.push_back({.name = "y", .dtype = dtype, .shape = {T, H}, .role = TensorRole::output, .align = kVectorAlign, .note = "sum of each token's slots"});
  }
  return t;
}

}  // namespace moejit
