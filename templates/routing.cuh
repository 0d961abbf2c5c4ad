#pragma once
// Routing (numerics.md "routing"): logits [T, E] -> top-K expert ids and weights per token.
//
// Every expert gets one 64-bit key: (class or order-preserving bits of its fp32 selection key,
// plus 3) << 32 | (0xFFFF - expert). A larger key wins, so one max-reduction is an arg-max with
// the lower-index tie rule, and keys are unique. Classes below every finite key: 2 = invalid
// (non-finite logit or key) in a kept group, 1 = expert of a group that was not kept; an empty
// slot is key 0. The +3 puts the classes below the finite keys without a test: an invalid
// key's value is made NaN, whose order-preserving bits are 0xFFFFFFFF, and wraps to 2. Top-K
// takes K maxima in turn: each lane keeps the best two (or three) of its own keys, the lanes of
// a token reduce (redux.sync on a full warp), the lane that held the winner pops it and rescans
// its keys below the winner only when its cache is used up. The warp kernel holds its keys as
// two 32-bit halves (upper half, expert) (or, up to 4 keys a lane with no bias, as one number
// with the slot in its low bits: select_topk_tagged); a round reduces the upper halves only and
// the lane holding the largest wins -- a tie between lanes (bitwise-equal keys) is only counted,
// and then the exact rounds (a second reduction for the lowest expert) run again. Each round's
// pair goes to shared memory, read back by the lane of its rank after the last round. At large T the
// kernels are bound by the ALU pipe (ncu, H200: 68-80% of its peak, half the rate of the FMA
// pipe) or by instruction issue, so their instructions are the ones counted: validity by FMAs
// and the +3, selects only where no store or FMA does.
//
// Three kernels share that routine, so they give the same bits:
//   routing_warp_kernel   one token per kLanes lanes (several tokens per warp when E is
//                         small), experts read as 16-byte vectors, keys held as their upper
//                         halves; the grouped (DeepSeek-V3) selection lives here, its group
//                         scores by shuffles when groups align with the vectors;
//   routing_block_kernel  one token per block (few tokens, many experts): each warp selects
//                         the top K of its experts, then every thread ranks one of the
//                         warps' candidates against all of them in shared memory; experts are
//                         taken in chunks when a block cannot hold them all in registers.
// Grouped selection keeps a group when fewer than TG group keys beat it (G <= 32: one
// shuffle per group, no selection rounds); the block kernel does grouped routing too when it
// has the rank-tree tiling (up to 512 experts, top-32, 32 groups).
// Softmax sums exp(x - max) as fixed point (2^-47 units, integer adds): the sum is the same
// whatever the reduction order, in every kernel and in the CPU reference. The warp kernel
// divides by it through its reciprocal and one correction (div_by_rcp: the bits of __fdiv_rn).
//
// Config (generated): kE, kK, kG, kTG, kGroupSize, kGrouped, kGroupScore, kScoring,
// kRenormalize, kAlpha, kHasBias, kIds64, Logit, Bias, kLanes, kWarpSlots, kWarpsPerBlock,
// kGroupSlots, kBlockWarps, kBlockSlots, kBlockChunks.

#include "routing_warp.cuh"
#include "routing_block.cuh"
