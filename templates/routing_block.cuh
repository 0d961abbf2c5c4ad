#pragma once
// The routing block kernel (routing_block_kernel): one token per block, for few tokens with many
// experts. Up to 512 experts and top-32 (the rank-tree tiling) each thread holds one expert's key
// and the top K comes from a tree of shared-memory rank counts (rank_sets), with no dependent
// selection rounds on the critical path; grouped routing runs here only with that tiling (at
// most 32 groups). Otherwise each warp selects the top K of its experts by select_topk_split and
// one rank-count pass merges the warps' candidates; experts are taken in chunks when a block
// cannot hold them all in registers.

#include "routing_select.cuh"

namespace moejit {

template <class C>
__global__ void __launch_bounds__(C::kBlockWarps * 32, 1) routing_block_kernel(RoutingArgs a) {
  dependent_launch_prologue();
  using namespace routing;
  static_assert(RoutingChecks<C>::ok);

  constexpr int kWarps = C::kBlockWarps;
  constexpr int kThreads = kWarps * 32;
  constexpr int kSlots = C::kBlockSlots;
  constexpr int kChunks = C::kBlockChunks;
  constexpr int kChunk = kThreads * kSlots;
  static_assert(kChunk * kChunks >= C::kE, "the chunks cover every expert");
  // One expert per thread and K <= 32 (compiler/ops/routing.cpp picks this tiling for up to
  // 512 experts): the rank tree; otherwise rounds per warp and a rank-count merge.
  constexpr bool kRankTree = kSlots == 1 && kChunks == 1 && C::kK <= 32;
  constexpr int kFan = C::kK <= 4 ? 32 : (128 / C::kK < 2 ? 2 : 128 / C::kK);  // sets of <= 128 keys
  static_assert(!C::kGrouped || (kRankTree && C::kG <= 32), "grouped: the rank-tree tiling with at most 32 groups");
  constexpr int kMergeCount = kRankTree ? 1 : (kWarps + (kChunks > 1 ? 1 : 0)) * C::kK;

  __shared__ u32 s_max[kWarps];
  __shared__ u64 s_sum[kWarps];
  __shared__ u64 s_cand[kMergeCount];
  __shared__ u64 s_top[C::kK];
  __shared__ float s_weight[kRankTree ? kThreads : 1];  // rank tree: each expert's weight
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  const int lane = tid % 32;
  const long long row = blockIdx.x;
  const long long base = row * C::kE;
  auto expert = [&](int chunk, int s) { return chunk * kChunk + s * kThreads + tid; };
  // One chunk (the usual case): logits and bias are loaded once, together, into registers.
  // Several chunks: each pass reloads its chunk (from L1/L2).
  float xr[kSlots], br[kSlots];
  if constexpr (kChunks == 1) {
#pragma unroll
    for (int s = 0; s < kSlots; ++s) {
      const int e = expert(0, s);
      xr[s] = e < C::kE ? load_float<typename C::Logit>(a.logits, base + e) : 0.0f;
      br[s] = 0.0f;
      if constexpr (C::kHasBias) br[s] = e < C::kE ? load_float<typename C::Bias>(a.bias, e) : 0.0f;
    }
  }
  auto logit = [&](int chunk, int s) {
    if constexpr (kChunks == 1) return xr[s];
    return load_float<typename C::Logit>(a.logits, base + expert(chunk, s));
  };
  auto bias = [&](int chunk, int s) {
    if constexpr (kChunks == 1) return br[s];
    return load_float<typename C::Bias>(a.bias, expert(chunk, s));
  };

  // f(x) for this thread's logit of each of its experts, chunk by chunk.
  auto each_logit = [&](auto&& f) {
#pragma unroll 1
    for (int chunk = 0; chunk < kChunks; ++chunk) {
#pragma unroll
      for (int s = 0; s < kSlots; ++s) {
        if (expert(chunk, s) < C::kE) f(logit(chunk, s));
      }
    }
  };

  bool any = false;
  u32 m = 0;
  each_logit([&](float x) {
    if (finite(x)) {
      any = true;
      m = umax(m, orderable(x));
    }
  });
  // Whether the row has a finite logit (rule 6) rides on a barrier the kernel needs anyway: the
  // softmax max (no finite logit leaves it 0), or the rank tree's first barrier.
  bool any_finite = false;
  if constexpr (C::kScoring != Scoring::softmax && !kRankTree) any_finite = __syncthreads_or(any) != 0;
  RowStats st;
  if constexpr (C::kScoring == Scoring::softmax) {
    m = lanes_max<32>(m);
    if (lane == 0) s_max[warp] = m;
    __syncthreads();
#pragma unroll
    for (int w = 0; w < kWarps; ++w) m = umax(m, s_max[w]);
    any_finite = m != 0;
    st.max = any_finite ? from_orderable(m) : 0.0f;
    u64 q = 0;
    each_logit([&](float x) {
      if (finite(x)) q += fixed_point(expf(__fsub_rn(x, st.max)));
    });
    q = lanes_sum<32, fixed_point_bits(kSlots * kChunks)>(q);
    if (lane == 0) s_sum[warp] = q;
    __syncthreads();
    q = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) q += s_sum[w];
    st.sum = from_fixed_point(q);
  }

  u64 best[kRanksOf<32, C::kK>];
  if constexpr (kRankTree) {
    // One key per thread. Level 0: each warp's 32 keys are a set; then sets of kFan lists of
    // K until one is left (at most two levels for 512 experts). Every level is one
    // parallel pass of rank counts: the critical path has no dependent selection rounds.
    // Each thread also leaves its expert's weight in shared memory: the selection's weights are
    // read back, not reloaded and recomputed after the tree.
    __shared__ u64 s_rank[2][kThreads];
    u64 key;
    {
      const int e = expert(0, 0);
      float b = 0.0f;
      if constexpr (C::kHasBias) b = bias(0, 0);
      const float x = logit(0, 0);
      const float c = score<C>(x, st);
      key = e < C::kE ? pack(key_hi_of_score<C>(x, c, b), e) : 0;
      s_rank[0][tid] = key;
      s_weight[tid] = valid_key(key) ? (C::kScoring == Scoring::none ? sigmoid(x) : c) : 0.0f;  // weight<C>(x)
    }
    // Level 0 ranks each warp's own 32 keys: a warp barrier is enough, unless groups span warps.
    if constexpr (!C::kGrouped || 32 % C::kGroupSize == 0) {
      __syncwarp();
    } else {
      __syncthreads();
    }
    if constexpr (C::kGrouped) {
      // Rule 3 in parallel: each expert's rank within its group gives the group's best and
      // second-best selection values (keys order like their values; invalid keys rank below
      // every valid one and count as -inf); then every warp scores the groups itself (no
      // barrier to hand the kept set around) and drops its experts of the groups that TG or
      // more groups beat to the excluded class.
      __shared__ float s_best2[2][C::kG];
      const int e = tid;
      if constexpr (C::kGroupSize == 32) {
        // A group is a warp (DeepSeek-V3): its best two by two warp reductions (the second is
        // the best again when two experts share it) instead of 32 shared-memory rank steps.
        const u32 h = static_cast<u32>(key >> 32);
        const u32 c1 = __reduce_max_sync(kFullMask, h);
        const bool twice = __popc(__ballot_sync(kFullMask, h == c1)) >= 2;
        const u32 c2 = twice ? c1 : __reduce_max_sync(kFullMask, h == c1 ? 0u : h);
        if (lane == 0) {
          s_best2[0][warp] = value_of(c1);
          s_best2[1][warp] = value_of(c2);
        }
      } else {
        if (e < C::kE) {
          const int base = (e / C::kGroupSize) * C::kGroupSize;
          int rank = 0;
#pragma unroll 8
          for (int j = 0; j < C::kGroupSize; ++j) rank += s_rank[0][base + j] > key ? 1 : 0;
          if (rank < 2) s_best2[rank][e / C::kGroupSize] = value_of(static_cast<u32>(key >> 32));
        }
        if (C::kGroupSize == 1 && tid < C::kG) s_best2[1][tid] = neg_inf();
      }
      __syncthreads();
      u32 score = 0;
      if (lane < C::kG) {
        const float c1 = s_best2[0][lane];
        score = orderable(C::kGroupScore == GroupScore::top2_sum ? add(c1, s_best2[1][lane]) : c1);
      }
      const int keep = __shfl_sync(kFullMask, group_kept<C::kG, C::kTG>(score, lane) ? 1 : 0, min(e / C::kGroupSize, 31));
      if (e < C::kE && !keep) s_rank[0][tid] = pack(kExcludedClass, e);
      __syncwarp();
    }
    int lists = rank_sets<C::kK, kThreads>(s_rank[0], s_rank[1], kWarps, 32, 1, tid);
    // The first block-wide barrier: the finite-logit flag rides on it.
    if constexpr (C::kScoring == Scoring::softmax) {
      __syncthreads();
    } else {
      any_finite = __syncthreads_or(any) != 0;
    }
    int src = 1;
    while (lists > 1) {
      lists = rank_sets<C::kK, kThreads>(s_rank[src], s_rank[src ^ 1], lists, C::kK, kFan, tid);
      src ^= 1;
      __syncthreads();
    }
    if (warp == 0) {
#pragma unroll
      for (int r = 0; r < kRanksOf<32, C::kK>; ++r) best[r] = r * 32 + lane < C::kK ? s_rank[src][r * 32 + lane] : 0;
    }
  }
#pragma unroll 1
  for (int chunk = 0; chunk < (kRankTree ? 0 : kChunks); ++chunk) {
    // Each warp's top K by the warp kernel's selection (keys held as upper halves).
    u32 hi[kSlots];
#pragma unroll
    for (int s = 0; s < kSlots; ++s) {
      hi[s] = 0;
      if (expert(chunk, s) >= C::kE) continue;
      float b = 0.0f;
      if constexpr (C::kHasBias) b = bias(chunk, s);
      hi[s] = key_hi<C>(logit(chunk, s), b, st);
    }
    __shared__ uint2 s_rec[kWarps][C::kK];
    u64 sel[kRanksOf<32, C::kK>];
    select_topk_split<32, kSlots, C::kK, kCacheFor<kSlots>>(
        [&](int s) { return hi[s]; },
        [&](int s) { return expert(chunk, s) < C::kE ? static_cast<u32>(expert(chunk, s)) : kNoExpert; }, lane,
        s_rec[warp], sel);
    if constexpr (kWarps == 1 && kChunks == 1) {
#pragma unroll
      for (int r = 0; r < kRanksOf<32, C::kK>; ++r) best[r] = sel[r];
    } else {
      // Merge: every warp's top K (and the top K of earlier chunks) in shared memory. Each
      // candidate counts the candidates above it (ties, only between empty-slot zeros, go by
      // position) and, if fewer than K, lands at that rank: one parallel pass instead of K
      // dependent rounds of warp reductions (~0.14 us each on the H200).
#pragma unroll
      for (int r = 0; r < kRanksOf<32, C::kK>; ++r) {
        if (r * 32 + lane < C::kK) s_cand[warp * C::kK + r * 32 + lane] = sel[r];
      }
      __syncthreads();
      const int lists = kWarps + (chunk > 0 ? 1 : 0);
      rank_sets<C::kK, kThreads>(s_cand, s_top, lists, C::kK, lists, tid);  // one set: all of them
      __syncthreads();
      if constexpr (kChunks > 1) {
        // The running top K joins the next chunk's candidates.
        for (int k = tid; k < C::kK; k += kThreads) s_cand[kWarps * C::kK + k] = s_top[k];
      }
      if (warp == 0) {
#pragma unroll
        for (int r = 0; r < kRanksOf<32, C::kK>; ++r) best[r] = r * 32 + lane < C::kK ? s_top[r * 32 + lane] : 0;
      }
    }
  }
  if (warp == 0) {
    if constexpr (kRankTree) {
      finish_row<C, 32>(best, lane, row, true, any_finite, [&](u64 key) { return s_weight[expert_of(key)]; }, a);
    } else {
      finish_row<C, 32>(best, lane, row, true, any_finite, [&](u64 key) { return key_weight<C>(key, a.logits, base, st); }, a);
    }
  }
}

}  // namespace moejit
