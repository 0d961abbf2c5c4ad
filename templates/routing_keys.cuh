#pragma once
// Routing keys, scores and weights (numerics.md "routing" rules 1, 2, 5, 6): an expert's key,
// how its logit becomes one, and the weights and stores of a token's selection.
//
// Every expert gets one 64-bit key: (class, or orderable bits of its fp32 selection value, plus 3)
// << 32 | (0xFFFF - expert). A larger key wins, so a max-reduction is an arg-max with the
// lower-index tie rule, and keys are unique. The classes sit below every finite key: 2 = invalid
// (non-finite logit or value; the NaN it is made into has orderable bits 0xFFFFFFFF, which the +3
// wraps to 2, so validity costs no test), 1 = expert of a group that was not kept, 0 = empty slot.
// Softmax sums exp(x - max) as fixed point (2^-47 units, integer adds), so the sum has the same
// bits in any reduction order, in every kernel and in the CPU reference.

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
/// -inf (rule 3's group scores): fmaxf turns their NaN into -inf in one FMNMX.
__device__ __forceinline__ float value_of(u32 hi) { return fmaxf(value_of_key(hi), neg_inf()); }

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
  // x * 0 + c is c when x and c are finite (c is never -0, so a -0 or +0 product keeps its
  // bits), else NaN, or inf when c is; v * 0 + v then turns inf into NaN too. FMAs instead of a
  // finite test and a select: the ALU pipe bounds large T, the FMA pipe runs at a fifth of its
  // peak. Without a bias c is finite for every finite x, so one FMA is enough.
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

// ---- a token's selection: weights and stores -------------------------------------------------
/// Ranks of the top kK that each of a token's kLanes lanes holds: lane l has l, l + kLanes, ...
template <int kLanes, int kK>
constexpr int kRanksOf = (kK + kLanes - 1) / kLanes;

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

/// The contract's legality, asserted by every routing kernel.
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

}  // namespace moejit
