#pragma once
// Routing (numerics.md "routing"): logits [T, E] -> top-K expert ids and weights per token.
// The entry the generated stub includes; its parts, in include order:
//   routing_keys.cuh    an expert's 64-bit key from its logit; a selection's weights and stores
//   routing_select.cuh  reductions over a token's lanes, the choice of groups, top-K selection
//   routing_warp.cuh    routing_warp_kernel: one token per kLanes lanes
//   routing_block.cuh   routing_block_kernel: one token per block (few tokens, many experts)
// Every kernel builds the same keys and selects by the same rules, so all give the same bits.
// At large T they are bound by the ALU pipe (ncu, H200: 68-80% of its peak, which is half the FMA
// pipe's rate) or by instruction issue, so instructions are what their code counts: validity by
// FMAs and a wrapping add, selects only where no store or FMA does.
//
// Config (generated): kE, kK, kG, kTG, kGroupSize, kGrouped, kGroupScore, kScoring,
// kRenormalize, kAlpha, kHasBias, kIds64, Logit, Bias, kLanes, kWarpSlots, kWarpVec,
// kWarpsPerBlock, kGroupSlots, kBlockWarps, kBlockSlots, kBlockChunks.

#include "routing_warp.cuh"
#include "routing_block.cuh"
