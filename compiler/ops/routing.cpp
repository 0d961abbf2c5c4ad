#include "routing.hpp"

#include "compiler/codegen.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>

namespace moejit::detail {

namespace {

int ceil_div(int a, int b) { return (a + b - 1) / b; }

}  // namespace

RoutingTiling routing_tiling(const RoutingSpec& s) noexcept {
  RoutingTiling t;
  const int e = s.num_experts;
  const bool grouped = s.grouped();
  // Warp kernel: whole warps from 64 experts up (always when grouped); below that a token
  // takes a power-of-two slice of a warp with about two experts per lane.
  t.lanes = grouped || e >= 64 ? 32 : std::clamp(static_cast<int>(std::bit_floor(static_cast<unsigned>(std::max(1, e / 2)))), 1, 32);
  const int slots = ceil_div(e, t.lanes);
  t.warp_slots = slots <= 32 ? slots : 0;
  // 16-byte loads where a lane's slots and the row split into them (else 8, 4, 2 bytes).
  for (int v = 16 / static_cast<int>(size_of(s.logits_dtype)); v > 1 && t.warp_slots > 0; v /= 2) {
    if (t.warp_slots % v == 0 && e % v == 0) {
      t.warp_vec = v;
      break;
    }
  }
  t.group_slots = grouped ? ceil_div(s.n_group, 32) : 1;
  // A cache of four keys a lane runs out only when a lane wins four of the top-k - 1 rounds.
  t.warp_lazy = t.lanes == 32 && t.warp_slots >= 16 && s.topk >= 5 && s.topk <= 16 && t.warp_vec > 1;
  const bool rank_tree = e <= RoutingSpec::kRankTreeMaxExperts && s.topk <= RoutingSpec::kRankTreeMaxK &&
                         (!grouped || s.n_group <= RoutingSpec::kRankTreeMaxGroups);
  if (grouped && !rank_tree) return t;  // grouped: the warp kernel only
  // Block kernel. Up to 512 experts and top-32: one expert per thread, the selection a tree of
  // shared-memory rank counts (no dependent rounds). Beyond that about four experts a thread, at
  // most 16 warps, each warp's top K by rounds, then a rank-count merge (the rank tree at 896
  // experts was 1.3x slower).
  if (rank_tree) {
    t.block_warps = ceil_div(e, 32);
    t.block_slots = 1;
    t.block_chunks = 1;
    return t;
  }
  t.block_warps = std::clamp(ceil_div(e, 128), 1, std::max(1, std::min(16, 512 / s.topk)));
  t.block_slots = std::clamp(ceil_div(e, 32 * t.block_warps), 1, 8);
  t.block_chunks = ceil_div(e, 32 * t.block_warps * t.block_slots);
  return t;
}

std::vector<Contract> routing_contracts(const OpSpec& op, std::string_view arch) {
  const auto& s = dynamic_cast<const RoutingSpec&>(op);
  const auto t = routing_tiling(s);
  const bool g = s.grouped();
  Contract c("routing", std::string(arch), "routing.cuh");
  c.set("num_experts", std::to_string(s.num_experts))
      .set("topk", std::to_string(s.topk))
      .set("n_group", std::to_string(g ? s.n_group : 1))
      .set("topk_group", std::to_string(g ? s.topk_group : 1))
      .set("group_score", g ? std::string(to_string(s.group_score)) : "none")
      .set("scoring", std::string(to_string(s.scoring)))
      .set("bias", s.bias ? std::string(spec_name(*s.bias)) : "none")
      .set("renormalize", s.renormalize ? "true" : "false")
      .set("routed_scaling_factor", canonical_float(s.routed_scaling_factor))
      .set("logits_dtype", std::string(spec_name(s.logits_dtype)))
      .set("ids_dtype", std::string(spec_name(s.ids_dtype)))
      .set("lanes", std::to_string(t.lanes))
      .set("warp_slots", std::to_string(t.warp_slots))
      .set("warp_vec", std::to_string(t.warp_vec))
      .set("warps_per_block", std::to_string(t.warps_per_block))
      .set("warp_lazy", t.warp_lazy ? "true" : "false")
      .set("group_slots", std::to_string(t.group_slots))
      .set("block_warps", std::to_string(t.block_warps))
      .set("block_slots", std::to_string(t.block_slots))
      .set("block_chunks", std::to_string(t.block_chunks));

  StubBuilder stub("routing.cuh");
  stub.constant("int", "kE", std::to_string(s.num_experts))
      .constant("int", "kK", std::to_string(s.topk))
      .constant("int", "kG", std::to_string(g ? s.n_group : 1))
      .constant("int", "kTG", std::to_string(g ? s.topk_group : 1))
      .constant("int", "kGroupSize", std::to_string(g ? s.num_experts / s.n_group : s.num_experts))
      .flag("kGrouped", g)
      .constant("moejit::GroupScore", "kGroupScore", fmt::format("moejit::GroupScore::{}", to_string(s.group_score)))
      .constant("moejit::Scoring", "kScoring", fmt::format("moejit::Scoring::{}", to_string(s.scoring)))
      .flag("kRenormalize", s.renormalize)
      .real("kAlpha", s.routed_scaling_factor)
      .flag("kHasBias", s.bias.has_value())
      .flag("kIds64", s.ids_dtype == DType::i64)
      .type("Logit", s.logits_dtype)
      .type("Bias", s.bias.value_or(DType::f32))
      .constant("int", "kLanes", std::to_string(t.lanes))
      .constant("int", "kWarpSlots", std::to_string(t.warp_slots))
      .constant("int", "kWarpVec", std::to_string(t.warp_vec))
      .constant("int", "kWarpsPerBlock", std::to_string(t.warps_per_block))
      .constant("int", "kGroupSlots", std::to_string(t.group_slots))
      .constant("int", "kBlockWarps", std::to_string(std::max(1, t.block_warps)))
      .constant("int", "kBlockSlots", std::to_string(std::max(1, t.block_slots)))
      .constant("int", "kBlockChunks", std::to_string(std::max(1, t.block_chunks)));
  constexpr std::string_view kArgs = "moejit::RoutingArgs";
  std::vector<StubBuilder::Kernel> kernels;
  // The warp kernel twice when it loads vectors: one copy for pointers aligned for them, one
  // that reads element by element (the launcher picks by the pointers).
  if (t.warp_slots > 0 && t.warp_vec > 1) {
    kernels.push_back({std::string(kRoutingWarpVectors), "moejit::routing_warp_kernel<moejit::Loads::vectors>", std::string(kArgs)});
  }
  if (t.warp_slots > 0) {
    kernels.push_back({std::string(kRoutingWarpElements), "moejit::routing_warp_kernel<moejit::Loads::elements>", std::string(kArgs)});
  }
  if (t.block_warps > 0) kernels.push_back({std::string(kRoutingBlock), "moejit::routing_block_kernel", std::string(kArgs)});
  if (t.warp_lazy) {
    kernels.push_back({std::string(kRoutingWarpLazy),
                       "moejit::routing_warp_kernel<moejit::Loads::vectors, moejit::Refill::lazy>", std::string(kArgs)});
  }
  stub.emit(c, kernels);
  return {c};
}

}  // namespace moejit::detail
