#pragma once
// Routing selection: reductions over a token's lanes, rule 3's choice of groups, and the top-K
// algorithms both kernels share, so that they select the same keys.
//
// Top-K takes K maxima in turn: each lane keeps its best few keys sorted (its cache), the lanes
// of a token reduce their heads (redux.sync on a full warp), and the lane that held the winner
// pops it, rescanning its keys below the winner only when its cache is used up.
// select_topk_split holds keys as two 32-bit halves (upper half, expert); on a whole warp a round
// reduces the upper halves only and a tie between lanes (bitwise-equal keys) is only counted,
// after which the exact rounds (a second reduction for the lowest expert) run again.
// select_topk_tagged does the same for up to 4 keys a lane without a bias, the slot riding in a
// key's low bits. Each round's pair goes to shared memory and the lane of its rank reads it back
// after the last round. rank_sets selects by rank counts in shared memory instead: one parallel
// pass, no dependent rounds (the block kernel's tree and merge). A group is kept when fewer than
// TG group scores beat it (group_kept: one shuffle a group, no selection rounds).

#include "routing_keys.cuh"

namespace moejit {

namespace routing {

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

// ---- top-K over keys spread across the kLanes lanes of a token ---------------------------
/// Insert v into the descending list c (kept sorted, length kCache): branch-free.
template <int kCache>
__device__ __forceinline__ void insert_top(u64 (&c)[kCache], u64 v) {
#pragma unroll
  for (int i = kCache - 1; i > 0; --i) c[i] = v > c[i - 1] ? c[i - 1] : (v > c[i] ? v : c[i]);
  c[0] = v > c[0] ? v : c[0];
}

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

/// *p = (a, b) in the lanes where `store` holds, p in shared memory, as one predicated store:
/// with `if (store) *p = ...` ptxas rebuilt p's address under the predicate every round (~7
/// instructions). A fast round's store is one lane's, or in a tie several lanes' in the one
/// instruction; then one of them lands (CUDA programming guide, SIMT architecture) and the exact
/// rounds rewrite every record after a __syncwarp.
/// NOTE: compute-sanitizer's racecheck reports those same-instruction writes of a tie as hazards;
/// they are the only ones it finds in the warp kernel.
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

/// A rescan refills the next key only (one max pass over the slots), or the whole cache from 6 to
/// 15 slots a lane, where that is faster on the H200 (DeepSeek-V3, 8 slots, T=1: 2.25 vs 2.63 us).
template <int kSlots>
constexpr bool kRefillOneFor = kSlots >= 16 || kSlots <= 5;

/// Lazy keys (fast rounds, 16 or more slots a lane): the cache fill also keeps the lane's fifth-
/// and sixth-largest upper halves (what its insertions drop) by value only; a lane's fourth and
/// fifth wins make them its head with the expert kUnresolved, and those records get their experts
/// after the last round (resolve_lazy_records). A sixth win, or two keys of a lane with the same
/// upper half around a lazy key, run the exact rounds again, like a tie. Why: a fourth win would
/// rescan the lane's keys on the rounds' dependency chain (~360 cycles at 28 slots), and one such
/// token makes the whole call wait. The fill costs every token instructions, so only the
/// Refill::lazy kernel has it, taken up to a measured token count (runtime/routing_crossover.json).
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

/// One selection round of select_topk_split: the largest upper half over the lanes, the lowest
/// expert among the lanes that hold it, recorded at rec[k] in shared memory; the lane that held
/// the winner pops it and, when its cache is used up, rescans its keys below the winner (or,
/// where kLazyFor holds, takes its next lazy key).
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
  // The pop by selects rather than a branch around it: a divergent branch here costs more than
  // the shift (ncu, Kimi-K3: 13 moves and 5 branch instructions a round).
  // NOTE: a warp-uniform branch (__any_sync) around the rescan makes ptxas spill on sm_100a
  // (Kimi-K3-sized, bf16 logits); the lane's own branch does not.
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
      // instead of a kCache insertion's ~21); a lane that wins again rescans again. Slots rise in
      // expert order, so of equal upper halves the first one stays.
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
/// rec: kK pairs of shared memory for the token's lanes. In the exact rounds every lane stores
/// the same pair: one store instead of the rank lane's compare and two selects (~3 of a round's
/// ~20 ALU instructions, the pipe that bounds large T).
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
      // Two rounds an iteration up to 16 (one: Kimi-K3 T=128 3.54 vs 3.43 us; all: every round's
      // refill code). NOTE: beyond 16, one: two make ptxas spill (512 experts, top 32, sm_100a).
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
  // NOTE: up to 16 rounds only: with both sets of rounds in one kernel, more make ptxas spill
  // (512 experts, top 32, 32 groups, sm_100a); the rounds' latency matters most at small K anyway.
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

}  // namespace routing

/// Keys a lane caches in select_topk_split: all of them up to 4 (no round tests for a rescan),
/// else the size that balances rescans against longer pops on the H200 (Kimi-K3 T=16384: 56.1 us
/// with four, 63.5 with five).
template <int kSlots>
constexpr int kCacheFor = kSlots <= 4 ? kSlots : (kSlots >= 16 ? 4 : 3);

}  // namespace moejit
