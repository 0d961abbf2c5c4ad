#pragma once
// The routing warp kernel (routing_warp_kernel): one token per kLanes lanes, several tokens a
// warp when E is small. A lane's experts are read as vectors of kVec (16 bytes, or narrower where
// the row or the slots need), laid out so that each load instruction of a warp reads one
// contiguous stretch of the row; its keys are held as upper halves (the expert is the slot's) and
// selected by select_topk_split, or by select_topk_tagged for up to 4 keys a lane without a bias.
// Grouped selection lives here only: group scores by shuffles when groups align with the vectors,
// else through shared memory. A contract compiles up to three of these kernels: vector loads,
// element loads (pointers not aligned for vectors), and vector loads with lazy keys (Refill::lazy,
// which the launcher takes up to a measured token count).

#include "routing_select.cuh"

namespace moejit {

/// How the warp kernel reads logits and bias: as vectors (pointers aligned for them) or one
/// element at a time.
enum class Loads { vectors, elements };
/// How a lane of the warp kernel's fast rounds gets its next key once its cache is used up:
/// rescan its keys, or take lazy keys kept by the cache fill (routing::kLazyFor; compiled where
/// that applies, and taken up to a token count measured on the H200).
enum class Refill { rescan, lazy };

// Layout: a token's experts are taken kVec at a time (one vector load each), vector j of lane
// l holding experts (j * kLanes + l) * kVec + v: each load instruction of a warp reads one
// contiguous stretch of the row. The bias has the same layout.
template <class C>
struct WarpLayout {
  static constexpr int kSlots = C::kWarpSlots;
  static constexpr int kVec = C::kWarpVec;  // compiler/ops/routing.cpp: 16 bytes, or less where slots and E need
  static_assert(kVec >= 1 && kSlots % kVec == 0 && C::kE % kVec == 0 && kVec * sizeof(typename C::Logit) <= 16,
                "a lane's slots and the row split into vectors");
  static constexpr int kVecs = kSlots / kVec;
  __host__ __device__ static constexpr int expert(int s, int lane) { return ((s / kVec) * C::kLanes + lane) * kVec + s % kVec; }
  /// Slot s lies past the last expert for some lane (only then is the bound checked at run time).
  __host__ __device__ static constexpr bool partial(int s) { return ((s / kVec) + 1) * C::kLanes * kVec > C::kE; }
  // Grouped: a vector never straddles groups and a group of one vector column is a power of
  // two of adjacent lanes: the group's best two come from shuffles (G <= 32). Otherwise the
  // group scores go through shared memory.
  static constexpr int kGroupLanes =
      C::kGrouped && C::kG <= 32 && C::kGroupSize % kVec == 0 && is_pow2(C::kGroupSize / kVec) &&
              C::kGroupSize / kVec <= C::kLanes
          ? C::kGroupSize / kVec
          : 0;
  // Cached keys per lane in the selection (kCacheFor): a lane rescans its keys once it has won
  // as many rounds as it caches.
  static constexpr int kCache = kCacheFor<kSlots>;
  // select_topk_tagged: keys of a score with no bias (all +0 or above), one vector of 1, 2 or 4
  // experts a lane (expert(0) + slot, expert(0) a multiple of the vector width).
  static constexpr bool kTagged = routing::kNonNegativeKeys<C> && !C::kGrouped && C::kLanes == 32 && kSlots == kVec &&
                                  (kSlots == 4 || kSlots == 2 || kSlots == 1) && C::kK <= 32;
};

/// Loads n = kSlots values of one row (or the bias) in the warp layout: as kVec-wide vectors
/// (the launcher has checked that the pointers are aligned for them) or one element at a time
/// (same layout, same values).
template <class C, class T, Loads kLoads, class L = WarpLayout<C>>
__device__ __forceinline__ void load_row(const void* p, long long row_base, int lane, float (&out)[L::kSlots]) {
  const T* base = static_cast<const T*>(p) + row_base;
  constexpr int kV = L::kVec;
  if constexpr (kLoads == Loads::vectors) {
#pragma unroll
    for (int j = 0; j < L::kVecs; ++j) {
      const int e = L::expert(j * kV, lane);
      Vec<T, kV> v;
      if (!L::partial(j * kV) || e < C::kE) {
        v = load_vec<T, kV>(base + e);
      } else {
#pragma unroll
        for (int i = 0; i < kV; ++i) v.v[i] = from_float<T>(0.0f);
      }
#pragma unroll
      for (int i = 0; i < kV; ++i) out[j * kV + i] = to_float(v.v[i]);
    }
  } else {
#pragma unroll
    for (int s = 0; s < L::kSlots; ++s) {
      const int e = L::expert(s, lane);
      out[s] = !L::partial(s) || e < C::kE ? to_float(base[e]) : 0.0f;
    }
  }
}

/// Resident blocks asked of ptxas for the warp kernel: a register budget of 40 + the values a
/// lane holds per key (logit, bias, softmax's exp), so that it issues all of a row's loads before
/// the first keys' math instead of a second memory round trip (DeepSeek-V3 T=1: 2.42 -> 2.24 us).
/// Above 16 keys a lane ptxas's own choice, except with two ranks a lane (K > 32), where it
/// spills (sm_100a, 1024 experts, top 64).
template <class C>
constexpr int kWarpMinBlocks =
    C::kWarpSlots > 16
        ? (C::kK > 32 ? 1 : 0)
        : 65536 / (C::kWarpsPerBlock * 32 *
                   ((1 + (C::kHasBias ? 1 : 0) + (C::kScoring == Scoring::softmax ? 1 : 0)) * C::kWarpSlots + 40));
/// One token per kLanes lanes; kLoads: how logits and bias are read, a kernel each so that no call
/// issues both kinds of loads (~20 instructions a token). The element kernel beside a vector one
/// (the rare one) asks for one resident block: otherwise it spills (Kimi-K3-sized, sm_90a).
template <class C, Loads kLoads, Refill kRefill = Refill::rescan>
__global__ void __launch_bounds__(C::kWarpsPerBlock * 32, kLoads == Loads::elements && C::kWarpVec > 1 ? 1 : kWarpMinBlocks<C>) routing_warp_kernel(RoutingArgs a) {
  dependent_launch_prologue();
  using namespace routing;
  using L = WarpLayout<C>;
  static_assert(RoutingChecks<C>::ok);
  static_assert(C::kWarpSlots * C::kLanes >= C::kE && C::kWarpSlots <= 32, "a token's keys fit its lanes' registers");
  // compiler/ops/routing.cpp compiles Refill::lazy only where the fast rounds take lazy keys.
  static_assert(kRefill == Refill::rescan ||
                    routing::kLazyFor<C::kLanes, C::kWarpSlots, kCacheFor<C::kWarpSlots>, C::kK <= 16, true>,
                "Refill::lazy without lazy keys");
  constexpr int kLanes = C::kLanes;
  constexpr int kSlots = C::kWarpSlots;
  // Unsigned index math: a signed division by 32 costs ptxas's rounding fixups.
  const int warp = static_cast<int>(threadIdx.x / 32u);
  const int lane = static_cast<int>(threadIdx.x % static_cast<unsigned>(kLanes));
  const long long token = static_cast<long long>((blockIdx.x * C::kWarpsPerBlock + threadIdx.x / 32u) * (32u / kLanes) +
                                                 threadIdx.x % 32u / kLanes);
  if constexpr (kLanes == 32) {
    if (token >= a.tokens) return;  // the whole warp leaves together
  }
  // Lanes past the last token work on token 0 (T >= 1) and store nothing: every lane must
  // take part in the shuffles.
  const bool active = token < a.tokens;
  const long long row = active ? token : 0;
  auto in_range = [&](int s) { return !L::partial(s) || L::expert(s, lane) < C::kE; };
  const unsigned slice = threadIdx.x / static_cast<unsigned>(kLanes);  // the token's index in the block
  // Sigmoid scores with a bias: a selected expert's weight is its score, not its key. Each lane
  // leaves its scores in shared memory (vector stores) for the finish, instead of the finish
  // reloading the logit and computing the sigmoid again: a dependent memory round trip and ~16
  // instructions a token.
  constexpr bool kScoresShared = C::kScoring == Scoring::sigmoid && C::kHasBias;
  __shared__ __align__(16) float s_score[kScoresShared ? C::kWarpsPerBlock * (32 / kLanes) : 1][kScoresShared ? C::kE : 1];

  // Logits and bias are loaded together, so both round trips to memory overlap.
  float x[kSlots], b[kSlots];
  load_row<C, typename C::Logit, kLoads>(a.logits, row * C::kE, lane, x);
  if constexpr (C::kHasBias) {
    load_row<C, typename C::Bias, kLoads>(a.bias, 0, lane, b);
  } else {
#pragma unroll
    for (int s = 0; s < kSlots; ++s) b[s] = 0.0f;
  }
  RowStats st;
  bool any_finite;  // rule 6: whether the row has a finite logit
  float ex[C::kScoring == Scoring::softmax ? kSlots : 1];
  if constexpr (C::kScoring == Scoring::softmax) {
    // The max of the finite logits (rule 1) and whether there is one (rule 6). Usually every
    // logit is finite: the lane's max by fmaxf and a float sum of its logits as the test (finite
    // only when every logit is, or the sum overflowed) instead of a finite test and a select per
    // logit. Otherwise (warp-uniform, so the slices' shuffles stay converged) the careful
    // path: non-finite logits become -inf (their keys stay invalid: -inf * 0 is NaN; their
    // exp is 0), and the max is taken over order-preserving bits.
    float lane_max = in_range(0) ? x[0] : neg_inf(), total = in_range(0) ? x[0] : 0.0f;
#pragma unroll
    for (int s = 1; s < kSlots; ++s) {
      if (in_range(s)) {
        lane_max = fmaxf(lane_max, x[s]);
        total = add(total, x[s]);
      }
    }
    u32 m = lanes_max<kLanes>(finite(total) ? orderable(lane_max) : 0xffffffffu);
    bool careful = m == 0xffffffffu;
    if constexpr (kLanes < 32) careful = __any_sync(kFullMask, careful);
    if (careful) {
      u32 lane_m = 0;
#pragma unroll
      for (int s = 0; s < kSlots; ++s) {
        x[s] = finite(x[s]) ? x[s] : neg_inf();
        if (in_range(s)) lane_m = umax(lane_m, orderable(x[s]));
      }
      m = lanes_max<kLanes>(lane_m);
    }
    any_finite = m >= 0x00800000u;  // orderable(-FLT_MAX); -inf is 0x007FFFFF
    st.max = any_finite ? from_orderable(m) : 0.0f;
    u64 q = 0;
#pragma unroll
    for (int s = 0; s < kSlots; ++s) {
      ex[s] = expf(__fsub_rn(x[s], st.max));  // kept for the keys: the score is ex / sum
      if (in_range(s)) q += fixed_point(ex[s]);  // every logit finite or -inf here
    }
    st.sum = from_fixed_point(lanes_sum<kLanes, fixed_point_bits(kSlots)>(q));
  } else {
    any_finite = true;  // rule 6 is settled after the selection, when its best key is invalid
  }

  // Keys: only the upper half (class or selection value) is held; the lower half is the
  // expert's slot, rebuilt on use. L::kTagged: select_topk_tagged's form (slot in the low bits).
  u32 hi[kSlots];
  if constexpr (C::kScoring == Scoring::sigmoid) {
    // The sigmoid's reciprocal without its range check (rcp_fast); the rare y it does not cover
    // (x < -87.3, or x not finite) are redone with __frcp_rn behind one branch per lane, on
    // logits and bias loaded again (from cache): holding them across the branch costs registers
    // (Kimi-K3: 80 -> 124).
    u32 y_max = 0;  // y >= 1 or NaN: as bits, NaN and y >= 2^126 are the largest
#pragma unroll
    for (int j = 0; j < L::kVecs; ++j) {
      Vec<float, L::kVec> score;
#pragma unroll
      for (int i = 0; i < L::kVec; ++i) {
        const int s = j * L::kVec + i;
        const float y = sigmoid_denominator(x[s]);
        y_max = umax(y_max, __float_as_uint(y));
        score.v[i] = rcp_fast(y);
        hi[s] = key_hi_of_score<C, L::kTagged>(x[s], score.v[i], b[s], 3u - s);
      }
      // The selected experts' weights are these scores (rule 5): kept for the finish.
      const int e = L::expert(j * L::kVec, lane);
      if (kScoresShared && (!L::partial(j * L::kVec) || e < C::kE)) store_vec<float, L::kVec>(&s_score[slice][e], score);
    }
    if (y_max >= __float_as_uint(0x1p126f)) {
#pragma unroll
      for (int s = 0; s < kSlots; ++s) {
        if (!in_range(s)) continue;
        const int e = L::expert(s, lane);
        const float xs = load_float<typename C::Logit>(a.logits, row * C::kE + e);
        const float y = sigmoid_denominator(xs);
        if (!rcp_fast_ok(y)) {
          const float score = __frcp_rn(y);
          hi[s] = key_hi_of_score<C, L::kTagged>(xs, score, C::kHasBias ? load_float<typename C::Bias>(a.bias, e) : 0.0f, 3u - s);
          if constexpr (kScoresShared) s_score[slice][e] = score;
        }
      }
    }
  } else if constexpr (C::kScoring == Scoring::softmax) {
    // Every score divides by the row's sum (1 <= sum <= E): by its reciprocal and one
    // correction (div_by_rcp: the bits of __fdiv_rn for ex = 0 and 2^-100 <= ex <= 1, which is
    // every ex of a finite logit but the rare ones ~69 under the max). Those are redone by
    // __fdiv_rn behind one branch per lane; a non-finite logit's key is invalid whatever its
    // score (its ex is NaN or inf, bits above the test's range, and is not redone).
    // div_by_rcp_ok for ex >= 0 as one integer test: ex with 0 < bits < tiny are redone. The redo
    // itself tests floats (the same ex): ptxas otherwise keeps each bits - 1 alive for it, which
    // spilled at 16 keys a lane.
    const u32 tiny = __float_as_uint(div_by_rcp_min());
    const float inv_sum = __frcp_rn(st.sum);
    u32 low = 0xffffffffu;  // the smallest bits(ex) - 1 (0 wraps to the top)
#pragma unroll
    for (int s = 0; s < kSlots; ++s) {
      low = min(low, __float_as_uint(ex[s]) - 1u);
      hi[s] = key_hi_of_score<C, L::kTagged>(x[s], div_by_rcp(ex[s], st.sum, inv_sum), b[s], 3u - s);
    }
    if (low < tiny - 1u) {
#pragma unroll
      for (int s = 0; s < kSlots; ++s) {
        if (ex[s] > 0.0f && ex[s] < div_by_rcp_min()) hi[s] = key_hi_of_score<C, L::kTagged>(x[s], __fdiv_rn(ex[s], st.sum), b[s], 3u - s);
      }
    }
  } else {
#pragma unroll
    for (int s = 0; s < kSlots; ++s) hi[s] = key_hi<C, L::kTagged>(x[s], b[s], st, 3u - s);
  }

  if constexpr (C::kGrouped && L::kGroupLanes > 0) {
    // Rule 3 by shuffles: each vector's best two values, then over the kGroupLanes lanes of
    // its group (invalid keys count as -inf). Group keys are gathered to lane g = group g,
    // which keeps its group when fewer than TG group keys beat it.
    constexpr int kV = L::kVec;
    constexpr int kGL = L::kGroupLanes;
    // Best two by the key halves themselves (they order like the values; invalid and excluded
    // classes sit below every valid value and become -inf only when the group is scored).
    u32 gkey[L::kVecs];
#pragma unroll
    for (int j = 0; j < L::kVecs; ++j) {
      u32 c1 = 0, c2 = 0;
#pragma unroll
      for (int i = 0; i < kV; ++i) {
        const u32 h = hi[j * kV + i];
        c2 = umax(c2, min(c1, h));
        c1 = umax(c1, h);
      }
#pragma unroll
      for (int o = 1; o < kGL; o *= 2) {
        const u32 d1 = __shfl_xor_sync(kFullMask, c1, o);
        const u32 d2 = __shfl_xor_sync(kFullMask, c2, o);
        c2 = umax(min(c1, d1), umax(c2, d2));
        c1 = umax(c1, d1);
      }
      const float g = C::kGroupScore == GroupScore::top2_sum ? add(value_of(c1), value_of(c2)) : value_of(c1);
      gkey[j] = orderable(g);
    }
    // Group g starts at expert g * kGroupSize: vector column first / (kLanes * kV), lane
    // (first % (kLanes * kV)) / kV. Lane g gathers its group's score and counts the groups that
    // beat it (a larger score, or an equal one and a lower index).
    const int g = lane;
    const int first = g * C::kGroupSize;
    const int src_lane = (first % (kLanes * kV)) / kV;
    u32 mine = 0;
#pragma unroll
    for (int j = 0; j < L::kVecs; ++j) {
      const u32 v = __shfl_sync(kFullMask, gkey[j], src_lane);
      if (first / (kLanes * kV) == j) mine = v;
    }
    const u32 kept = __ballot_sync(kFullMask, group_kept<C::kG, C::kTG>(mine, g));
    // A vector lies in one group: one test per vector (unsigned: no signed-division fixups).
#pragma unroll
    for (int j = 0; j < L::kVecs; ++j) {
      const u32 group = static_cast<u32>(L::expert(j * kV, lane)) / C::kGroupSize;
      const bool keep = (kept >> (L::partial(j * kV) ? min(group, 31u) : group)) & 1u;  // past E: dropped anyway
#pragma unroll
      for (int v = 0; v < kV; ++v) hi[j * kV + v] = keep ? hi[j * kV + v] : kExcludedClass;
    }
  } else if constexpr (C::kGrouped) {
    // Group scores (rule 3) from the values in shared memory; lane l scores groups l, l + 32, ...
    __shared__ float s_key[C::kWarpsPerBlock][C::kE];
    __shared__ unsigned char s_kept[C::kWarpsPerBlock][C::kG];
#pragma unroll
    for (int s = 0; s < kSlots; ++s) {
      if (in_range(s)) s_key[warp][L::expert(s, lane)] = value_of(hi[s]);
    }
    for (int j = lane; j < C::kG; j += 32) s_kept[warp][j] = 0;
    __syncwarp();
    u64 group_keys[C::kGroupSlots];
#pragma unroll
    for (int s = 0; s < C::kGroupSlots; ++s) {
      const int j = s * 32 + lane;
      group_keys[s] = 0;
      if (j >= C::kG) continue;
      float c1 = neg_inf(), c2 = neg_inf();
      for (int i = 0; i < C::kGroupSize; ++i) {
        const float v = s_key[warp][j * C::kGroupSize + i];
        if (v > c1) {
          c2 = c1;
          c1 = v;
        } else if (v > c2) {
          c2 = v;
        }
      }
      const float g = C::kGroupScore == GroupScore::top2_sum ? add(c1, c2) : c1;
      group_keys[s] = pack(orderable(g), j);
    }
    if constexpr (C::kG <= 32) {
      // Lane j holds group j's key.
      if (group_kept<C::kG, C::kTG>(static_cast<u32>(group_keys[0] >> 32), lane)) s_kept[warp][lane] = 1;
    } else {
      u64 kept[kRanksOf<32, C::kTG>];
      select_topk<32, C::kGroupSlots, C::kTG, 2>([&](int s) { return group_keys[s]; }, lane, kept);
#pragma unroll
      for (int r = 0; r < kRanksOf<32, C::kTG>; ++r) {
        if (r * 32 + lane < C::kTG) s_kept[warp][expert_of(kept[r])] = 1;
      }
    }
    __syncwarp();
#pragma unroll
    for (int s = 0; s < kSlots; ++s) {
      if (in_range(s) && !s_kept[warp][L::expert(s, lane) / C::kGroupSize]) hi[s] = kExcludedClass;
    }
  }

  __shared__ uint2 s_rec[C::kWarpsPerBlock * (32 / kLanes)][C::kK];
  u64 sel[kRanksOf<kLanes, C::kK>];
  u32 top;
  if constexpr (L::kTagged) {
    u32 tag[kSlots];
#pragma unroll
    for (int s = 0; s < kSlots; ++s) tag[s] = in_range(s) ? hi[s] : 0u;  // hi holds tagged keys
    top = select_topk_tagged<kSlots, C::kK>(tag, static_cast<u32>(L::expert(0, lane)) ^ 3u, lane, s_rec[slice], sel);
  } else {
    top = select_topk_split<kLanes, kSlots, C::kK, L::kCache, kRefill == Refill::lazy>(
        [&](int s) { return in_range(s) ? hi[s] : 0u; },
        [&](int s) { return in_range(s) ? static_cast<u32>(L::expert(s, lane)) : kNoExpert; }, lane,
        s_rec[slice], sel);
  }
  if constexpr (C::kScoring != Scoring::softmax) {
    // Rule 6: a valid best key means a finite logit. Otherwise (rare; grouped, a finite logit
    // may sit in a dropped group) the row is read again and tested: a finite test per logit on
    // every row costs ~10% of the ALU instructions (Kimi-K3: 28 a lane). Warp-uniform, so the
    // slices' shuffles stay converged.
    bool recheck = top < kFirstValid;
    if constexpr (kLanes < 32) recheck = __any_sync(kFullMask, recheck);
    if (recheck) {
      // A loop, not unrolled: unrolled, ptxas turns this branch into predicated loads and tests
      // issued on every row (GLM-4.5: 15 instructions a token).
      bool any = false;
#pragma unroll 1
      for (int s = 0; s < kSlots; ++s) {
        const int e = L::expert(s, lane);
        any |= e < C::kE && finite(load_float<typename C::Logit>(a.logits, row * C::kE + e));
      }
      any_finite = lanes_max<kLanes>(static_cast<u32>(any)) != 0;
    }
  }
  const long long base = row * C::kE;
  finish_row<C, kLanes>(sel, lane, row, active, any_finite, [&](u64 key) {
    if constexpr (kScoresShared) {
      return s_score[slice][expert_of(key)];
    } else {
      return key_weight<C>(key, a.logits, base, st);
    }
  }, a);
}

}  // namespace moejit
