#pragma once
// The latent-MoE tail (numerics.md "latent_tail"): R = sum of the ranks' routed latent
// partials (rank order, fp32, one rounding), z = bf16(R * rsqrt(mean(R^2) + eps) * gamma),
// out = bf16(z W_up^T + S) with S the rank-order fp32 sum of the shared-expert partials.
//
// Kernels:
//   tail_norm_kernel      base path: rank-order sum of all-gathered partials + RMSNorm
//   tail_exchange_kernel  fused path: one-shot exchange over peer buffers + the same RMSNorm,
//                         and a reduce-scatter of the shared partials (each rank sums its shard)
//   tail_upproj_kernel    z W^T over a slice of W's rows by the weight streamer
//                         (weight_stream.cuh): a warp streams 16 W rows into mma fragments
//                         against up to 64 tokens of z (8, 16, 32 or 64 compiled, picked per
//                         call; more tokens take more CTAs), kSplit warps of a CTA split L and
//                         their partial sums are added in split order in shared memory, S on the
//                         fp32 sum, one rounding; writes out directly (base) or pushes the slice
//                         to every rank (fused). W's first blocks are loaded (and the next asked
//                         into L2) before it waits for the kernel that writes z
//   tail_upproj_tc_kernel sm_90a, tp 1, one token or more than 8: the same product and epilogue
//                         on the tensor cores (TMA + mbarrier rings, wgmma m64 x 16/32/64
//                         tokens), z read once a warpgroup instead of once a warp
//   tail_gather_kernel    fused path: assembles [T, H] from the pushed slices
//   tail_permute_kernel   striped base path: [tp, T, H/tp] slices -> [T, H]
// Peer slots are empty while they hold -0.0; senders turn -0.0 into +0.0. Every spin is
// bounded: past the deadline a kernel sets the error flag and stops waiting. A phase counter
// on the device (3 phases) lets a fast rank run one call ahead without overwriting slots a slow
// rank still reads, and lets CUDA graphs replay without host state.
//
// Config (generated): kH, kL, kTP, kShared, kEps, kSlotTokens, kSplit, kGroups, kTcRows.

#include "common.cuh"
#include "latent_tail_args.h"
#include "sm90.cuh"
#include "wgmma.cuh"
#include "weight_stream.cuh"

namespace moejit {
namespace tail {

using bf16 = __nv_bfloat16;
inline constexpr int kPhases = 3;
inline constexpr int kThreads = kTailThreads;  // norm, exchange, gather, permute
inline constexpr int kTokenTile = 64;  // the most tokens an up-projection CTA takes
inline constexpr unsigned kEmpty2 = 0x80008000u;  // two empty bf16 slots

template <class C>
struct Layout {
  static constexpr long long kShard = C::kH / C::kTP;
  static constexpr long long kRoutedSlot = static_cast<long long>(C::kSlotTokens) * C::kL;
  static constexpr long long kRoutedPhase = kRoutedSlot * C::kTP;
  static constexpr long long kSharedSlot = static_cast<long long>(C::kSlotTokens) * kShard;
  static constexpr long long kSharedPhase = kSharedSlot * C::kTP;
  static constexpr long long kOutPhase = static_cast<long long>(C::kSlotTokens) * C::kH;
  static constexpr long long kSharedBase = kPhases * kRoutedPhase;
  static constexpr long long kOutBase = kSharedBase + kPhases * kSharedPhase;
  static constexpr long long kElements = kOutBase + kPhases * kOutPhase;

  __device__ static uint4* routed(void* base, int phase, int src) {
    return reinterpret_cast<uint4*>(static_cast<bf16*>(base) + phase * kRoutedPhase + src * kRoutedSlot);
  }
  __device__ static uint4* shared(void* base, int phase, int src) {
    return reinterpret_cast<uint4*>(static_cast<bf16*>(base) + kSharedBase + phase * kSharedPhase + src * kSharedSlot);
  }
  __device__ static bf16* out(void* base, int phase) { return static_cast<bf16*>(base) + kOutBase + phase * kOutPhase; }
};

template <class C>
struct TailChecks {
  static_assert(C::kTP >= 1 && C::kTP <= kTailMaxRanks, "1 to 8 ranks");
  static_assert(C::kL % 64 == 0 && C::kH % 64 == 0, "H and L are multiples of 64 (GEMM tiles)");
  static_assert(C::kSplit >= 1 && (C::kL / wstream::kBlockK) % C::kSplit == 0, "K splits into whole 32-wide blocks");
  static_assert((C::kGroups == 1 || C::kGroups == 2 || C::kGroups == 4) && C::kGroups * C::kSplit <= 8,
                "16 kGroups rows divide every 64-row slice; a CTA of at most 8 warps");
  static_assert(C::kSlotTokens >= 1 && C::kSlotTokens <= kTokenTile, "the fused path holds at most 64 tokens");
  static constexpr bool ok = true;
};

// ---- small helpers -----------------------------------------------------------------------
__device__ __forceinline__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ uint4 load_volatile(const uint4* p) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
__device__ __forceinline__ unsigned sanitize2(unsigned w) {
  // -0.0 (0x8000) in either half becomes +0.0, so a written slot is never "empty".
  if ((w & 0xffffu) == 0x8000u) w &= 0xffff0000u;
  if ((w >> 16) == 0x8000u) w &= 0x0000ffffu;
  return w;
}
__device__ __forceinline__ uint4 sanitize8(uint4 v) { return {sanitize2(v.x), sanitize2(v.y), sanitize2(v.z), sanitize2(v.w)}; }
__device__ __forceinline__ bool has_empty2(unsigned w) { return (w & 0xffffu) == 0x8000u || (w >> 16) == 0x8000u; }
__device__ __forceinline__ bool full8(uint4 v) {
  return !(has_empty2(v.x) || has_empty2(v.y) || has_empty2(v.z) || has_empty2(v.w));
}
__device__ __forceinline__ uint4 empty8() { return {kEmpty2, kEmpty2, kEmpty2, kEmpty2}; }

/// Waits for a slot to be written (every element not -0.0), bounded by `deadline`; past it,
/// raises the error flag and returns zeros.
__device__ __forceinline__ uint4 poll8(const uint4* slot, unsigned long long deadline, int* error) {
  uint4 v = load_volatile(slot);
  while (!full8(v)) {
    if (now_ns() > deadline) {
      *reinterpret_cast<volatile int*>(error) = 1;
      return {0u, 0u, 0u, 0u};
    }
    v = load_volatile(slot);
  }
  return v;
}

__device__ __forceinline__ void add8(float (&acc)[8], uint4 v) {
  const unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    acc[2 * i] = add(acc[2 * i], __uint_as_float(w[i] << 16));
    acc[2 * i + 1] = add(acc[2 * i + 1], __uint_as_float(w[i] & 0xffff0000u));
  }
}
__device__ __forceinline__ unsigned pack2(float lo, float hi) {
  const unsigned short a = __bfloat16_as_ushort(__float2bfloat16_rn(lo));
  const unsigned short b = __bfloat16_as_ushort(__float2bfloat16_rn(hi));
  return static_cast<unsigned>(a) | (static_cast<unsigned>(b) << 16);
}
__device__ __forceinline__ uint4 round8(const float (&acc)[8]) {
  return {pack2(acc[0], acc[1]), pack2(acc[2], acc[3]), pack2(acc[4], acc[5]), pack2(acc[6], acc[7])};
}
__device__ __forceinline__ float lo_of(unsigned w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float hi_of(unsigned w) { return __uint_as_float(w & 0xffff0000u); }

/// The sum of v over the block, in a fixed order (xor tree in each warp, then warps in order).
__device__ __forceinline__ float block_sum(float v, float* s_red) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v = add(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int warp = static_cast<int>(threadIdx.x) / 32;
  if (threadIdx.x % 32 == 0) s_red[warp] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0f;
    for (int w = 0; w < static_cast<int>(blockDim.x) / 32; ++w) total = add(total, s_red[w]);
    s_red[32] = total;
  }
  __syncthreads();
  return s_red[32];
}

/// One token row: R = bf16(rank-order sum of the partials that `load(r, v)` returns), then
/// z = bf16((R * rsqrt(mean(R^2) + eps)) * gamma). The same code, thread layout and reduction
/// order in both paths, so they give the same bits. A thread asks for up to four of its vectors
/// (and, at most four a thread, gamma's) before it uses any: at L = 3584 one memory round trip
/// for the row, which at tp 1 lands behind the up projection's first W loads and so sets when z
/// is there.
template <class C, class Load>
__device__ __forceinline__ void norm_row(long long t, int ranks, Load&& load, const TailNormArgs& a) {
  constexpr int kVecs = C::kL / 8, kPer = (kVecs + kThreads - 1) / kThreads;
  constexpr bool kGammaFirst = kPer <= 4;
  constexpr int kBatch = kPer <= 4 ? kPer : 2;  // vectors in flight a thread (registers: 8 floats each)
  __shared__ uint4 s_row[kVecs];
  __shared__ float s_red[33];
  const int v0 = static_cast<int>(threadIdx.x);
  const uint4* gamma = static_cast<const uint4*>(a.gamma);
  uint4 g[kGammaFirst ? kPer : 1];
  if constexpr (kGammaFirst) {
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      if (v0 + j * kThreads < kVecs) g[j] = gamma[v0 + j * kThreads];
    }
  }
  float squares = 0.0f;
#pragma unroll
  for (int j0 = 0; j0 < kPer; j0 += kBatch) {
    float acc[kBatch][8] = {};
    for (int r = 0; r < ranks; ++r) {
      uint4 x[kBatch];
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        const int v = v0 + (j0 + j) * kThreads;
        if (j0 + j < kPer && v < kVecs) x[j] = load(r, v);
      }
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        if (j0 + j < kPer && v0 + (j0 + j) * kThreads < kVecs) add8(acc[j], x[j]);
      }
    }
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int v = v0 + (j0 + j) * kThreads;
      if (j0 + j >= kPer || v >= kVecs) continue;
      const uint4 rv = round8(acc[j]);
      s_row[v] = rv;
      static_cast<uint4*>(a.latent_sum)[t * kVecs + v] = rv;
      const unsigned w[4] = {rv.x, rv.y, rv.z, rv.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        squares = add(squares, mul(lo_of(w[i]), lo_of(w[i])));
        squares = add(squares, mul(hi_of(w[i]), hi_of(w[i])));
      }
    }
  }
  const float total = block_sum(squares, s_red);
  // NOTE: mean = sum x (1/L): a multiply, not a division (whose slow path is a call that
  // spills on sm_100a); the reference computes it the same way.
  constexpr float kInvL = 1.0f / static_cast<float>(C::kL);
  const float inv = rsqrtf(add(mul(total, kInvL), C::kEps));
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int v = v0 + j * kThreads;
    if (v >= kVecs) continue;
    const uint4 rv = s_row[v], gv = kGammaFirst ? g[kGammaFirst ? j : 0] : gamma[v];
    const unsigned w[4] = {rv.x, rv.y, rv.z, rv.w}, gw[4] = {gv.x, gv.y, gv.z, gv.w};
    unsigned o[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      o[i] = pack2(mul(mul(lo_of(w[i]), inv), lo_of(gw[i])), mul(mul(hi_of(w[i]), inv), hi_of(gw[i])));
    }
    static_cast<uint4*>(a.latent_norm)[t * kVecs + v] = {o[0], o[1], o[2], o[3]};
  }
  __syncthreads();  // s_row is reused by the block's next row
}

}  // namespace tail

// ---- base path: rank-order sum of all-gathered partials + RMSNorm, one block per token ------
template <class C>
__global__ void __launch_bounds__(tail::kThreads) tail_norm_kernel(TailNormArgs a) {
  static_assert(tail::TailChecks<C>::ok);
  // A PDL launch (tp 1) waits for the kernel before it (the routed input's writer, or the last
  // call's up projection, which reads z), then lets the up projection in to stream W.
  dependent_launch_prologue();
  const long long t = blockIdx.x;
  const uint4* parts = static_cast<const uint4*>(a.routed);
  const long long stride = a.routed_rank_stride / 8;
  tail::norm_row<C>(t, C::kTP, [&](int r, int v) { return parts[r * stride + t * (C::kL / 8) + v]; }, a);
}

// ---- fused path, kernel 1: exchange over peer buffers + RMSNorm + shared reduce-scatter ----
template <class C>
__global__ void __launch_bounds__(tail::kThreads, 1) tail_exchange_kernel(TailNormArgs a) {
  using namespace tail;
  using L = Layout<C>;
  static_assert(TailChecks<C>::ok);
  launch_dependents();  // the up projection may start streaming W now
  constexpr int kVecs = C::kL / 8;
  constexpr long long kShardVecs = L::kShard / 8;
  const int phase = *a.phase;
  const long long tokens = a.tokens;
  const unsigned long long deadline = now_ns() + a.timeout_ns;
  const long long first = static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x;
  const long long stride = static_cast<long long>(gridDim.x) * kThreads;

  // Push first, every peer (this rank too), before any slot is polled.
  const uint4* routed = static_cast<const uint4*>(a.routed);
  for (long long v = first; v < tokens * kVecs; v += stride) {
    const uint4 x = sanitize8(routed[v]);
#pragma unroll
    for (int j = 0; j < C::kTP; ++j) L::routed(a.peers.base[j], phase, a.rank)[v] = x;
  }
  if constexpr (C::kShared) {
    const uint4* shared = static_cast<const uint4*>(a.shared);
    for (long long v = first; v < tokens * C::kTP * kShardVecs; v += stride) {
      const long long t = v / (C::kTP * kShardVecs);
      const int j = static_cast<int>((v / kShardVecs) % C::kTP);
      const long long c = v % kShardVecs;
      L::shared(a.peers.base[j], phase, a.rank)[t * kShardVecs + c] = sanitize8(shared[t * (C::kH / 8) + j * kShardVecs + c]);
    }
  }

  // Consume: this rank's routed rows (whole rows per block, for the norm) ...
  void* mine = a.self;  // NOTE: not peers.base[rank]: a run-time index would copy the array to local memory
  for (long long t = blockIdx.x; t < tokens; t += gridDim.x) {
    norm_row<C>(t, C::kTP, [&](int r, int v) {
      uint4* slot = L::routed(mine, phase, r) + t * kVecs + v;
      const uint4 x = poll8(slot, deadline, a.error);
      *slot = empty8();
      return x;
    }, a);
  }
  // ... and its shard of the shared partials, summed in rank order into fp32.
  if constexpr (C::kShared) {
    for (long long v = first; v < tokens * kShardVecs; v += stride) {
      float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int r = 0; r < C::kTP; ++r) {
        uint4* slot = L::shared(mine, phase, r) + v;
        add8(acc, poll8(slot, deadline, a.error));
        *slot = empty8();
      }
      float4* out = reinterpret_cast<float4*>(a.shared_sum + v * 8);
      out[0] = {acc[0], acc[1], acc[2], acc[3]};
      out[1] = {acc[4], acc[5], acc[6], acc[7]};
    }
  }
}

// ---- the up projection: the weight streamer (weight_stream.cuh) -----------------------------
namespace tail {

using wstream::kBlockK;

// NOTE: a warp's [tokens][16 rows] fp32 tile with rows padded to 20 floats: a C fragment's
// stores (token 2q + i, row g) land at 8q + g (mod 32), every bank once.
inline constexpr int kTileStride = kTailTileStride;

constexpr int pow2_at_most(int x) { return x >= 8 ? 8 : x >= 4 ? 4 : x >= 2 ? 2 : 1; }

/// Blocks of 32 k a warp keeps in flight: of W (kA, 1 KB a warp each; loaded before the wait for
/// z) and of z ahead of use (kB; fewer with more n8 blocks, whose B fragments take registers).
/// Past those, W is asked into L2 ahead of the loads (stream_upproj), which no register holds.
template <int kNB, int kBlocks>
struct Ring {
  static constexpr int kWant = kNB >= 8 ? 4 : 8;  // NOTE: 6 beside the 64 tokens' B fragments take 250 registers
  static constexpr int kA = kBlocks >= kWant ? kWant : pow2_at_most(kBlocks);
  static constexpr int kWantB = kNB == 1 ? 8 : kNB == 2 ? 4 : 2;
  static constexpr int kB = kWantB < kA ? kWantB : kA;
  static_assert(kA % kB == 0, "z's ring turns with W's");
};

// NOTE: asm volatile keeps W's first blocks' loads before griddepcontrol.wait; z's come after it
// through wstream::load_shared_row (a coherent load: z is written by the kernel this one waits for).
__device__ __forceinline__ uint4 load_w(const char* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
/// Asks `bytes` (a multiple of 16) from p (16-byte aligned) into L2, without waiting.
__device__ __forceinline__ void prefetch_l2(const void* p, int bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
}

/// acc[j] += W rows g, g + 8 (a0, a1) x z rows of n8 block j (b[j]) over k blocks [0, kBlocks),
/// the k order permuted inside each block as wstream::stream_mma does (lane quad q holds k
/// 8q..8q+7 of A and B alike). W's first kA blocks are loaded, and the next `ahead` bytes of its
/// two rows asked into L2 where `lead`, before the wait for the kernel that writes z; each turn
/// of the ring then asks the next kA blocks into L2, `ahead` bytes past its loads.
template <int kNB, int kBlocks>
__device__ __forceinline__ void stream_upproj(const char* a0, const char* a1, const char* const (&b)[kNB], bool lead, int ahead,
                                              float (&acc)[kNB][4]) {
  using R = Ring<kNB, kBlocks>;
  constexpr int kBytes = kBlockK * 2;
  unsigned wa[R::kA][8];
  unsigned zb[R::kB][kNB][4];
  const auto load_a = [&](unsigned (&f)[8], int kb) {
    const uint4 x0 = load_w(a0 + kb * kBytes), x1 = load_w(a1 + kb * kBytes);
    f[0] = x0.x, f[1] = x0.y, f[2] = x0.z, f[3] = x0.w;
    f[4] = x1.x, f[5] = x1.y, f[6] = x1.z, f[7] = x1.w;
  };
  const auto load_b = [&](unsigned (&f)[kNB][4], int kb) {
#pragma unroll
    for (int j = 0; j < kNB; ++j) {
      const uint4 y = wstream::load_shared_row(b[j] + kb * kBytes);
      f[j][0] = y.x, f[j][1] = y.y, f[j][2] = y.z, f[j][3] = y.w;
    }
  };
  const auto to_l2 = [&](int from, int bytes) {  // byte offsets in the warp's K range
    bytes = min(bytes, kBlocks * kBytes - from);
    if (lead && bytes > 0) {
      prefetch_l2(a0 + from, bytes);
      prefetch_l2(a1 + from, bytes);
    }
  };
#pragma unroll
  for (int u = 0; u < R::kA; ++u) load_a(wa[u], u);
  to_l2(R::kA * kBytes, ahead);
  wait_for_primary();
#pragma unroll
  for (int u = 0; u < R::kB; ++u) load_b(zb[u], u);
  for (int kb = 0; kb < kBlocks; kb += R::kA) {
    if (ahead > 0) to_l2((kb + R::kA) * kBytes + ahead, R::kA * kBytes);
#pragma unroll
    for (int u = 0; u < R::kA; ++u) {
      const int blk = kb + u;
      if (blk >= kBlocks) break;
#pragma unroll
      for (int j = 0; j < kNB; ++j) {
#pragma unroll
        for (int s = 0; s < 2; ++s) {
          const unsigned a[4] = {wa[u][2 * s], wa[u][4 + 2 * s], wa[u][2 * s + 1], wa[u][5 + 2 * s]};
          wstream::mma_16816<bf16>(acc[j], a, zb[u % R::kB][j][2 * s], zb[u % R::kB][j][2 * s + 1]);
        }
      }
      if (blk + R::kA < kBlocks) load_a(wa[u], blk + R::kA);
      if (blk + R::kB < kBlocks) load_b(zb[u % R::kB], blk + R::kB);
    }
  }
}

/// 8 packed bf16 as fp32 (exact).
__device__ __forceinline__ void unpack8(uint4 x, float (&v)[8]) {
  const unsigned w[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) v[2 * i] = lo_of(w[i]), v[2 * i + 1] = hi_of(w[i]);
}
/// 8 bf16 from p as they are, one 16-byte load where p allows it.
__device__ __forceinline__ uint4 load8_raw(const bf16* p) {
  if ((reinterpret_cast<unsigned long long>(p) & 15) == 0) return *reinterpret_cast<const uint4*>(p);
  const unsigned short* h = reinterpret_cast<const unsigned short*>(p);
  return {h[0] | static_cast<unsigned>(h[1]) << 16, h[2] | static_cast<unsigned>(h[3]) << 16,
          h[4] | static_cast<unsigned>(h[5]) << 16, h[6] | static_cast<unsigned>(h[7]) << 16};
}
/// 8 bf16 from p into fp32, one 16-byte load where p allows it.
__device__ __forceinline__ void load8(const bf16* p, float (&v)[8]) {
  if ((reinterpret_cast<unsigned long long>(p) & 15) == 0) {
    unpack8(*reinterpret_cast<const uint4*>(p), v);
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = __bfloat162float(p[i]);
  }
}
/// 8 packed bf16 to p, one 16-byte store where p allows it.
__device__ __forceinline__ void store8(bf16* p, uint4 x) {
  if ((reinterpret_cast<unsigned long long>(p) & 15) == 0) {
    *reinterpret_cast<uint4*>(p) = x;
  } else {
    const unsigned w[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      p[2 * i] = __ushort_as_bfloat16(static_cast<unsigned short>(w[i] & 0xffffu));
      p[2 * i + 1] = __ushort_as_bfloat16(static_cast<unsigned short>(w[i] >> 16));
    }
  }
}

}  // namespace tail

/// The streamer's S for the chunks (token, 8 rows) that thread `tid` of kThreads takes in
/// upproj_epilogue, in registers: shared_sum's, or the rank-order fp32 sum of shared_parts'.
template <class C, int kGroups, int kTokens, int kThreads>
struct TailS {
  static constexpr int kChunks = 2 * kGroups * kTokens;  // (token, group, half): 8 rows each
  static constexpr int kPer = (kChunks + kThreads - 1) / kThreads;
  float v[kPer][8];
  bool any = false;

  __device__ void load(const TailUpArgs& a, long long t0, int col0, int tid) {
    using namespace tail;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int c = tid + i * kThreads;
      const int half = c % 2, grp = (c / 2) % kGroups, tt = c / (2 * kGroups);
      const long long t = t0 + tt;
#pragma unroll
      for (int e = 0; e < 8; ++e) v[i][e] = 0.0f;
      if (c >= kChunks || t >= a.tokens) continue;
      const int col = col0 + 16 * grp + 8 * half;
      if (a.shared_sum) {
        const float4* p = reinterpret_cast<const float4*>(a.shared_sum + t * a.rows + col);
        const float4 x = p[0], y = p[1];
        const float f[8] = {x.x, x.y, x.z, x.w, y.x, y.y, y.z, y.w};
#pragma unroll
        for (int e = 0; e < 8; ++e) v[i][e] = f[e];
      } else if (a.shared_parts) {
        const bf16* parts = static_cast<const bf16*>(a.shared_parts) + t * C::kH + a.row0 + col;
        for (int r = 0; r < a.ranks; ++r) {
          float f[8];
          load8(parts + r * a.shared_rank_stride, f);
#pragma unroll
          for (int e = 0; e < 8; ++e) v[i][e] = add(v[i][e], f[e]);
        }
      }
    }
    any = a.shared_sum || a.shared_parts;
  }
  /// v += S of the thread's i-th chunk (token tt of the tile, rows [r, r + 8) of the CTA's).
  __device__ __forceinline__ void add_to(int i, int /*tt*/, int /*r*/, float (&out)[8]) const {
    if (!any) return;
#pragma unroll
    for (int e = 0; e < 8; ++e) out[e] = add(out[e], v[i][e]);
  }
};

/// The tensor-core kernel's S (tp 1: shared_parts' one rank, or none): a [kTokens][kRows] bf16
/// tile in shared memory that its S warp fills while W streams, or null without S.
template <class C, int kRows>
struct TailSharedS {
  const tail::bf16* tile = nullptr;
  __device__ __forceinline__ void add_to(int /*i*/, int tt, int r, float (&out)[8]) const {
    using namespace tail;
    if (!tile) return;
    float f[8];
    unpack8(load_shared_u4(tile + tt * kRows + r), f);
#pragma unroll
    for (int e = 0; e < 8; ++e) out[e] = add(out[e], add(0.0f, f[e]));  // the rank sum's one term, as TailS adds it
  }
};

/// The up projection's epilogue over a CTA's partial sums: s_tile holds kSplit x kGroups [token]
/// [16 rows] tiles (rows padded to kTileStride floats) of tokens [t0, t0 + kTokens) and the slice's
/// rows [col0, col0 + 16 kGroups), of which the first kRows are stored. Every thread (of
/// kThreads) takes 8 rows of one token: the splits' sums in split order, + S (`s.add_to`: TailS
/// or TailSharedS), one rounding, one 16-byte store (or one a peer).
template <class C, int kSplit, int kGroups, int kTokens, int kThreads, int kRows, class S>
__device__ __forceinline__ void upproj_epilogue(const TailUpArgs& a, const float* s_tile, long long t0, int col0, const S& s) {
  using namespace tail;
  using L = Layout<C>;
  constexpr int kChunks = 2 * kGroups * kTokens;  // (token, group, half): 8 rows each
  const int phase = a.out ? 0 : *a.phase;
#pragma unroll
  for (int i = 0; i < (kChunks + kThreads - 1) / kThreads; ++i) {
    const int c = static_cast<int>(threadIdx.x) + i * kThreads;
    const int half = c % 2, grp = (c / 2) % kGroups, tt = c / (2 * kGroups);
    const long long t = t0 + tt;
    if (c >= kChunks || t >= a.tokens || 16 * grp + 8 * half >= kRows) continue;
    float v[8];
#pragma unroll
    for (int sp = 0; sp < kSplit; ++sp) {
      const float* p = s_tile + tail_tile_at(kTokens, sp * kGroups + grp) + tt * kTileStride + 8 * half;
      const float4 x = load_shared_float4(p), y = load_shared_float4(p + 4);
      const float f[8] = {x.x, x.y, x.z, x.w, y.x, y.y, y.z, y.w};
#pragma unroll
      for (int e = 0; e < 8; ++e) v[e] = sp == 0 ? f[e] : add(v[e], f[e]);
    }
    s.add_to(i, tt, 16 * grp + 8 * half, v);
    const int col = col0 + 16 * grp + 8 * half;  // in the slice
    const long long row = a.row0 + col;          // in W, and the column of out
    const uint4 o = sanitize8(round8(v));  // -0.0 out as +0.0 on every path: it marks an empty peer slot
    if (a.out) {
      store8(static_cast<bf16*>(a.out) + t * a.out_ld + col, o);
    } else {
#pragma unroll
      for (int j = 0; j < C::kTP; ++j) *reinterpret_cast<uint4*>(L::out(a.peers.base[j], phase) + t * C::kH + row) = o;
    }
  }
}

// Block: kGroups warps of 16 W rows x kSplit warps splitting L, over 8 kNB tokens (blockIdx.x)
// and 16 kGroups rows of the slice (blockIdx.y). Each warp leaves its partial sums in shared
// memory as a [token][row] tile for upproj_epilogue.
template <class C, int kNB>
__global__ void __launch_bounds__(32 * C::kGroups * C::kSplit) tail_upproj_kernel(TailUpArgs a) {
  using namespace tail;
  static_assert(TailChecks<C>::ok);
  constexpr int kGroups = C::kGroups, kSplit = C::kSplit, kTokens = 8 * kNB;
  constexpr int kBlocks = C::kL / kBlockK / kSplit;
  __shared__ __align__(16) float s_tile[tail_tiles_floats(kTokens, kSplit * kGroups)];
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int group = warp % kGroups, split = warp / kGroups, g = lane / 4, q = lane % 4;
  const long long t0 = static_cast<long long>(blockIdx.x) * kTokens;
  const int col0 = static_cast<int>(blockIdx.y) * 16 * kGroups;  // the CTA's first row, in the slice
  const long long k_offset = static_cast<long long>(split) * kBlocks * kBlockK + 8 * q;
  const bf16* w = static_cast<const bf16*>(a.w) + static_cast<long long>(a.row0 + col0 + 16 * group + g) * C::kL + k_offset;
  const bf16* z = static_cast<const bf16*>(a.z);
  const char* b[kNB];
#pragma unroll
  for (int j = 0; j < kNB; ++j) {
    const long long t = t0 + 8 * j + g;  // past the tokens: the tile's first, never stored
    b[j] = reinterpret_cast<const char*>(z + (t < a.tokens ? t : t0) * C::kL + k_offset);
  }
  // Only the first token tile asks W into L2: the others (next in the grid) find it there.
  float acc[kNB][4] = {};
  stream_upproj<kNB, kBlocks>(reinterpret_cast<const char*>(w), reinterpret_cast<const char*>(w + 8LL * C::kL), b, q == 0,
                              blockIdx.x == 0 ? a.prefetch_bytes : 0, acc);
  launch_dependents();

  float* tile = s_tile + tail_tile_at(kTokens, split * kGroups + group);
#pragma unroll
  for (int j = 0; j < kNB; ++j) {
#pragma unroll
    for (int i = 0; i < 4; ++i) tile[(8 * j + 2 * q + i % 2) * kTileStride + g + 8 * (i / 2)] = acc[j][i];
  }
  TailS<C, kGroups, kTokens, 32 * kGroups * kSplit> s;
  s.load(a, t0, col0, static_cast<int>(threadIdx.x));
  __syncthreads();
  upproj_epilogue<C, kSplit, kGroups, kTokens, 32 * kGroups * kSplit, 16 * kGroups>(a, s_tile, t0, col0, s);
}

// sm_90a: CTA (token tile blockIdx.x of kTokens, W rows [R blockIdx.y, + R) of the slice, R =
// kTcRows: the fewest rows that cover H in one wave of CTAs, so that at 7168 rows 128 SMs stream
// W rather than 112). Warpgroup s of the two takes L's half s with wgmma m64 x kTokens x 16 (A:
// the R W rows, B: the tokens, both K-major from shared memory, 128-byte swizzle): W read through
// the tensor cores' shared B rather than through each warp's registers, which at 64 tokens holds
// 4x W's bytes of z a warp. A stage is R W rows then the tokens, so at R < 64 the m64's last rows
// read the stage's first tokens: their sums are dropped by the epilogue. Warp 8 issues the TMA
// loads into each warpgroup's ring of stages (full/empty mbarriers); W's first stages are loaded
// before the wait for the kernel that writes z; warp 9 loads S into shared memory meanwhile. Each
// consumer warp's accumulators are the streamer's [token][16 rows] tile for upproj_epilogue
// (kSplit 2, kGroups 4, the first R rows stored).
template <class C, int kTokens>
__global__ void __launch_bounds__(kTailTcThreads, 1) tail_upproj_tc_kernel(const __grid_constant__ TailUpTcArgs args) {
  using namespace tail;
  using namespace sm90;
  static_assert(TailChecks<C>::ok);
  static_assert(C::kL % (64 * kTailTcSplit) == 0, "L in whole 64-wide k blocks a warpgroup");
  constexpr int kKBlocks = C::kL / 64 / kTailTcSplit;  // a warpgroup's
  constexpr int kRows = C::kTcRows;
  static_assert(kRows % 8 == 0 && kRows <= kTailTcMaxRows && kRows + kTokens >= 64, "rows in swizzle atoms; an m64 within its stage");
  constexpr int kStages = tail_tc_stages(kTokens, kRows);
  constexpr int kWBytes = kRows * 128, kStageBytes = kWBytes + kTokens * 128;
  constexpr int kRing = kTailTcSplit * kStages * kStageBytes, kSums = tail_tiles_floats(kTokens, kTailTcSplit * 4) * 4;
  static_assert(kStageBytes % 1024 == 0, "stages on 1024-byte swizzle atoms");
  const TailUpArgs& a = args.u;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - (smem_address(smem_raw) & 1023)) & 1023);
  auto* s_smem = reinterpret_cast<bf16*>(smem + (kRing > kSums ? kRing : kSums));  // S: [kTokens][kRows]
  auto* full = reinterpret_cast<unsigned long long*>(s_smem + kTokens * kRows);
  auto* empty = full + kTailTcSplit * kStages;
  auto* s_full = empty + kTailTcSplit * kStages;
  const auto stage = [&](int wg, int i) { return smem + (wg * kStages + i % kStages) * kStageBytes; };
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const long long t0 = static_cast<long long>(blockIdx.x) * kTokens;
  const int col0 = static_cast<int>(blockIdx.y) * kRows;  // the CTA's first row, in the slice
  float acc[kTokens / 2];  // the consumers': their warpgroup's 64 rows x kTokens
  const bf16* parts = static_cast<const bf16*>(a.shared_parts);  // tp 1: S is its one rank, or none
  if (threadIdx.x == 0) {
    for (int i = 0; i < kTailTcSplit * kStages; ++i) {
      barrier_init(&full[i], 1);
      barrier_init(&empty[i], 4);  // each consumer warp's first lane
    }
    barrier_init(s_full, 32);  // the S warp's lanes
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (warp == 4 * kTailTcSplit) {  // the producer
    constexpr int kFirst = kStages < kKBlocks ? kStages : kKBlocks;
    const int w_row = a.row0 + col0;
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" ::"l"(&args.w) : "memory");
      asm volatile("prefetch.tensormap [%0];" ::"l"(&args.z) : "memory");
      for (int wg = 0; wg < kTailTcSplit; ++wg) {
        for (int i = 0; i < kFirst; ++i) {
          barrier_expect(&full[wg * kStages + i], kStageBytes);
          tma_load(stage(wg, i), &args.w, &full[wg * kStages + i], (wg * kKBlocks + i) * 64, w_row);
        }
      }
    }
    // NOTE: unlike the streamer, no W is asked into L2 past the rings: bulk or per-line prefetches
    // both made this kernel slower (measured 0.6-1.9 us at T = 9-64 for the bulk ones).
    wait_for_primary();  // z
    if (lane == 0) {
      for (int wg = 0; wg < kTailTcSplit; ++wg) {
        for (int i = 0; i < kFirst; ++i) tma_load(stage(wg, i) + kWBytes, &args.z, &full[wg * kStages + i], (wg * kKBlocks + i) * 64, t0);
      }
      for (int i = kFirst; i < kKBlocks; ++i) {
        for (int wg = 0; wg < kTailTcSplit; ++wg) {
          const int b = wg * kStages + i % kStages;
          barrier_wait(&empty[b], ((i / kStages) & 1) ^ 1);
          barrier_expect(&full[b], kStageBytes);
          tma_load(stage(wg, i), &args.w, &full[b], (wg * kKBlocks + i) * 64, w_row);
          tma_load(stage(wg, i) + kWBytes, &args.z, &full[b], (wg * kKBlocks + i) * 64, t0);
        }
      }
    }
  } else if (warp == 4 * kTailTcSplit + 1) {
    // S into shared memory for the epilogue, read while W streams; by a warp of its own, as a
    // consumer's wgmma fence would wait for loads into its registers.
    wait_for_primary();
    if (parts) {
      constexpr int kVecs = kRows / 8, kBatch = 7;  // 16-byte pieces a token; pieces a lane has in flight
      const bf16* src = parts + t0 * C::kH + a.row0 + col0;
      const int n = static_cast<int>(a.tokens - t0 < kTokens ? a.tokens - t0 : kTokens) * kVecs;
      for (int c0 = lane; c0 < n; c0 += 32 * kBatch) {
        uint4 x[kBatch];
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
          const int c = c0 + 32 * b;
          if (c < n) x[b] = load8_raw(src + (c / kVecs) * C::kH + 8 * (c % kVecs));
        }
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
          const int c = c0 + 32 * b;
          if (c < n) *reinterpret_cast<uint4*>(s_smem + (c / kVecs) * kRows + 8 * (c % kVecs)) = x[b];
        }
      }
      barrier_arrive(s_full);
    }
  } else {  // the consumers
    const int wg = warp / 4;
    for (int i = 0; i < kKBlocks; ++i) {
      const int b = wg * kStages + i % kStages;
      barrier_wait(&full[b], (i / kStages) & 1);
      const unsigned long long da = descriptor(stage(wg, i)), db = descriptor(stage(wg, i) + kWBytes);
      wgmma_fence();
#pragma unroll
      for (int k = 0; k < 4; ++k) wgmma::Mma<bf16, kTokens>::run(acc, da + 2 * k, db + 2 * k, i > 0 || k > 0);
      wgmma_commit();
      wgmma_wait<1>();  // the block before is read: its stage goes back to the producer
      if (i > 0) barrier_arrive_lane0(&empty[wg * kStages + (i - 1) % kStages], lane);
    }
    wgmma_wait<0>();
    pin(acc);
  }
  launch_dependents();
  __syncthreads();  // every stage read: the rings become the partial sums
  if (warp < 4 * kTailTcSplit) {  // warp (wg, w4): the epilogue's split wg, group w4 (16 W rows)
    const int g = lane / 4, q = lane % 4;
    float* tile = reinterpret_cast<float*>(smem) + tail_tile_at(kTokens, warp);
#pragma unroll
    for (int j = 0; j < kTokens / 8; ++j) {
#pragma unroll
      for (int i = 0; i < 4; ++i) tile[(8 * j + 2 * q + i % 2) * kTileStride + g + 8 * (i / 2)] = acc[4 * j + i];
    }
  }
  __syncthreads();
  wait_for_primary();  // every thread, before it writes out
  TailSharedS<C, kRows> s;
  if (parts) {
    barrier_wait(s_full, 0);
    s.tile = s_smem;
  }
  upproj_epilogue<C, kTailTcSplit, 4, kTokens, kTailTcThreads, kRows>(a, reinterpret_cast<const float*>(smem), t0, col0, s);
}

// ---- fused path, kernel 3: assemble [T, H] from every rank's pushed slices ------------------
template <class C>
__global__ void __launch_bounds__(tail::kThreads) tail_gather_kernel(TailGatherArgs a) {
  using namespace tail;
  using L = Layout<C>;
  static_assert(TailChecks<C>::ok);
  wait_for_primary();
  const int phase = *a.phase;
  const unsigned long long deadline = now_ns() + a.timeout_ns;
  uint4* slots = reinterpret_cast<uint4*>(L::out(a.self, phase));
  uint4* out = static_cast<uint4*>(a.out);
  const long long n = a.tokens * (C::kH / 8);
  for (long long v = static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x; v < n; v += static_cast<long long>(gridDim.x) * kThreads) {
    out[v] = poll8(slots + v, deadline, a.error);
    slots[v] = empty8();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(a.done, 1u) == gridDim.x - 1) {  // the last block advances the phase
      *a.done = 0;
      *a.phase = (phase + 1) % kPhases;
      __threadfence();
    }
  }
}

// ---- striped base path: [tp, T, H/tp] -> [T, H] ---------------------------------------------
template <class C>
__global__ void __launch_bounds__(tail::kThreads) tail_permute_kernel(TailPermuteArgs a) {
  constexpr long long kShardVecs = C::kH / C::kTP / 8;
  const uint4* in = static_cast<const uint4*>(a.slices);
  uint4* out = static_cast<uint4*>(a.out);
  const long long n = a.tokens * (C::kH / 8);
  for (long long v = static_cast<long long>(blockIdx.x) * tail::kThreads + threadIdx.x; v < n;
       v += static_cast<long long>(gridDim.x) * tail::kThreads) {
    const long long t = v / (C::kH / 8), col = v % (C::kH / 8);
    const long long j = col / kShardVecs, c = col % kShardVecs;
    out[v] = in[(j * a.tokens + t) * kShardVecs + c];
  }
}

}  // namespace moejit
