#pragma once
// The latent tail's contract (templates/latent_tail.cuh) and the up projection's tiling.

#include <moejit/contract.hpp>

#include "spec/ops/latent_tail.hpp"

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

namespace moejit::detail {

/// The up projection's tiling (part of the contract): a CTA is `groups` warps of 16 W rows times
/// `split` warps splitting K. The split fixes the order of the sums, so it depends on the spec
/// alone and every path (base, striped, fused) of one spec gives the same bits.
struct TailTiling {
  int split = 1;     ///< warps splitting L, their partial sums added in split order
  int groups = 4;    ///< warps of 16 W rows a CTA
  int tc_rows = 64;  ///< sm_90a's tensor-core kernel: W rows a CTA (64, 56 or 48)
};
TailTiling latent_tail_tiling(const LatentTailSpec& s) noexcept;

/// Whether the contract has the sm_90a up projection (kTailUpProjTc): sm_90a, L in whole 128-wide
/// halves, and tp 1 (the stripes of tp > 1 are 14-112 CTAs of 64 rows; they keep the streamer).
bool latent_tail_tc(const LatentTailSpec& s, std::string_view arch) noexcept;

/// Kernel roles of a latent-tail contract: RMSNorm (and the fused path's reduce), the up
/// projection at four token-tile sizes (picked per call), and for tp > 1 the fused path's
/// exchange, the base path's gather and permute.
inline constexpr std::string_view kTailNorm = "norm";
inline constexpr std::array<std::string_view, 4> kTailUpProj = {"upproj_n8", "upproj_n16", "upproj_n32", "upproj_n64"};
inline constexpr std::array<int, 4> kTailUpProjTokens = {8, 16, 32, 64};  ///< tokens a CTA of each size takes
/// The up projection on sm_90a's tensor cores (TMA + wgmma) at three token tiles: what calls of
/// one token and of more than 8 take where the contract has it (latent_tail_tc_call).
inline constexpr std::array<std::string_view, 3> kTailUpProjTc = {"upproj_tc16", "upproj_tc32", "upproj_tc64"};
inline constexpr std::array<int, 3> kTailUpProjTcTokens = {16, 32, 64};
/// Whether a call of `tokens` takes the tensor-core kernel where the contract has it: it is the
/// faster tail alone at every T, but at 2-8 tokens an MoE layer's decode GEMMs ran slower after
/// it (bench/README.md "Latent tail"), so the streamer keeps those.
constexpr bool latent_tail_tc_call(std::int64_t tokens) noexcept { return tokens == 1 || tokens > kTailUpProjTokens[0]; }
inline constexpr std::string_view kTailExchange = "exchange";
inline constexpr std::string_view kTailGather = "gather";
inline constexpr std::string_view kTailPermute = "permute";

std::vector<Contract> latent_tail_contracts(const OpSpec& op, std::string_view arch);

}  // namespace moejit::detail
