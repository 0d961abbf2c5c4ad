#pragma once
// The latent-MoE tail (numerics.md "latent_tail"): R = sum of the ranks' routed latent
// partials (rank order, fp32, one rounding), z = bf16(R * rsqrt(mean(R^2) + eps) * gamma),
// out = bf16(z W_up^T + S) with S the rank-order fp32 sum of the shared-expert partials.
//
// Kernels:
//   tail_norm_kernel      base path: rank-order sum of all-gathered partials + RMSNorm
//   tail_exchange_kernel  fused path: one-shot exchange over peer buffers + the same RMSNorm,
//                         and a reduce-scatter of the shared partials (each rank sums its shard)
//   tail_upproj_kernel    z W^T over a slice of W's rows, split over K with a fixed-order
//                         reduction, S added on the fp32 accumulator, one rounding; writes out
//                         directly (base) or pushes the slice to every rank (fused); starts
//                         streaming W before the previous kernel ends (programmatic launch)
//   tail_gather_kernel    fused path: assembles [T, H] from the pushed slices
//   tail_permute_kernel   striped base path: [tp, T, H/tp] slices -> [T, H]
// Peer slots are empty while they hold -0.0; senders turn -0.0 into +0.0. Every spin is
// bounded: past the deadline a kernel sets the error flag and stops waiting. A phase counter
// on the device (3 phases) lets a fast rank run one call ahead without overwriting slots a slow
// rank still reads, and lets CUDA graphs replay without host state.
//
// Config (generated): kH, kL, kTP, kShared, kEps, kSlotTokens, kKBlock, kSplits.

#include "common.cuh"
#include "latent_tail_args.h"

namespace moejit {
namespace tail {

using bf16 = __nv_bfloat16;
inline constexpr int kPhases = 3;
inline constexpr int kThreads = 256;       // norm, exchange, gather, permute
inline constexpr int kGemmThreads = 128;   // up projection: 4 warps x 16 rows
inline constexpr int kGemmRows = 64;
inline constexpr int kTokenTile = 64;
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
  static_assert(C::kKBlock % 64 == 0 && C::kKBlock * C::kSplits == C::kL, "K splits cover L");
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
/// order in both paths, so they give the same bits.
template <class C, class Load>
__device__ __forceinline__ void norm_row(long long t, int ranks, Load&& load, const TailNormArgs& a) {
  constexpr int kVecs = C::kL / 8;
  __shared__ uint4 s_row[kVecs];
  __shared__ float s_red[33];
  float squares = 0.0f;
  for (int v = static_cast<int>(threadIdx.x); v < kVecs; v += kThreads) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int r = 0; r < ranks; ++r) add8(acc, load(r, v));
    const uint4 rv = round8(acc);
    s_row[v] = rv;
    static_cast<uint4*>(a.latent_sum)[t * kVecs + v] = rv;
    const unsigned w[4] = {rv.x, rv.y, rv.z, rv.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      squares = add(squares, mul(lo_of(w[i]), lo_of(w[i])));
      squares = add(squares, mul(hi_of(w[i]), hi_of(w[i])));
    }
  }
  const float total = block_sum(squares, s_red);
  // NOTE: mean = sum x (1/L): a multiply, not a division (whose slow path is a call that
  // spills on sm_100a); the reference computes it the same way.
  constexpr float kInvL = 1.0f / static_cast<float>(C::kL);
  const float inv = rsqrtf(add(mul(total, kInvL), C::kEps));
  const uint4* gamma = static_cast<const uint4*>(a.gamma);
  for (int v = static_cast<int>(threadIdx.x); v < kVecs; v += kThreads) {
    const uint4 rv = s_row[v], g = gamma[v];
    const unsigned w[4] = {rv.x, rv.y, rv.z, rv.w}, gw[4] = {g.x, g.y, g.z, g.w};
    unsigned o[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      o[i] = pack2(mul(mul(lo_of(w[i]), inv), lo_of(gw[i])), mul(mul(hi_of(w[i]), inv), hi_of(gw[i])));
    }
    static_cast<uint4*>(a.latent_norm)[t * kVecs + v] = {o[0], o[1], o[2], o[3]};
  }
  __syncthreads();  // s_row is reused by the block's next row
}

// ---- GEMM building blocks (mma.sync m16n8k16 bf16 -> fp32) --------------------------------
__device__ __forceinline__ unsigned smem_addr(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_addr(dst)), "l"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.commit_group;\ncp.async.wait_all;" ::: "memory");
}
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
/// Element offset of (row, 16-byte chunk) in a swizzled tile of `chunks` chunks per row: the
/// XOR spreads the 8 rows an ldmatrix reads over all banks.
__device__ __forceinline__ int swizzle(int row, int chunk, int chunks) {
  return row * chunks * 8 + ((chunk & ~7) | ((chunk ^ row) & 7)) * 8;
}

}  // namespace tail

// ---- base path: rank-order sum of all-gathered partials + RMSNorm, one block per token ------
template <class C>
__global__ void __launch_bounds__(tail::kThreads) tail_norm_kernel(TailNormArgs a) {
  static_assert(tail::TailChecks<C>::ok);
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

// ---- the up projection ---------------------------------------------------------------------
// Block: 64 rows of W x one token tile x one K split. W is fetched before waiting on the
// producer of z; both tiles live whole in shared memory (swizzled), 4 warps x 16 rows.
template <class C>
__global__ void __launch_bounds__(tail::kGemmThreads) tail_upproj_kernel(TailUpArgs a) {
  using namespace tail;
  using L = Layout<C>;
  static_assert(TailChecks<C>::ok);
  constexpr int kKB = C::kKBlock;
  constexpr int kChunks = kKB / 8;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* s_w = reinterpret_cast<bf16*>(smem);
  bf16* s_z = s_w + kGemmRows * kKB;
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32, lane = tid % 32;
  const int tile = static_cast<int>(blockIdx.x), split = static_cast<int>(blockIdx.y);
  const long long t0 = static_cast<long long>(blockIdx.z) * kTokenTile;
  const int tcount = static_cast<int>(min(static_cast<long long>(kTokenTile), a.tokens - t0));
  const int tpad = (tcount + 15) & ~15;
  const int k0 = split * kKB;
  const bf16* w = static_cast<const bf16*>(a.w) + static_cast<long long>(a.row0 + tile * kGemmRows) * C::kL + k0;
  const bf16* z = static_cast<const bf16*>(a.z) + t0 * C::kL + k0;

  // Weights first: they do not depend on the previous kernel.
  for (int i = tid; i < kGemmRows * kChunks; i += kGemmThreads) {
    const int r = i / kChunks, c = i % kChunks;
    cp_async16(s_w + swizzle(r, c, kChunks), w + static_cast<long long>(r) * C::kL + c * 8, 16);
  }
  asm volatile("cp.async.commit_group;" ::: "memory");
  if (a.pdl) wait_for_primary();
  for (int i = tid; i < tpad * kChunks; i += kGemmThreads) {
    const int r = i / kChunks, c = i % kChunks;
    const bool valid = r < tcount;
    cp_async16(s_z + swizzle(r, c, kChunks), z + static_cast<long long>(valid ? r : 0) * C::kL + c * 8, valid ? 16 : 0);
  }
  cp_async_wait_all();
  __syncthreads();

  float acc[8][4];
#pragma unroll
  for (int n = 0; n < 8; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
  const int a_row = warp * 16 + (lane % 8) + ((lane / 8) % 2) * 8;
  const int b_row = (lane % 8) + (lane / 16) * 8;
#pragma unroll 4
  for (int ks = 0; ks < kKB / 16; ++ks) {
    unsigned af[4];
    ldmatrix_x4(af, s_w + swizzle(a_row, ks * 2 + lane / 16, kChunks));
#pragma unroll
    for (int np = 0; np < 4; ++np) {
      if (np * 16 >= tpad) break;
      unsigned bf[4];
      ldmatrix_x4(bf, s_z + swizzle(np * 16 + b_row, ks * 2 + (lane / 8) % 2, kChunks));
      mma(acc[2 * np], af, bf[0], bf[1]);
      mma(acc[2 * np + 1], af, bf[2], bf[3]);
    }
  }

  // Partial sums of this split, then the last split's block reduces them in split order.
  const int g = lane / 4, c2 = (lane % 4) * 2;
  const long long rows = a.rows;
  auto part_index = [&](int s, long long t, int r) { return (static_cast<long long>(s) * a.tokens + t) * rows + tile * kGemmRows + r; };
#pragma unroll
  for (int n = 0; n < 8; ++n) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int tt = n * 8 + c2 + (i % 2);
      const int r = warp * 16 + g + (i / 2) * 8;
      if (tt < tcount) a.partials[part_index(split, t0 + tt, r)] = acc[n][i];
    }
  }
  __threadfence();
  __syncthreads();
  __shared__ unsigned s_last;
  unsigned* counter = a.counters + static_cast<long long>(tile) * gridDim.z + blockIdx.z;
  if (tid == 0) s_last = atomicAdd(counter, 1u) == static_cast<unsigned>(C::kSplits - 1);
  __syncthreads();
  if (!s_last) return;
  __threadfence();
  const int phase = a.out ? 0 : *a.phase;
  for (int e = tid; e < kGemmRows * tcount; e += kGemmThreads) {
    const int r = e % kGemmRows;
    const long long t = t0 + e / kGemmRows;
    float v = 0.0f;
    for (int s = 0; s < C::kSplits; ++s) v = add(v, __ldcg(a.partials + part_index(s, t, r)));
    const long long row = a.row0 + tile * kGemmRows + r;  // in W, and the column of out
    if (a.shared_sum) {
      v = add(v, a.shared_sum[t * rows + tile * kGemmRows + r]);
    } else if (a.shared_parts) {
      float s = 0.0f;
      const bf16* parts = static_cast<const bf16*>(a.shared_parts);
      for (int q = 0; q < a.ranks; ++q) s = add(s, __bfloat162float(parts[q * a.shared_rank_stride + t * C::kH + row]));
      v = add(v, s);
    }
    const bf16 o = __float2bfloat16_rn(v);
    if (a.out) {
      static_cast<bf16*>(a.out)[t * a.out_ld + a.out_col0 + tile * kGemmRows + r] = o;
    } else {
      const bf16 clean = __ushort_as_bfloat16(__bfloat16_as_ushort(o) == 0x8000 ? 0 : __bfloat16_as_ushort(o));
#pragma unroll
      for (int j = 0; j < C::kTP; ++j) L::out(a.peers.base[j], phase)[t * C::kH + row] = clean;
    }
  }
  if (tid == 0) *counter = 0;  // ready for the next launch (and graph replay)
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
