#include "routing.hpp"

#include "spec/canonical.hpp"
#include "spec/spec_reader.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>

namespace moejit {

namespace {

RoutingScoring parse_scoring(const std::string& s) {
  if (s == "softmax") return RoutingScoring::softmax;
  if (s == "sigmoid") return RoutingScoring::sigmoid;
  if (s == "sqrt_softplus") return RoutingScoring::sqrt_softplus;
  return RoutingScoring::none;
}

}  // namespace

std::string_view to_string(RoutingScoring s) noexcept {
  switch (s) {
    case RoutingScoring::softmax: return "softmax";
    case RoutingScoring::sigmoid: return "sigmoid";
    case RoutingScoring::sqrt_softplus: return "sqrt_softplus";
    case RoutingScoring::none: return "none";
  }
  return "?";
}

std::string_view to_string(GroupScoreKind g) noexcept { return g == GroupScoreKind::top2_sum ? "top2_sum" : "max"; }

std::string_view to_string(SingleGroupKernel k) noexcept {
  switch (k) {
    case SingleGroupKernel::automatic: return "auto";
    case SingleGroupKernel::block: return "block";
    case SingleGroupKernel::warp: return "warp";
  }
  return "?";
}

std::shared_ptr<OpSpec> parse_routing(detail::SpecReader& r) {
  auto s = std::make_shared<RoutingSpec>();
  s->num_experts = static_cast<int>(r.integer("num_experts", 1, 65535));
  s->topk = static_cast<int>(r.integer("topk", 1, kMaxTopK));
  if (s->topk > s->num_experts) {
    r.fail("topk", fmt::format("topk {} exceeds num_experts {}", s->topk, s->num_experts),
           fmt::format("an integer in [1, {}]", std::min(s->num_experts, kMaxTopK)));
  }
  s->n_group = static_cast<int>(r.integer("n_group", 1, s->num_experts, 1));
  if (s->num_experts % s->n_group != 0) {
    r.fail("n_group", fmt::format("n_group {} does not divide num_experts {}", s->n_group, s->num_experts),
           "a divisor of num_experts");
  }
  if (s->n_group > 1 && !r.has("topk_group")) {
    r.fail("topk_group", "grouped routing (n_group > 1) needs 'topk_group'", fmt::format("an integer in [1, {}]", s->n_group));
  }
  s->topk_group = static_cast<int>(r.integer("topk_group", 1, s->n_group, 1));
  const int per_group = s->num_experts / s->n_group;
  if (s->topk > s->topk_group * per_group) {
    r.fail("topk", fmt::format("topk {} exceeds topk_group x experts per group = {} x {}", s->topk, s->topk_group, per_group),
           fmt::format("at most {}", s->topk_group * per_group));
  }

  s->scoring = parse_scoring(r.choice("scoring", {"softmax", "sigmoid", "sqrt_softplus", "none"}));
  const auto bias = r.choice("bias", {"none", "fp32", "bf16", "fp16"}, "none");
  if (bias != "none") s->bias = parse_dtype(bias);
  s->renormalize = r.boolean("renormalize", false);
  const bool scaled = r.has("routed_scaling_factor") && r.number("routed_scaling_factor") != 1.0;  // exactly 1, not 1 in fp32
  s->routed_scaling_factor = r.f32("routed_scaling_factor", detail::kF32Min, detail::kF32Max, 1.0);
  if (s->scoring == RoutingScoring::none && (s->renormalize || scaled)) {
    r.fail(s->renormalize ? "renormalize" : "routed_scaling_factor",
           "scoring 'none' weights the chosen expert by sigmoid(logit): no renormalize, no scaling factor",
           "renormalize false and routed_scaling_factor 1");
  }

  if (s->grouped()) {
    const bool bias_given = s->bias.has_value();
    s->group_score = r.choice("group_score", {"top2_sum", "max"}, bias_given ? "top2_sum" : "max") == "top2_sum"
                         ? GroupScoreKind::top2_sum
                         : GroupScoreKind::max;
    if (s->num_experts > kMaxGroupedExperts) {
      r.fail("num_experts", fmt::format("grouped routing supports at most {} experts", kMaxGroupedExperts),
             fmt::format("at most {} with n_group > 1 (or n_group 1)", kMaxGroupedExperts));
    }
  } else {
    r.forbid("group_score", "applies only to grouped routing (n_group > 1 and topk_group < n_group)");
  }
  s->logits_dtype = r.dtype("logits_dtype", {DType::f32, DType::bf16, DType::f16}, DType::f32);
  s->ids_dtype = r.dtype("ids_dtype", {DType::i32, DType::i64}, DType::i32);
  const auto kernel = r.choice("single_group_kernel", {"auto", "block", "warp"}, "auto");
  s->single_group_kernel = kernel == "block" ? SingleGroupKernel::block
                           : kernel == "warp" ? SingleGroupKernel::warp
                                              : SingleGroupKernel::automatic;
  if (s->grouped() && s->single_group_kernel == SingleGroupKernel::block && !s->has_block_kernel()) {
    r.fail("single_group_kernel",
           fmt::format("grouped routing has a block-per-token kernel only up to {} experts, top-{} and {} groups",
                       RoutingSpec::kRankTreeMaxExperts, RoutingSpec::kRankTreeMaxK, RoutingSpec::kRankTreeMaxGroups),
           "auto or warp");
  }
  if (s->single_group_kernel == SingleGroupKernel::warp && !s->has_warp_kernel()) {
    r.fail("single_group_kernel", fmt::format("the warp-per-token kernel holds at most {} experts", RoutingSpec::kWarpMaxExperts),
           "auto or block");
  }
  r.finish();
  return s;
}

std::string RoutingSpec::canonical_json() const {
  nlohmann::json j{{"op", "routing"},
                   {"num_experts", num_experts},
                   {"topk", topk},
                   {"n_group", n_group},
                   {"topk_group", topk_group},
                   {"scoring", to_string(scoring)},
                   {"bias", bias ? std::string(spec_name(*bias)) : "none"},
                   {"renormalize", renormalize},
                   {"routed_scaling_factor", detail::canonical_number(routed_scaling_factor)},
                   {"logits_dtype", spec_name(logits_dtype)},
                   {"ids_dtype", spec_name(ids_dtype)},
                   {"single_group_kernel", to_string(single_group_kernel)}};
  if (grouped()) j["group_score"] = to_string(group_score);
  return j.dump();
}

std::vector<TensorDecl> RoutingSpec::tensors() const {
  std::vector<TensorDecl> t;
  t.push_back({.name = "logits", .dtype = logits_dtype, .shape = {Extent::token_count(), Extent::fixed(num_experts)},
               .role = TensorRole::input, .note = "router logits"});
  if (bias) {
    t.push_back({.name = "bias", .dtype = *bias, .shape = {Extent::fixed(num_experts)}, .role = TensorRole::input,
                 .note = "correction bias: chooses experts, never enters a weight"});
  }
  t.push_back({.name = "weights", .dtype = DType::f32, .shape = {Extent::token_count(), Extent::fixed(topk)},
               .role = TensorRole::output, .note = "descending by selection key"});
  t.push_back({.name = "ids", .dtype = ids_dtype, .shape = {Extent::token_count(), Extent::fixed(topk)},
               .role = TensorRole::output});
  return t;
}

}  // namespace moejit
