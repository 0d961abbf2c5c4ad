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

#include "common.cuh"
#include "routing_args.h"

namespace moejit {

enum class Scoring : int { softmax = 0, sigmoid = 1, sqrt_softplus = 2, none = 3 };
enum class GroupScore : int { top2_sum = 0, max = 1 };

namespace routing {

using u32 = unsigned int;
using u64 = unsigned long long;

inline constexpr u32 kExcludedClass = 1;
inline constexpr u32 kInvalidClass = 2;  // the key of a NaN value: 0xFFFFFFFF + kKeyOffset
inline constexpr u32 kNoExpert = 0xffffffffu;  // an empty slot of select_topk_split's cache (upper half 0)
inline constexpr u32 kUnresolved = 0xfffffffeu;  // a lazy cached key: expert not known yet (kLazyFor)
inline constexpr u32 kKeyOffset = 3;  // key = orderable(value) + 3: the classes sit at 0..2
static_assert(0xffffffffu + kKeyOffset == kInvalidClass, "a NaN value's key is the invalid class");
inline constexpr u32 kFirstValid = 0x00800000u + kKeyOffset;  // key of -FLT_MAX: every finite key is >= this
inline constexpr u32 kFullMask = 0xffffffffu;

/// One FSETP (|x| < inf; false for NaN) instead of a mask and an integer compare: the ALU pipe
/// is what bounds large T.
__device__ __forceinline__ bool finite(float x) { return fabsf(x) < __uint_as_float(0x7f800000u); }
__device__ __forceinline__ float neg_inf() { return __uint_as_float(0xff800000u); }
__device__ __forceinline__ u32 umax(u32 a, u32 b) { return a > b ? a : b; }

/// Float bits that order as unsigned integers: negative values flipped whole, others get the
/// sign bit (an arithmetic shift and one three-input logic op).
__device__ __forceinline__ u32 orderable(float c) {
  const u32 u = __float_as_uint(c);
  return u ^ (static_cast<u32>(static_cast<int>(u) >> 31) | 0x80000000u);
}
__device__ __forceinline__ float from_orderable(u32 o) {
  // o ^ 0x80000000 when the sign bit is set, else ~o, i.e. o ^ ~(t & 0x7FFFFFFF) with t the
  // sign spread: a shift and one three-input logic op (written out: ptxas made it two).
  const u32 t = static_cast<u32>(static_cast<int>(o) >> 31);
  u32 u;
  asm("lop3.b32 %0, %1, %2, 0x7fffffff, 0x87;" : "=r"(u) : "r"(o), "r"(t));
  return __uint_as_float(u);
}
/// The upper half of a key from its selection value v, where v is the canonical NaN (the result
/// of any fp32 arithmetic on a NaN or an inf * 0) for an invalid expert and finite otherwise:
/// orderable(v) + 3, so NaN wraps to the invalid class 2. kNonNegative: every finite v is +0 or
/// above (a score without a bias), where orderable is bits | 0x80000000 and the key one add.
template <bool kNonNegative>
__device__ __forceinline__ u32 key_of_value(float v) {
  if constexpr (kNonNegative) return __float_as_uint(v) + (0x80000000u + kKeyOffset);
  return orderable(v) + kKeyOffset;
}
/// key_of_value<true>'s inverse, for valid keys.
__device__ __forceinline__ float value_of_nonnegative_key(u32 hi) { return __uint_as_float(hi - (0x80000000u + kKeyOffset)); }
/// The value a key stands for: the classes 0..2 give NaN (bits 0x7FFFFFFD..0x7FFFFFFF).
__device__ __forceinline__ float value_of_key(u32 hi) { return from_orderable(hi - kKeyOffset); }
__device__ __forceinline__ u64 pack(u32 hi, int expert) {
  return (static_cast<u64>(hi) << 32) | static_cast<u64>(0xFFFFu - static_cast<u32>(expert));
}
__device__ __forceinline__ int expert_of(u64 key) { return static_cast<int>(0xFFFFu - static_cast<u32>(key)); }
__device__ __forceinline__ bool valid_key(u64 key) { return static_cast<u32>(key >> 32) >= kFirstValid; }
/// The selection value a key's upper half stands for; the invalid and excluded classes count as
/// -inf (rule 3's group scores).
/// fmaxf drops the classes' NaN for -inf: one FMNMX instead of a compare and a select.
__device__ __forceinline__ float value_of(u32 hi) { return fmaxf(value_of_key(hi), neg_inf()); }

// ---- reductions over the kLanes lanes of one token (an aligned slice of a warp) ----------
/// The largest (kMax) or smallest u32 over the kLanes lanes: redux.sync on a full warp, else
/// shuffles within the slice.
template <int kLanes, bool kMax>
__device__ __forceinline__ u32 lanes_extreme(u32 v) {
  if constexpr (kLanes == 32) {
    return kMax ? __reduce_max_sync(kFullMask, v) : __reduce_min_sync(kFullMask, v);
  } else {
#pragma unroll
    for (int o = kLanes / 2; o > 0; o /= 2) {
      const u32 other = __shfl_xor_sync(kFullMask, v, o, kLanes);
      v = (kMax ? other > v : other < v) ? other : v;
    }
    return v;
  }
}
template <int kLanes>
__device__ __forceinline__ u32 lanes_max(u32 v) { return lanes_extreme<kLanes, true>(v); }
template <int kLanes>
__device__ __forceinline__ u32 lanes_min(u32 v) { return lanes_extreme<kLanes, false>(v); }
template <int kLanes>
__device__ __forceinline__ u64 lanes_max(u64 v) {
  if constexpr (kLanes == 32) {
    const u32 hi = __reduce_max_sync(kFullMask, static_cast<u32>(v >> 32));
    const u32 lo = __reduce_max_sync(kFullMask, static_cast<u32>(v >> 32) == hi ? static_cast<u32>(v) : 0u);
    return (static_cast<u64>(hi) << 32) | lo;
  } else {
#pragma unroll
    for (int o = kLanes / 2; o > 0; o /= 2) {
      const u64 other = __shfl_xor_sync(kFullMask, v, o, kLanes);
      v = other > v ? other : v;
    }
    return v;
  }
}
/// The sum over the kLanes lanes of v < 2^kBits. On a full warp: 27-bit parts of v, each summed
/// by one redux.sync (32 lanes x (2^27 - 1) < 2^32, exact), instead of five dependent 64-bit
/// shuffle-and-add steps; else shuffles within the slice.
template <int kLanes, int kBits>
__device__ __forceinline__ u64 lanes_sum(u64 v) {
  static_assert(kBits > 0 && kBits <= 64);
  if constexpr (kLanes == 32) {
    constexpr int kPart = 27;
    u64 sum = 0;
#pragma unroll
    for (int p = 0; p * kPart < kBits; ++p) {
      const u32 part = static_cast<u32>(v >> (p * kPart)) & ((1u << kPart) - 1u);
      sum += static_cast<u64>(__reduce_add_sync(kFullMask, part)) << (p * kPart);
    }
    return sum;
  } else {
#pragma unroll
    for (int o = kLanes / 2; o > 0; o /= 2) v += __shfl_xor_sync(kFullMask, v, o, kLanes);
    return v;
  }
}

/// Rule 3's choice of groups (G <= 32): lane g < kG of a whole warp holds group g's score as
/// orderable bits; true on lane g when fewer than kTG groups beat it (a larger score, or an
/// equal one and a lower index): kG independent shuffles instead of kTG dependent selection
/// rounds.
template <int kG, int kTG>
__device__ __forceinline__ bool group_kept(u32 score, int g) {
  // (score, 31 - group) as one 64-bit number: group i beats g when its number is larger. The
  // lower halves are constants of i, so each compare is two ISETPs (the second with the carry).
  const u64 mine = (static_cast<u64>(score) << 32) | static_cast<u32>(31 - g);
  int rank = 0;
#pragma unroll
  for (int i = 0; i < kG; ++i) {
    const u64 other = (static_cast<u64>(__shfl_sync(kFullMask, score, i)) << 32) | static_cast<u32>(31 - i);
    rank += other > mine ? 1 : 0;
  }
  return g < kG && rank < kTG;
}

// ---- scores (numerics.md rule 1), identical in every kernel --------------------------------
struct RowStats {
  float max = 0.0f;  // softmax: the largest finite logit
  float sum = 1.0f;  // softmax: sum of exp(x - max), fixed point, rounded once
};

__device__ __forceinline__ u64 fixed_point(float e) { return __float2ull_rz(__fmul_rn(e, 0x1p47f)); }
/// Bits of a sum of n fixed-point values (each <= 2^47: e <= 1).
constexpr int fixed_point_bits(int n) {
  int bits = 48;
  while (n > 1) ++bits, n = (n + 1) / 2;
  return bits;
}
__device__ __forceinline__ float from_fixed_point(u64 q) { return __fmul_rn(__ull2float_rn(q), 0x1p-47f); }

template <class C>
__device__ __forceinline__ float score(float x, const RowStats& st) {
  if constexpr (C::kScoring == Scoring::sigmoid) {
    return sigmoid(x);
  } else if constexpr (C::kScoring == Scoring::softmax) {
    return __fdiv_rn(expf(__fsub_rn(x, st.max)), st.sum);
  } else if constexpr (C::kScoring == Scoring::sqrt_softplus) {
    return __fsqrt_rn(x > 20.0f ? x : log1pf(expf(x)));
  } else {
    return x;  // none: select on the raw logit
  }
}

template <class C>
__device__ __forceinline__ float weight(float x, const RowStats& st) {
  if constexpr (C::kScoring == Scoring::none) return sigmoid(x);
  return score<C>(x, st);
}

/// Every finite selection value is +0 or above: a score (sigmoid, softmax, sqrt_softplus) with
/// no bias added.
template <class C>
inline constexpr bool kNonNegativeKeys = !C::kHasBias && C::kScoring != Scoring::none;

/// The upper half of an expert's key (rules 2 and 6): its class, or its selection value.
/// Branch-free: the score of a non-finite logit is computed and dropped.
/// kTag: select_topk_tagged's form, key * 4 + tag_low (one multiply-add from the value's bits).
template <class C, bool kTag = false>
__device__ __forceinline__ u32 key_hi_of_score(float x, float c, float b, u32 tag_low = 0) {
  if constexpr (C::kHasBias) c = add(c, b);
  // -0.0 -> +0.0: equal keys must tie. Only a raw logit can be -0: every score is +0 or above
  // (and s + b is -0 only when both are).
  if constexpr (C::kScoring == Scoring::none) c = add(c, 0.0f);
  // x * 0 + c is c when x and c are finite (c is never -0, so adding a -0 or +0 product keeps
  // its bits), else NaN or (c infinite) inf; v * 0 + v then turns inf into NaN too. Two FMAs
  // instead of a finite test and a select: the ALU pipe is what bounds large T, the FMA pipe
  // runs at a fifth of its peak. Without a bias c is finite for every finite x (a score, or
  // the logit itself), so one FMA is enough.
  float v = __fmaf_rn(x, 0.0f, c);
  if constexpr (C::kHasBias) v = __fmaf_rn(v, 0.0f, v);
  if constexpr (kTag) {
    static_assert(kNonNegativeKeys<C>);
    return __float_as_uint(v) * 4u + (kKeyOffset * 4u + tag_low);  // key_of_value<true>(v) * 4 + tag_low
  }
  return key_of_value<kNonNegativeKeys<C>>(v);
}
template <class C, bool kTag = false>
__device__ __forceinline__ u32 key_hi(float x, float b, const RowStats& st, u32 tag_low = 0) {
  return key_hi_of_score<C, kTag>(x, score<C>(x, st), b, tag_low);
}
template <class C>
__device__ __forceinline__ u64 expert_key(float x, float b, int e, const RowStats& st) {
  return pack(key_hi<C>(x, b, st), e);
}

template <class T>
__device__ __forceinline__ float load_float(const void* base, long long i) {
  return to_float(static_cast<const T*>(base)[i]);
}

/// The weight (before renormalizing) of a selected valid key of the row at logits + base.
template <class C>
__device__ __forceinline__ float key_weight(u64 key, const void* logits, long long base, const RowStats& st) {
  if constexpr (!C::kHasBias && C::kScoring != Scoring::none) {
    return value_of_nonnegative_key(static_cast<u32>(key >> 32));  // the key is the score's bits
  } else {
    return weight<C>(load_float<typename C::Logit>(logits, base + expert_of(key)), st);
  }
}

// ---- top-K over keys spread across the kLanes lanes of a token ---------------------------
/// Insert v into the descending list c (kept sorted, length kCache): branch-free.
template <int kCache>
__device__ __forceinline__ void insert_top(u64 (&c)[kCache], u64 v) {
#pragma unroll
  for (int i = kCache - 1; i > 0; --i) c[i] = v > c[i - 1] ? c[i - 1] : (v > c[i] ? v : c[i]);
  c[0] = v > c[0] ? v : c[0];
}

template <int kLanes, int kK>
constexpr int kRanksOf = (kK + kLanes - 1) / kLanes;

/// The kK largest keys, in descending order: lane `lane` gets ranks lane, lane + kLanes, ...
/// key(s) is this lane's key in slot s (0 for none). Each lane keeps its best kCache keys;
/// after each round the lane that held the winner pops it, and rescans its keys below the
/// winner only when its cache is used up.
template <int kLanes, int kSlots, int kK, int kCache, class KeyOf>
__device__ __forceinline__ void select_topk(const KeyOf& key, int lane, u64 (&sel)[kRanksOf<kLanes, kK>]) {
  u64 c[kCache];
#pragma unroll
  for (int i = 0; i < kCache; ++i) c[i] = 0;
#pragma unroll
  for (int s = 0; s < kSlots; ++s) insert_top(c, key(s));
#pragma unroll
  for (int r = 0; r < kRanksOf<kLanes, kK>; ++r) sel[r] = 0;
#pragma unroll 1
  for (int k = 0; k < kK; ++k) {
    const u64 best = lanes_max<kLanes>(c[0]);
#pragma unroll
    for (int r = 0; r < kRanksOf<kLanes, kK>; ++r) {
      if (r * kLanes + lane == k) sel[r] = best;
    }
    if (c[0] == best && best != 0) {  // keys are unique: exactly one lane held it
#pragma unroll
      for (int i = 0; i + 1 < kCache; ++i) c[i] = c[i + 1];
      c[kCache - 1] = 0;
      if (c[0] == 0) {
#pragma unroll
        for (int s = 0; s < kSlots; ++s) {
          const u64 v = key(s);
          insert_top(c, v < best ? v : 0);  // 0 leaves the cache as it is
        }
      }
    }
  }
}

/// After the last selection round: lane `lane` reads the (upper half, expert) pairs of its ranks
/// lane, lane + kLanes, ... from rec (every round's pair, in shared memory) into sel;
/// upper(h) turns a recorded upper half into the key's.
template <int kLanes, int kK, class Upper>
__device__ __forceinline__ void read_ranks(const uint2* rec, int lane, u64 (&sel)[kRanksOf<kLanes, kK>], const Upper& upper) {
  __syncwarp();
#pragma unroll
  for (int r = 0; r < kRanksOf<kLanes, kK>; ++r) {
    const int k = r * kLanes + lane;
    const uint2 p = k < kK ? rec[k] : make_uint2(0u, kNoExpert);
    sel[r] = p.y == kNoExpert ? 0ull : pack(upper(p.x), static_cast<int>(p.y));
  }
}

/// insert_top on keys held in two halves: h the upper half, x the expert (the lower half is
/// 0xFFFF - x). Stable: a key equal in h to one already held goes after it, so slots inserted in
/// rising expert order keep the lower expert first.
template <int kCache>
__device__ __forceinline__ void insert_top_split(u32 (&ch)[kCache], u32 (&cx)[kCache], u32 h, u32 x) {
#pragma unroll
  for (int i = kCache - 1; i > 0; --i) {
    const bool above_prev = h > ch[i - 1], above = h > ch[i];
    ch[i] = above_prev ? ch[i - 1] : (above ? h : ch[i]);
    cx[i] = above_prev ? cx[i - 1] : (above ? x : cx[i]);
  }
  const bool top = h > ch[0];
  ch[0] = top ? h : ch[0];
  cx[0] = top ? x : cx[0];
}

/// select_topk on keys held in two 32-bit halves (half the instructions of 64-bit compares and
/// selects): hi(s) is slot s's upper half (0 for none), expert(s) its expert, rising with s
/// (kNoExpert for none). Upper halves are >= 1 for every expert (the class of an excluded one
/// is 1), so an empty cache entry (0, kNoExpert) is below every key. Each round takes the
/// largest upper half over the lanes, then the lowest expert among the lanes that hold it: the
/// same order, and the same results, as select_topk on pack(hi, expert).
/// One step of a stable sorting network on (upper half, expert) pairs: swaps entries i < j when
/// j's upper half is larger.
__device__ __forceinline__ void exchange_split(u32& hi_i, u32& x_i, u32& hi_j, u32& x_j) {
  const bool swap = hi_j > hi_i;
  const u32 h = hi_i, x = x_i;
  hi_i = swap ? hi_j : hi_i;
  x_i = swap ? x_j : x_i;
  hi_j = swap ? h : hi_j;
  x_j = swap ? x : x_j;
}

/// *p = (a, b) in the lanes where `store` holds, p in shared memory: one predicated store. (With
/// `if (store) *p = ...` ptxas rebuilt p's address under the predicate at every round, ~7
/// instructions: Kimi-K2 +55 instructions a token.)
/// A fast round's store: one lane, or in a tie several lanes with different experts in the one
/// instruction -- then one of them lands (CUDA programming guide, SIMT architecture) and the
/// exact rounds rewrite every record after a __syncwarp. compute-sanitizer's racecheck reports
/// those same-instruction writes of a tie as hazards, and no other hazard in the warp kernel
/// (bench/results/2026-12-02-d/race).
__device__ __forceinline__ void store_if(bool store, uint2* p, u32 a, u32 b) {
  asm volatile(
      "{\n\t.reg .pred p;\n\tsetp.ne.u32 p, %0, 0;\n\t@p st.shared.v2.u32 [%1], {%2, %3};\n\t}" ::"r"(
          static_cast<u32>(store)),
      "r"(static_cast<u32>(__cvta_generic_to_shared(p))), "r"(a), "r"(b)
      : "memory");
}

/// After fast rounds: whether some round had a tie between lanes. counted: this lane's wins (or
/// value holds) over the kK - 1 popping rounds, exactly kK - 1 over the warp without a tie (the
/// sum can start before the last round's reduction returns); last_holders: the last round's
/// ballot of the lanes holding its max.
template <int kK>
__device__ __forceinline__ bool fast_rounds_tied(int counted, unsigned last_holders) {
  return __reduce_add_sync(kFullMask, static_cast<u32>(counted)) != kK - 1 || (last_holders & (last_holders - 1u)) != 0u;
}

/// A compile-time flag passed to a generic lambda.
template <bool kValue>
struct Flag {
  static constexpr bool value = kValue;
};

/// One selection round of select_topk_split: the largest upper half over the lanes, the lowest
/// expert among the lanes that hold it, recorded at rec[k] in shared memory; the lane that held
/// the winner pops it and, when its cache is used up, rescans its keys below the winner (or,
/// where kLazyFor holds, takes its next lazy key).
/// What a rescan refills: the next key only, or the cache's kCache keys. H200, one run beside
/// each other (bench/results/2026-11-29-e/refill-one): one key is faster for Kimi-K3 (28 slots a
/// lane; T=4/64/128 4.46/4.50/4.62 -> 3.92/3.97/4.18 us, T=16384 45.0 -> 44.3), GLM-4.5 (5; T=1
/// 2.29 -> 2.07, T=128 2.50 -> 2.21) and Qwen3 (4; within 0.1 us, 16384 11.47 -> 11.34), slower
/// for DeepSeek-V3 (8; T=1 2.25 -> 2.63, 16384 17.9 -> 18.8) and Kimi-K2 (12; T=1 2.23 -> 2.46).
template <int kSlots>
constexpr bool kRefillOneFor = kSlots >= 16 || kSlots <= 5;

/// Fast rounds with 16 or more slots a lane (Kimi-K3: 28) keep two more keys a lane by value
/// only: the cache fill also takes the lane's fifth- and sixth-largest upper halves (what its
/// insertions drop: a min and a max a slot, two more for the sixth), a lane's fourth and fifth
/// wins make them its head with the expert kUnresolved, and the records of such wins get their
/// experts after the last round (resolve_lazy_records). Before, a fourth win rescanned the lane's
/// 28 keys on the rounds' chain: ~170 ALU instructions, ~360 cycles for a lone warp (the ALU
/// pipe takes a warp instruction every two cycles; clock64 per phase in a diagnostic build,
/// bench/results/2026-12-01-e/diag*). The bias crowds the best keys: in the bench's Kimi-K3
/// inputs a lane wins four rounds in 1 of 4 tokens at T=4, 2 of 64, 18 of 128 (five in 3), and
/// one such token makes the whole call wait. H200 (2026-12-01-e/lazy-keys): T=4/64/128/256
/// 3.19/3.25/3.46/3.32 -> 3.08/3.16/3.38/3.25 us, T=1/8 2.98/3.05 -> 3.01/3.10, but T=1024 5.28 ->
/// 5.38 and T=16384 37.9 -> 41.2 (the fill's four instructions a slot). A sixth win (its lazy keys
/// used up) and two keys of a lane with the same upper half around a lazy key run the exact
/// rounds again, like a tie. (Rescans or resolution inside the rounds cost ~0.17 us on every call
/// in every form tried, unexplained: 2026-12-01-e/lazy-*.)
/// Only in the warp kernel compiled with Refill::lazy (kLazyKeys), which the launcher takes up to
/// a token count measured on the H200 (runtime/routing_crossover.json: above it the fill's extra
/// instructions cost more than the rescans they save).
template <int kLanes, int kSlots, int kCache, bool kFast, bool kLazyKeys>
constexpr bool kLazyFor = kLazyKeys && kFast && kLanes == 32 && kSlots >= 16 && kCache == 4;  // (one-key rescans at 16+)

/// The lazy keys of select_topk_split's fast rounds (kLazyFor): the lane's next two upper halves
/// after its cache, and whether it won a round with a lazy key.
struct LazyKeys {
  u32 next[2];
  bool unresolved;
};

/// The record rec[k] of a lazy key gets the expert of the one slot of its upper half over the
/// warp (the lowest slot of the lane that holds it); any other count is a tie (`wins` past any
/// round count: the exact rounds run again).
template <int kSlots, int kK, class HiOf, class ExpertOf>
__device__ __forceinline__ void resolve_lazy_record(int k, const HiOf& hi, const ExpertOf& expert, uint2* rec, int& wins) {
  const u32 h = rec[k].x;
  int count = 0;
  u32 first = kNoExpert;
#pragma unroll
  for (int s = 0; s < kSlots; ++s) {
    const bool is = hi(s) == h;
    count += is ? 1 : 0;
    first = is && first == kNoExpert ? expert(s) : first;  // slots rise in expert order
  }
  if (__reduce_add_sync(kFullMask, static_cast<u32>(count)) != 1u) wins += kK;
  if (count != 0) rec[k].y = first;  // several lanes only in a tie, which the exact rounds redo
}

/// After fast rounds with lazy keys: resolve_lazy_record for each record of kUnresolved expert
/// (none unless some lane won a fifth round: one vote).
template <int kSlots, int kK, class HiOf, class ExpertOf>
__device__ __forceinline__ void resolve_lazy_records(bool unresolved, const HiOf& hi, const ExpertOf& expert, uint2* rec,
                                                     int& wins) {
  if (!__any_sync(kFullMask, unresolved)) return;
  __syncwarp();  // the rounds' records, stored by the lanes that won them, before lane k reads rec[k]
#pragma unroll
  for (int i = 0; i < (kK + 31) / 32; ++i) {
    const int k = i * 32 + static_cast<int>(threadIdx.x % 32u);
    const unsigned lazy_records = __ballot_sync(kFullMask, k < kK && rec[k].y == kUnresolved);
    __syncwarp();
#pragma unroll 1
    for (unsigned bits = lazy_records; bits != 0u; bits &= bits - 1u)
      resolve_lazy_record<kSlots, kK>(i * 32 + __ffs(bits) - 1, hi, expert, rec, wins);
  }
  __syncwarp();
}

/// kPop: the round is not the last (the winner is popped). may_refill: a cache may be used up by
/// this round (a lane caching kCache keys wins kCache rounds first, and a cache holding all its
/// lane's keys never runs out); a constant wherever the rounds are unrolled.
/// kFast (a whole warp only): the lane whose head is m wins, and `wins` counts the lane's wins.
/// When several lanes hold m (a tie) they all win, so the wins summed over the warp exceed the
/// rounds, and rec is then not the selection: the caller runs the exact rounds again. So the
/// common round has one reduction on its dependency chain instead of two; the exact round takes
/// the lowest expert among the lanes that hold m by a second one (select_topk_split uses the
/// fast rounds up to 16 rounds on a whole warp, the exact ones alone otherwise).
template <int kLanes, int kSlots, int kK, int kCache, bool kPop, bool kFast, bool kLazyKeys, class HiOf, class ExpertOf,
          bool kRefillOne = kRefillOneFor<kSlots>>
__device__ __forceinline__ u32 selection_round(int k, bool may_refill, const HiOf& hi, const ExpertOf& expert,
                                               u32 (&ch)[kCache], u32 (&cx)[kCache], uint2* rec, int& wins,
                                               unsigned& last_holders, LazyKeys& lazy) {
  constexpr bool kLazy = kLazyFor<kLanes, kSlots, kCache, kFast, kLazyKeys>;
  static_assert(!kFast || kLanes == 32);
  const u32 m = lanes_max<kLanes>(ch[0]);
  bool won;
  u32 x;
  if constexpr (kFast) {
    won = ch[0] == m;
    x = cx[0];  // the winner's expert, in the lane that won (the only one that uses it)
    if constexpr (kPop) {
      wins += won ? 1 : 0;
    } else {
      last_holders = __ballot_sync(kFullMask, won);  // the last round's ties: no sum to wait for
    }
    store_if(won, rec + k, m, x);
    if constexpr (kLazy && !kPop) lazy.unresolved |= won && x == kUnresolved;
  } else {
    x = lanes_min<kLanes>(ch[0] == m ? cx[0] : kNoExpert);
    rec[k] = make_uint2(m, x);  // every lane of the token stores the same pair
    won = cx[0] == x;  // experts are unique: exactly one lane
  }
  if constexpr (!kPop) return m;
  // Whether this pop uses the lane's cache up, from the cache before the pop: off the chain
  // from the reduction to the refill branch.
  const bool used_up = won & (kCache == 1 || cx[kCache > 1 ? 1 : 0] == kNoExpert);  // (&: no short circuit)
  // The pop by selects rather than a branch around it: a divergent branch here cost more than
  // the shift (ncu, Kimi-K3: 13 moves and 5 branch instructions per round). NOTE: a
  // warp-uniform branch (__any_sync) around the rescan made ptxas spill for sm_100a
  // (Kimi-K3-sized, bf16 logits); the lane's own branch does not. A ballot every round with
  // the lowest-expert reduction in a uniform branch (2026-12-01-b/rounds) and no refills in the
  // fast rounds (a used-up cache forcing the exact rounds, 2026-12-01-d/no-refill) were slower.
#pragma unroll
  for (int i = 0; i + 1 < kCache; ++i) {
    ch[i] = won ? ch[i + 1] : ch[i];
    cx[i] = won ? cx[i + 1] : cx[i];
  }
  ch[kCache - 1] = won ? 0u : ch[kCache - 1];
  cx[kCache - 1] = won ? kNoExpert : cx[kCache - 1];
  if (!may_refill) return m;
  if constexpr (kLazy) {
    if (used_up) {  // the lane's next key: its next lazy one
      u32 next = lazy.next[0];
      lazy.next[0] = lazy.next[1];
      lazy.next[1] = 0u;
      const bool was_lazy = x == kUnresolved;
      lazy.unresolved |= was_lazy;
      if (next == 0u && was_lazy) wins += kK;  // a sixth win, no key known past it: the exact rounds
      if (next == m) wins += kK;  // two keys of the lane with upper half m: a tie
      ch[0] = next;
      cx[0] = next != 0u ? kUnresolved : kNoExpert;
    }
    return m;
  }
  if (used_up) {
    if constexpr (kRefillOne) {
      // The next key below the winner only: one max pass over the slots (~7 instructions a slot
      // instead of a kCache insertion's ~21 for Kimi-K3); a lane that wins again rescans again.
      // Slots rise in expert order, so of equal upper halves the first one stays. (A tree of
      // pairwise maxima instead of this chain was no faster: bench/results/2026-12-01-b/rescan.)
      u32 bh = 0, bx = kNoExpert;
#pragma unroll
      for (int s = 0; s < kSlots; ++s) {
        const u32 h = hi(s), e = expert(s);
        const bool better = (h < m || (h == m && e > x)) && h > bh;
        bh = better ? h : bh;
        bx = better ? e : bx;
      }
      ch[0] = bh;
      cx[0] = bx;
    } else {
#pragma unroll
      for (int s = 0; s < kSlots; ++s) {
        const u32 h = hi(s), e = expert(s);
        const bool below = h < m || (h == m && e > x);
        insert_top_split(ch, cx, below ? h : 0u, below ? e : kNoExpert);  // (0, none) changes nothing
      }
    }
  }
  return m;
}

/// select_topk on keys held in two 32-bit halves (half the instructions of 64-bit compares and
/// selects): hi(s) is slot s's upper half (0 for none), expert(s) its expert, rising with s
/// (kNoExpert for none). Upper halves are >= 1 for every expert (the class of an excluded one
/// is 1), so an empty cache entry (0, kNoExpert) is below every key. Each round takes the
/// largest upper half over the lanes, then the lowest expert among the lanes that hold it: the
/// same order, and the same results, as select_topk on pack(hi, expert) -- on a whole warp the
/// second step only when the first found a tie (selection_round's kFast).
/// rec: kK pairs of shared memory for the token's lanes (they all store the same pair each round:
/// one store instead of the rank lane's compare and two selects, ~3 of the ALU pipe's ~20
/// instructions a round; that pipe is what bounds large T, ncu: 68-80% of its peak).
/// Returns the best key's upper half (the same in every lane of the token).
template <int kLanes, int kSlots, int kK, int kCache, bool kLazyKeys = false, class HiOf, class ExpertOf>
__device__ __forceinline__ u32 select_topk_split(const HiOf& hi, const ExpertOf& expert, int lane, uint2* rec,
                                                 u64 (&sel)[kRanksOf<kLanes, kK>]) {
  // The cache starts as the first kCache slots sorted by a stable network (bubble order: equal
  // upper halves keep the lower expert first), then takes the other slots by insertion.
  constexpr int kSeed = kSlots < kCache ? kSlots : kCache;
  // The last round pops nothing; before round kCache - 1 no cache can be used up.
  constexpr bool kRefills = kCache < kSlots;
  int wins = 0;
  unsigned last_holders = 0;
  auto rounds = [&](auto fast) {
    constexpr bool kFast = decltype(fast)::value;
    u32 ch[kCache], cx[kCache];
#pragma unroll
    for (int i = 0; i < kCache; ++i) {
      ch[i] = i < kSeed ? hi(i) : 0u;
      cx[i] = i < kSeed ? expert(i) : kNoExpert;
    }
#pragma unroll
    for (int top = 0; top + 1 < kSeed; ++top) {  // the largest of [top, kSeed) rises to top
#pragma unroll
      for (int i = kSeed - 2; i >= top; --i) exchange_split(ch[i], cx[i], ch[i + 1], cx[i + 1]);
    }
    constexpr bool kLazy = kLazyFor<kLanes, kSlots, kCache, kFast, kLazyKeys>;
    LazyKeys lazy{{0u, 0u}, false};  // kLazy: the largest two upper halves the cache drops
#pragma unroll
    for (int s = kSeed; s < kSlots; ++s) {
      if constexpr (kLazy) {
        const u32 dropped = min(hi(s), ch[kCache - 1]);
        lazy.next[1] = umax(lazy.next[1], min(dropped, lazy.next[0]));
        lazy.next[0] = umax(lazy.next[0], dropped);
      }
      insert_top_split(ch, cx, hi(s), expert(s));
    }
    u32 top = 0;  // the first round's upper half: the best key's
    if constexpr (kK <= 8) {
      // Few rounds: unrolled (no loop counter, the refill test only where it can be needed).
#pragma unroll
      for (int k = 0; k + 1 < kK; ++k) {
        const u32 m = selection_round<kLanes, kSlots, kK, kCache, true, kFast, kLazyKeys>(k, kRefills && k + 1 >= kCache, hi, expert,
                                                                               ch, cx, rec, wins, last_holders, lazy);
        if (k == 0) top = m;
      }
    } else {
      top = selection_round<kLanes, kSlots, kK, kCache, true, kFast, kLazyKeys>(0, kRefills && kCache == 1, hi, expert, ch, cx, rec, wins, last_holders, lazy);
      // Up to 16 rounds by two: a loop of one round was slower (Kimi-K3 T=128 3.54 vs 3.43
      // us), all rounds unrolled slower still at small T (the refill code of every round: 3.76).
      // More rounds by one (by two, ptxas spilled for 512 experts, top 32, sm_100a).
      constexpr int kBy = kK <= 16 ? 2 : 1;
#pragma unroll(kBy)
      for (int k = 1; k + 1 < kK; ++k)
        selection_round<kLanes, kSlots, kK, kCache, true, kFast, kLazyKeys>(k, kRefills, hi, expert, ch, cx, rec, wins, last_holders, lazy);
    }
    const u32 last = selection_round<kLanes, kSlots, kK, kCache, false, kFast, kLazyKeys>(kK - 1, false, hi, expert, ch, cx, rec, wins, last_holders, lazy);
    if constexpr (kLazy) resolve_lazy_records<kSlots, kK>(lazy.unresolved, hi, expert, rec, wins);
    return kK == 1 ? last : top;
  };
  // A whole warp: the rounds without the tie rule's second reduction, and only when two lanes
  // held the same largest upper half in some round (rare: bitwise-equal keys of different
  // experts), the exact rounds again.
  // Up to 16 rounds: with both sets of rounds in one kernel, more made ptxas spill (512 experts,
  // top 32, 32 groups on sm_100a), and the rounds' latency matters most at small K anyway.
  u32 top;
  if constexpr (kLanes == 32 && kK <= 16) {
    top = rounds(Flag<true>{});
    if (fast_rounds_tied<kK>(wins, last_holders)) {
      __syncwarp();  // the fast rounds' records (several lanes' in a tie) before the exact ones
      top = rounds(Flag<false>{});
    }
  } else {
    top = rounds(Flag<false>{});
  }
  read_ranks<kLanes, kK>(rec, lane, sel, [](u32 h) { return h; });
  return top;
}

/// select_topk_split for up to 4 keys a lane that are all +0 or above (no bias): each key's slot
/// rides in its two low bits, tag = key * 4 + (3 - slot) (a valid key's value needs 30 bits;
/// the two bits shifted out are its constant 10), so a lane's tags are unique 32-bit numbers:
/// its cache is sorted by a min/max network and popped without expert registers, and the
/// expert of a tag is base ^ (tag & 3), base being the lane's first expert ^ 3 (its experts are
/// first + slot, first a multiple of the slot count). A round takes the largest tag, then the
/// lowest expert among the lanes whose tag has its value ((tag | 3) >= max) -- that second
/// reduction only when some round had two such lanes (kFast below). Same results as
/// select_topk_split, with ~25 fewer instructions a token for Qwen3 (128 experts, top 8; its
/// warp kernel is bound by instruction issue).
template <int kSlots, int kK>
__device__ __forceinline__ u32 select_topk_tagged(const u32 (&tag)[kSlots], u32 base, int lane, uint2* rec,
                                                  u64 (&sel)[kRanksOf<32, kK>]) {
  static_assert(kSlots == 1 || kSlots == 2 || kSlots == 4);
  // kFast: the lane holding the largest tag wins; `holds` counts the rounds in which the lane's
  // head has that tag's value, so over the warp they sum to more than the rounds only when two
  // lanes tied on a value -- and then the exact rounds run again (as in select_topk_split).
  int holds = 0;
  unsigned last_holders = 0;
  auto rounds = [&](auto fast) {
    constexpr bool kFast = decltype(fast)::value;
    u32 c[kSlots];
#pragma unroll
    for (int i = 0; i < kSlots; ++i) c[i] = tag[i];
    // Sorting network, descending (unique values: no stability to keep).
    auto exchange = [&](int i, int j) {
      const u32 hi = umax(c[i], c[j]);
      c[j] = min(c[i], c[j]);
      c[i] = hi;
    };
    if constexpr (kSlots == 2) {
      exchange(0, 1);
    } else if constexpr (kSlots == 4) {
      exchange(0, 1), exchange(2, 3), exchange(0, 2), exchange(1, 3), exchange(1, 2);
    }
    u32 top = 0;
#pragma unroll
    for (int k = 0; k < kK; ++k) {
      const u32 m = __reduce_max_sync(kFullMask, c[0]);
      if (k == 0) top = m;
      // (c | 3) >= m: c has m's value (independent of m: issued before the reduction returns).
      const bool holds_m = (c[0] | 3u) >= m;
      bool won;
      if constexpr (kFast) {
        won = c[0] == m;
        if (k + 1 < kK) {
          holds += holds_m ? 1 : 0;
        } else {
          last_holders = __ballot_sync(kFullMask, holds_m);
        }
        store_if(won, rec + k, m, base ^ (c[0] & 3u));
      } else {
        const u32 e = holds_m ? base ^ (c[0] & 3u) : kNoExpert;
        const u32 x = __reduce_min_sync(kFullMask, e);
        rec[k] = make_uint2(m, x);
        won = e == x;  // experts are unique: exactly one lane
      }
      if (k + 1 == kK) break;
#pragma unroll
      for (int i = 0; i + 1 < kSlots; ++i) c[i] = won ? c[i + 1] : c[i];
      c[kSlots - 1] = won ? 0u : c[kSlots - 1];
    }
    return top;
  };
  u32 top = rounds(Flag<true>{});
  if (fast_rounds_tied<kK>(holds, last_holders)) {
    __syncwarp();  // the fast rounds' records (several lanes' in a tie) before the exact ones
    top = rounds(Flag<false>{});
  }
  // Back to untagged upper halves: value bits | 0x80000000 (a valid key, >= 3 after the shift)
  // or the class.
  auto untag = [](u32 t) {
    const u32 h = t >> 2;
    return h >= kKeyOffset ? h | 0x80000000u : h;
  };
  read_ranks<32, kK>(rec, lane, sel, untag);
  return untag(top);
}

/// Rank-count selection in shared memory: `src` holds `lists` runs of `run` keys each; every
/// group of `fan` consecutive runs is one candidate set, and each candidate that fewer than kK
/// others of its set beat (ties, only between empty-slot zeros, go by position) lands at
/// dst[set * kK + rank]. Keys are unique and every set has at least kK of them, so each set
/// yields exactly its top kK, in descending order. Returns the number of sets. All threads of
/// the block call it; the caller synchronizes before and after.
template <int kK, int kThreads>
__device__ __forceinline__ int rank_sets(const u64* __restrict__ src, u64* __restrict__ dst, int lists, int run,
                                         int fan, int tid) {
  const int total = lists * run;
  const int set_size = fan * run;
  for (int i = tid; i < total; i += kThreads) {
    const int base = (i / set_size) * set_size;
    const int n = min(set_size, total - base);
    const u64 mine = src[i];
    int rank = 0;
#pragma unroll 8
    for (int j = 0; j < n; ++j) {
      const u64 other = src[base + j];
      rank += (other > mine || (other == mine && base + j < i)) ? 1 : 0;
    }
    if (rank < kK) dst[(i / set_size) * kK + rank] = mine;
  }
  return (lists + fan - 1) / fan;
}

/// Weights (rule 5/6) and the stores of one token's selection, held as `sel` by its lanes.
/// weight_of(key) is the weight before renormalizing of a selected key (asked for valid keys only).
template <class C, int kLanes, class WeightOf>
__device__ __forceinline__ void finish_row(const u64 (&sel)[kRanksOf<kLanes, C::kK>], int lane, long long row,
                                           bool store, bool any_finite, const WeightOf& weight_of, const RoutingArgs& a) {
  constexpr int kRanks = kRanksOf<kLanes, C::kK>;
  float w[kRanks];
#pragma unroll
  for (int r = 0; r < kRanks; ++r) {
    w[r] = 0.0f;
    if (r * kLanes + lane < C::kK && valid_key(sel[r])) w[r] = weight_of(sel[r]);
  }
  if constexpr (C::kRenormalize) {
    // The sum in output order k = 0..K-1, the same bits in every lane and every kernel.
    float sum = 0.0f;
#pragma unroll
    for (int r = 0; r < kRanks; ++r) {
#pragma unroll
      for (int l = 0; l < kLanes; ++l) {
        if (r * kLanes + l < C::kK) sum = add(sum, __shfl_sync(kFullMask, w[r], l, kLanes));
      }
    }
    const float denom = add(sum, 1e-20f);
    // A zero numerator (every lane past rank K) sends the division to its slow path (ncu: ~45
    // instructions per token): divide 1 instead and keep the 0.
#pragma unroll
    for (int r = 0; r < kRanks; ++r) w[r] = w[r] == 0.0f ? 0.0f : __fdiv_rn(w[r] == 0.0f ? 1.0f : w[r], denom);
  }
  if constexpr (C::kAlpha != 1.0f) {
#pragma unroll
    for (int r = 0; r < kRanks; ++r) w[r] = mul(C::kAlpha, w[r]);
  }
  if (!any_finite) {  // rule 6: ids 0..K-1 (the selection's own order), weights 1/K or 0
#pragma unroll
    for (int r = 0; r < kRanks; ++r) w[r] = C::kRenormalize ? __fdiv_rn(1.0f, static_cast<float>(C::kK)) : 0.0f;
  }
  if (!store) return;
#pragma unroll
  for (int r = 0; r < kRanks; ++r) {
    const int k = r * kLanes + lane;
    if (k >= C::kK) continue;
    const long long o = row * C::kK + k;
    a.weights[o] = w[r];
    if constexpr (C::kIds64) {
      static_cast<long long*>(a.ids)[o] = expert_of(sel[r]);
    } else {
      static_cast<int*>(a.ids)[o] = expert_of(sel[r]);
    }
  }
}

template <class C>
struct RoutingChecks {
  static_assert(C::kE >= 1 && C::kE <= 65535, "1 <= E <= 65535 (the packed index)");
  static_assert(C::kK >= 1 && C::kK <= 64 && C::kK <= C::kE, "1 <= K <= min(64, E)");
  static_assert(C::kLanes >= 1 && C::kLanes <= 32 && (32 % C::kLanes) == 0, "lanes per token divide a warp");
  static_assert(!C::kGrouped || C::kLanes == 32, "grouped selection uses whole warps");
  static_assert(!C::kGrouped || (C::kE % C::kG == 0 && C::kTG >= 1 && C::kTG <= C::kG), "valid groups");
  static_assert(C::kBlockWarps >= 1 && C::kBlockWarps <= 16, "1 to 16 warps per block");
  static constexpr bool ok = true;
};

}  // namespace routing

// ---- one token per kLanes lanes ------------------------------------------------------------
/// How the warp kernel reads logits and bias: as vectors (pointers aligned for them) or one
/// element at a time.
enum class Loads { vectors, elements };
/// How a lane of the warp kernel's fast rounds gets its next key once its cache is used up:
/// rescan its keys, or take lazy keys kept by the cache fill (routing::kLazyFor; compiled where
/// that applies, and taken up to a token count measured on the H200).
enum class Refill { rescan, lazy };

/// Keys a lane caches in select_topk_split for kSlots keys a lane (WarpLayout's note has the
/// measurements). Up to 4 keys a lane the cache holds them all: no round tests for a rescan.
template <int kSlots>
constexpr int kCacheFor = kSlots <= 4 ? kSlots : (kSlots >= 16 ? 4 : 3);

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
  // Cached keys per lane in the selection: a lane rescans its keys when it has won as many
  // rounds as it caches. H200, T=16384 (bench/results/2026-11-29-d/cache-sizes): Kimi-K3 (28
  // experts per lane) 56.1 us with four, 63.5 with five, 68.0 with six; Kimi-K2 (12) 22.2 with
  // three, 24.1 with four; DeepSeek-V3 (8) 21.6 with three, 22.8 with four; GLM-4.5 (5) and
  // Qwen3 (4) 14.0-14.2 and 13.6-13.7 with two or three (three: 0.1 us faster at T=1024).
  // Again after the fifth session's changes (2026-11-29-e/loads-split): two instead of three
  // slower for DeepSeek-V3 (T=16384 18.1 -> 19.5) and Qwen3 (11.5 -> 11.8); GLM-4.5 faster at
  // T <= 128 (2.30 -> 2.10) but not at 16384 (12.0 -> 12.1). Kimi-K3 (2026-11-29-e/k3-cache-ds-regs-rejected):
  // five or six remove the rescans that make T=64..128 slower than T=16 (4.5-4.6 us -> 4.0 with
  // six) but cost T=1 (3.73 -> 3.90) and T=16384 (44.9 -> 49.7 with five, 56.0 with six).
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

/// One token per kLanes lanes; kLoads: how logits and bias are read. Compiled once for each
/// when the contract's tiling has vector loads: before, one kernel tested the pointers and ptxas
/// issued both kinds of loads (the untaken predicated) on every call, ~20 instructions per token
/// and 0.3 us at T=1 (DeepSeek-V3: 2.62 -> 2.33, bench/results/2026-11-29-e/loads-split). The
/// element-by-element kernel beside a vector one (the rare one) asks for one resident block only:
/// with ptxas's own register target its larger live set spilled (Kimi-K3-sized, sm_90a).
/// Resident blocks asked of ptxas for the warp kernel: a register budget of 40 + the values a
/// lane holds per key (logit, bias, softmax's exp). Unconstrained, ptxas keeps fewer registers
/// by issuing some of the row's vector loads only after the first keys' math, a second memory
/// round trip per token (DeepSeek-V3, H200: T=1 2.24 -> 2.42 us); with a budget it issues them
/// all first (bench/results/2026-12-01-b/load-budget). Above 16 keys a lane (Kimi-K3) the loads
/// do not fit beside the keys and no budget was faster than ptxas's own choice, except with two
/// ranks a lane (K > 32), where ptxas's own choice spilled (sm_100a, 1024 experts, top 64).
template <class C>
constexpr int kWarpMinBlocks =
    C::kWarpSlots > 16
        ? (C::kK > 32 ? 1 : 0)
        : 65536 / (C::kWarpsPerBlock * 32 *
                   ((1 + (C::kHasBias ? 1 : 0) + (C::kScoring == Scoring::softmax ? 1 : 0)) * C::kWarpSlots + 40));
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
  // instructions a token (Kimi-K3 T=1 3.74 -> 3.46 us, bench/results/2026-12-01-b/scores-shared).
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
    // logits and bias loaded again (from cache): holding them across the branch instead cost
    // registers (Kimi-K3 80 -> 124) and time (T=16384 52.1 -> 57.6 us).
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
    // div_by_rcp_ok for ex >= 0 as one integer test: ex with 0 < bits < tiny are redone.
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
        if (__float_as_uint(ex[s]) - 1u < tiny - 1u) hi[s] = key_hi_of_score<C, L::kTagged>(x[s], __fdiv_rn(ex[s], st.sum), b[s], 3u - s);
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
    // every row cost ~10% of the ALU instructions (Kimi-K3: 28 a lane). Warp-uniform, so the
    // slices' shuffles stay converged.
    bool recheck = top < kFirstValid;
    if constexpr (kLanes < 32) recheck = __any_sync(kFullMask, recheck);
    if (recheck) {
      // A loop, not unrolled: unrolled, ptxas turned this branch into predicated loads and
      // tests issued on every row (GLM-4.5: 15 instructions a token, T=1 1.82 -> 1.90 us).
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

// ---- one token per block -----------------------------------------------------------------
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
