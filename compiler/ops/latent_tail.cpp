#include "latent_tail.hpp"

#include "compiler/codegen.hpp"
#include "sm90_target.hpp"
#include "templates/latent_tail_args.h"

#include <fmt/format.h>

#include <algorithm>

namespace moejit::detail {

namespace {

// NOTE: not measured yet: ~7 warps an SM of an H200 (132 SMs), each with 8 KB of W in its
// registers and more asked into L2 ahead, to keep the HBM busy at one token.
constexpr int kTargetWarps = 896;
constexpr int kMaxSplit = 8;
constexpr int kCtaWarps = 8;  // the n64 kernel holds ~170 registers a thread: one 256-thread CTA an SM

// The tensor-core kernel's W rows a CTA (one CTA an SM): the fewest rows an SM that cover H, so that the most
// SMs stream W (7168: 128 CTAs of 56, not 112 of 64), the larger on a tie.
// At least 48: an m64's rows past them read the stage's tokens (16 at the fewest).
int tc_rows(int hidden) {
  int best = 64, best_load = 0;
  for (int r : {64, 56, 48}) {
    if (hidden % r) continue;
    const int ctas = hidden / r, load = (ctas + sm90::kSms - 1) / sm90::kSms * r;
    if (best_load == 0 || load < best_load) best = r, best_load = load;
  }
  return best;
}

}  // namespace

TailTiling latent_tail_tiling(const LatentTailSpec& s) noexcept {
  // The rows one launch streams on the paths that matter: a rank's stripe when it has one.
  const int rows = s.tp_size > 1 && s.striped_possible() ? s.hidden / s.tp_size : s.hidden;
  const int row_warps = rows / 16, blocks = s.latent / 32;
  TailTiling t;
  for (int split = 1; split <= kMaxSplit; split *= 2) {
    if (blocks % split) break;
    t.split = split;
    if (row_warps * split >= kTargetWarps) break;
  }
  t.groups = std::min(4, kCtaWarps / t.split);
  t.tc_rows = tc_rows(s.hidden);
  return t;
}

bool latent_tail_tc(const LatentTailSpec& s, std::string_view arch) noexcept {
  return arch == "sm_90a" && s.tp_size == 1 && s.latent % 128 == 0 && s.hidden % 64 == 0;
}

std::vector<Contract> latent_tail_contracts(const OpSpec& op, std::string_view arch) {
  const auto& s = dynamic_cast<const LatentTailSpec&>(op);
  const auto t = latent_tail_tiling(s);
  Contract c("latent_tail", std::string(arch), "latent_tail.cuh");
  const bool multi = s.tp_size > 1;
  std::string kernels(kTailNorm);
  for (auto role : kTailUpProj) kernels += fmt::format(",{}", role);
  const bool tc = latent_tail_tc(s, arch);
  if (tc) {
    for (auto role : kTailUpProjTc) kernels += fmt::format(",{}", role);
  }
  if (multi) kernels += fmt::format(",{},{},{}", kTailExchange, kTailGather, kTailPermute);
  c.set("tp_size", std::to_string(s.tp_size))
      .set("hidden", std::to_string(s.hidden))
      .set("latent", std::to_string(s.latent))
      .set("eps", canonical_float(s.eps))
      .set("shared_expert", s.shared_expert ? "true" : "false")
      .set("slot_tokens", std::to_string(s.slot_tokens()))
      .set("split", std::to_string(t.split))
      .set("groups", std::to_string(t.groups))
      .set("kernels", kernels);
  if (tc) c.set("tc_rows", std::to_string(t.tc_rows));
  StubBuilder stub("latent_tail.cuh");
  stub.constant("int", "kH", std::to_string(s.hidden))
      .constant("int", "kL", std::to_string(s.latent))
      .constant("int", "kTP", std::to_string(s.tp_size))
      .flag("kShared", s.shared_expert)
      .real("kEps", s.eps)
      .constant("int", "kSlotTokens", std::to_string(s.slot_tokens()))
      .constant("int", "kSplit", std::to_string(t.split))
      .constant("int", "kGroups", std::to_string(t.groups))
      .constant("int", "kTcRows", std::to_string(t.tc_rows));
  std::vector<StubBuilder::Kernel> list = {{std::string(kTailNorm), "moejit::tail_norm_kernel", "moejit::TailNormArgs"}};
  for (std::size_t i = 0; i < kTailUpProj.size(); ++i) {
    list.push_back({std::string(kTailUpProj[i]), fmt::format("moejit::tail_upproj_kernel<{}>", kTailUpProjTokens[i] / 8), "moejit::TailUpArgs"});
  }
  for (std::size_t i = 0; tc && i < kTailUpProjTc.size(); ++i) {
    list.push_back({std::string(kTailUpProjTc[i]), fmt::format("moejit::tail_upproj_tc_kernel<{}>", kTailUpProjTcTokens[i]),
                    "const __grid_constant__ moejit::TailUpTcArgs", tail_tc_shared_bytes(kTailUpProjTcTokens[i], t.tc_rows)});
  }
  if (multi) {
    list.push_back({std::string(kTailExchange), "moejit::tail_exchange_kernel", "moejit::TailNormArgs"});
    list.push_back({std::string(kTailGather), "moejit::tail_gather_kernel", "moejit::TailGatherArgs"});
    list.push_back({std::string(kTailPermute), "moejit::tail_permute_kernel", "moejit::TailPermuteArgs"});
  }
  stub.emit(c, list);
  return {c};
}

}  // namespace moejit::detail
