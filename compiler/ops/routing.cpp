#include "routing.hpp"

#include "../codegen.hpp"
#include "../spec_reader.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>

namespace moejit {

namespace {

RoutingScoring parse_scoring(const std::string& s) {
  if (s == "softmax") return RoutingScoring::softmax;
  if (s == "sigmoid") return RoutingScoring::sigmoid;
  if (s == "sqrt_softplus") return RoutingScoring::sqrt_softplus;
  return RoutingScoring::none;
}

int ceil_div(int a, int b) { return (a + b - 1) / b; }

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
           fmt::format("grouped routing has a block-per-token kernel only up to {} experts, top-{} and 32 groups",
                       RoutingSpec::kRankTreeMaxExperts, RoutingSpec::kRankTreeMaxK),
           "auto or warp");
  }
  if (s->single_group_kernel == SingleGroupKernel::warp && !s->has_warp_kernel()) {
    r.fail("single_group_kernel", fmt::format("the warp-per-token kernel holds at most {} experts", 32 * 32),
           "auto or block");
  }
  r.finish();
  return s;
}

RoutingSpec::Tiling RoutingSpec::tiling() const noexcept {
  Tiling t;
  const int e = num_experts;
  // Warp kernel: whole warps from 64 experts up (always when grouped); below that a token
  // takes a power-of-two slice of a warp with about two experts per lane.
  t.lanes = grouped() || e >= 64 ? 32 : std::clamp(static_cast<int>(std::bit_floor(static_cast<unsigned>(std::max(1, e / 2)))), 1, 32);
  const int slots = ceil_div(e, t.lanes);
  t.warp_slots = slots <= 32 ? slots : 0;
  // 16-byte loads where a lane's slots and the row split into them (else 8, 4, 2 bytes).
  for (int v = 16 / static_cast<int>(size_of(logits_dtype)); v > 1 && t.warp_slots > 0; v /= 2) {
    if (t.warp_slots % v == 0 && e % v == 0) {
      t.warp_vec = v;
      break;
    }
  }
  t.group_slots = grouped() ? ceil_div(n_group, 32) : 1;
  // (A cache of four runs out only when a lane wins four of the top-k - 1 popping rounds.)
  t.warp_lazy = t.lanes == 32 && t.warp_slots >= 16 && topk >= 5 && topk <= 16 && t.warp_vec > 1;
  const bool rank_tree = e <= kRankTreeMaxExperts && topk <= kRankTreeMaxK && (!grouped() || n_group <= 32);
  if (grouped() && !rank_tree) return t;  // grouped: the warp kernel only
  // Block kernel. Up to 512 experts and top-32 (and 32 groups when grouped): one expert per
  // thread (up to 16 warps), the selection a tree of shared-memory rank counts (no dependent
  // rounds). Beyond that: about four experts per thread, at most 16 warps, each warp's top K by
  // rounds, then a rank-count merge; experts beyond that are taken in chunks. (The rank tree at
  // 896 experts, 28 warps, is 1.3x slower than rounds + merge on the H200.)
  if (rank_tree) {
    t.block_warps = ceil_div(e, 32);
    t.block_slots = 1;
    t.block_chunks = 1;
    return t;
  }
  t.block_warps = std::clamp(ceil_div(e, 128), 1, std::max(1, std::min(16, 512 / topk)));
  t.block_slots = std::clamp(ceil_div(e, 32 * t.block_warps), 1, 8);
  t.block_chunks = ceil_div(e, 32 * t.block_warps * t.block_slots);
  return t;
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

std::vector<Contract> RoutingSpec::contracts(std::string_view arch) const {
  const auto t = tiling();
  const bool g = grouped();
  Contract c("routing", std::string(arch), "routing.cuh");
  c.set("num_experts", std::to_string(num_experts))
      .set("topk", std::to_string(topk))
      .set("n_group", std::to_string(g ? n_group : 1))
      .set("topk_group", std::to_string(g ? topk_group : 1))
      .set("group_score", g ? std::string(to_string(group_score)) : "none")
      .set("scoring", std::string(to_string(scoring)))
      .set("bias", bias ? std::string(spec_name(*bias)) : "none")
      .set("renormalize", renormalize ? "true" : "false")
      .set("routed_scaling_factor", detail::canonical_float(routed_scaling_factor))
      .set("logits_dtype", std::string(spec_name(logits_dtype)))
      .set("ids_dtype", std::string(spec_name(ids_dtype)))
      .set("lanes", std::to_string(t.lanes))
      .set("warp_slots", std::to_string(t.warp_slots))
      .set("warp_vec", std::to_string(t.warp_vec))
      .set("warps_per_block", std::to_string(t.warps_per_block))
      .set("warp_lazy", t.warp_lazy ? "true" : "false")
      .set("group_slots", std::to_string(t.group_slots))
      .set("block_warps", std::to_string(t.block_warps))
      .set("block_slots", std::to_string(t.block_slots))
      .set("block_chunks", std::to_string(t.block_chunks));

  detail::StubBuilder stub("routing.cuh");
  stub.constant("int", "kE", std::to_string(num_experts))
      .constant("int", "kK", std::to_string(topk))
      .constant("int", "kG", std::to_string(g ? n_group : 1))
      .constant("int", "kTG", std::to_string(g ? topk_group : 1))
      .constant("int", "kGroupSize", std::to_string(g ? num_experts / n_group : num_experts))
      .flag("kGrouped", g)
      .constant("moejit::GroupScore", "kGroupScore", fmt::format("moejit::GroupScore::{}", to_string(group_score)))
      .constant("moejit::Scoring", "kScoring", fmt::format("moejit::Scoring::{}", to_string(scoring)))
      .flag("kRenormalize", renormalize)
      .real("kAlpha", routed_scaling_factor)
      .flag("kHasBias", bias.has_value())
      .flag("kIds64", ids_dtype == DType::i64)
      .type("Logit", logits_dtype)
      .type("Bias", bias.value_or(DType::f32))
      .constant("int", "kLanes", std::to_string(t.lanes))
      .constant("int", "kWarpSlots", std::to_string(t.warp_slots))
      .constant("int", "kWarpVec", std::to_string(t.warp_vec))
      .constant("int", "kWarpsPerBlock", std::to_string(t.warps_per_block))
      .constant("int", "kGroupSlots", std::to_string(t.group_slots))
      .constant("int", "kBlockWarps", std::to_string(std::max(1, t.block_warps)))
      .constant("int", "kBlockSlots", std::to_string(std::max(1, t.block_slots)))
      .constant("int", "kBlockChunks", std::to_string(std::max(1, t.block_chunks)));
  std::vector<std::string> kernels;
  // The warp kernel twice when it loads vectors: one copy for pointers aligned for them, one
  // that reads element by element (the launcher picks by the pointers).
  if (t.warp_slots > 0 && t.warp_vec > 1) {
    kernels.push_back("moejit::routing_warp_kernel<moejit::Loads::vectors>");
    kernels.push_back("moejit::routing_warp_kernel<moejit::Loads::elements>");
  } else if (t.warp_slots > 0) {
    kernels.push_back("moejit::routing_warp_kernel<moejit::Loads::elements>");
  }
  if (t.block_warps > 0) kernels.push_back("moejit::routing_block_kernel");
  // Last: the vector warp kernel with lazy keys, for token counts up to a measured crossover.
  if (t.warp_lazy) kernels.push_back("moejit::routing_warp_kernel<moejit::Loads::vectors, moejit::Refill::lazy>");
  c.source = stub.render(kernels, "moejit::RoutingArgs");
  for (const auto& k : kernels) c.kernels.push_back(detail::StubBuilder::name_expression(k));
  return {c};
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
