#pragma once
// The experts op (numerics.md "experts"): a MoE layer's routed experts, four kernels chained on
// one stream (programmatic dependent launch between them), every count on the device:
//
//   experts_meta_kernel     one block: per-expert counts, the stable sort of the (token, slot)
//                           pairs by local expert (pair order within an expert, so every run
//                           gives the same bits), each pair's sorted row, and the GEMMs' work
//                           list -- tiles of up to N rows of one expert (N picked per call);
//                           masked: tiles straight from expert_num_tokens
//   experts_gemm1_kernel    gate/up = x' w13[e]^T, rounded to the dtype, then the activation:
//                           h [sorted row, I]
//   experts_gemm2_kernel    o = h w2[e]^T (+ b2) times the router weight, rounded: o [sorted
//                           row, H] (masked: y rows directly)
//   experts_combine_kernel  y[t] = the fp32 sum of its valid slots in slot order (each slot's o
//                           row found through position), one rounding
//
// The GEMMs are weight streamers (weight_stream.cuh): a warp takes 16 weight rows (GEMM1: 8
// gate rows and their 8 up rows, so one lane holds a gate and its up) and the tile's N rows as
// the mma's N side.
//
// One token (standard layout, T = 1) takes two kernels instead: no metadata (slot k is its own
// tile of one row, its expert read from the ids) and no combine:
//
//   experts_gemm1_kernel<1, true>  h [slot, I] as above, CTA (slot blockIdx.x, h columns)
//   experts_gemm2_one_kernel       each slot's o for 16 output columns (the CTA's warps split the
//                                  slots), rounded as GEMM2 rounds it, then summed in slot order
//                                  in fp32 and rounded once into y: the four kernels' bits
//
// GEMM2's weights do not depend on GEMM1: a CTA asks for the weights of its first stash_regions
// slots at once (one bulk copy a w2 row into a region of shared memory each: as many regions as
// fit when the SMs hold the whole grid, compiler/ops/experts.cpp), then waits for h and computes
// those slots from shared memory; slot k past them takes region k % stash_regions once the slot
// before it there has been read. Its CTAs take the SMs GEMM1 leaves, so this overlaps GEMM1's
// tail; bulk copies keep a region's bytes in flight without holding L1, which the register ring
// and cp.async need and which a CTA with ~210 KB of shared memory has 28 KB of (H200, T = 1:
// Qwen3-30B-A3B 29.7 us on the register ring alone, 22.4 with the regions; bench/README.md).
// GEMM1 keeps its default carveout: with the largest shared memory (28 KB of L1) its streaming
// loads ran at half speed. Without regions GEMM2 computes from its register ring and asks for the
// most L1: with the default, after a kernel of ~200 KB of shared memory a CTA (the latent tail's
// tensor cores) MoELayer's Kimi-K3 layer ran 22 us slower at T = 1 (H100; bench/README.md).
//
// Config (generated): kH, kI, kE, kK, kIdRange, kMasked, kHasMap, kWeightOnInput, kBias, kIds64,
// T (= Out), activation constants (kKind, kInterleaved, kBeta, kInvBeta, kLinearBeta,
// kInvLinearBeta, kAlpha, kLimit), kGroups1, kSplit1, kGroups2, kSplit2, kRing1, kRing2, kRingOne.

#include "activation.cuh"
#include "experts_args.h"
#include "sm90.cuh"
#include "weight_stream.cuh"

namespace moejit {
namespace experts {

using namespace wstream;

inline constexpr int kMetaThreads = 1024;
inline constexpr int kCombineThreads = 256;

template <class C>
struct Checks {
  static_assert(C::kH % 64 == 0 && C::kI % 64 == 0, "hidden and intermediate in 64-element tiles");
  static_assert(C::kE >= 1 && C::kE <= 4096, "local experts counted in shared memory");
  static_assert(C::kI % (8 * C::kGroups1) == 0 && C::kH % (16 * C::kGroups2) == 0, "whole CTAs of rows");
  static_assert((C::kH / kBlockK) % C::kSplit1 == 0 && (C::kI / kBlockK) % C::kSplit2 == 0, "K splits into whole blocks");
  static_assert(sizeof(typename C::T) == 2, "bf16 or fp16");
  static constexpr bool ok = true;
};

// ---- device helpers ---------------------------------------------------------------------------

/// The gated activation of a rounded gate/up pair, as the activation op computes it.
template <class C>
__device__ __forceinline__ typename C::Out activation_of(float g, float u) {
  const auto sigmoid_of = [](float x) { return sigmoid_by_rcp_fast(x); };
  if constexpr (C::kKind == ActKind::situ) {
    const float v = C::kLinearBeta > 0.0f ? mul(C::kLinearBeta, tanh_accurate(mul(u, C::kInvLinearBeta))) : u;
    return situ_output<C>(g, v, sigmoid_of);
  } else if constexpr (C::kKind == ActKind::swiglu_oai) {
    return swiglu_oai_output<C>(g, u, sigmoid_of);
  } else {
    return activate<C>(g, u);
  }
}

template <class C>
__device__ __forceinline__ long long id_at(const void* ids, long long i) {
  if constexpr (C::kIds64) return static_cast<const long long*>(ids)[i];
  else return static_cast<const int*>(ids)[i];
}

/// The local expert of pair p, or -1 when its id is outside [0, kIdRange) or maps to no expert
/// of this rank.
template <class C, class Args>
__device__ __forceinline__ int local_expert(const Args& a, long long p) {
  const long long id = id_at<C>(a.ids, p);
  if (id < 0 || id >= C::kIdRange) return -1;
  const int e = C::kHasMap ? a.expert_map[id] : static_cast<int>(id);
  return e >= 0 && e < C::kE ? e : -1;
}

/// In-place exclusive scan of v[0, n] (n + 1 entries, v[n] ignored on input, the total on
/// output) by a whole block of kMetaThreads threads; `warp_sums` holds 32 ints.
__device__ __forceinline__ void block_exclusive_scan(int* v, int n, int* warp_sums) {
  const int per = (n + kMetaThreads - 1) / kMetaThreads;
  const int begin = min(n, static_cast<int>(threadIdx.x) * per), end = min(n, begin + per);
  int sum = 0;
  for (int i = begin; i < end; ++i) sum += v[i];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int incl = sum;
#pragma unroll
  for (int o = 1; o < 32; o *= 2) {
    const int y = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += y;
  }
  if (lane == 31) warp_sums[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    int w = warp_sums[lane], wincl = w;
#pragma unroll
    for (int o = 1; o < 32; o *= 2) {
      const int y = __shfl_up_sync(0xffffffffu, wincl, o);
      if (lane >= o) wincl += y;
    }
    warp_sums[lane] = wincl - w;
  }
  __syncthreads();
  int run = warp_sums[warp] + incl - sum;
  for (int i = begin; i < end; ++i) {
    const int x = v[i];
    v[i] = run;
    run += x;
  }
  if (threadIdx.x == kMetaThreads - 1) v[n] = run;
  __syncthreads();
}

/// The stable sort's ranking of pairs [begin, end): in pair order, kMetaThreads at a time, a warp
/// at a time, each group of lanes with the same expert taking consecutive rows from next[e] (in
/// shared memory, advanced as rows are taken); writes each pair's row and each row's pair.
template <class C>
__device__ __forceinline__ void rank_pairs(const ExpertsMetaArgs& a, long long begin, long long end, int* next) {
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  for (long long base = begin; base < end; base += kMetaThreads) {
    const long long p = base + tid;
    const int e = p < end ? local_expert<C>(a, p) : -1;
    const unsigned peers = __match_any_sync(0xffffffffu, e);
    const int rank = __popc(peers & ((1u << lane) - 1u));
    const long long left = (end - base + 31) / 32;
    const int warps = left < 32 ? static_cast<int>(left) : 32;
    int row = -1;
    for (int w = 0; w < warps; ++w) {
      if (warp == w) {
        if (e >= 0) row = next[e] + rank;
        __syncwarp();
        if (e >= 0 && rank == 0) next[e] += __popc(peers);
      }
      __syncthreads();
    }
    if (p < end) {
      a.position[p] = row;
      if (row >= 0) a.sorted[row] = static_cast<int>(p);
    }
  }
}

}  // namespace experts

// ---- metadata ---------------------------------------------------------------------------------

/// One block of kMetaThreads. See the file's header.
template <class C>
__global__ void __launch_bounds__(experts::kMetaThreads) experts_meta_kernel(ExpertsMetaArgs a) {
  static_assert(experts::Checks<C>::ok);
  using namespace experts;
  __shared__ int start[C::kE + 1];  // counts, then their exclusive scan; then each expert's next row
  __shared__ int tiles[C::kE + 1];  // tiles an expert, then their exclusive scan
  __shared__ int warp_sums[32];
  dependent_launch_prologue();
  const int tid = threadIdx.x;
  const long long T = a.tokens;
  const int n = a.tile_rows;
  for (int e = tid; e <= C::kE; e += kMetaThreads) start[e] = 0;
  __syncthreads();
  if constexpr (C::kMasked) {
    for (int e = tid; e < C::kE; e += kMetaThreads) {
      const long long c = a.counts[e];
      start[e] = static_cast<int>(c < 0 ? 0 : (c > T ? T : c));
    }
  } else {
    const long long pairs = T * C::kK;
    for (long long p = tid; p < pairs; p += kMetaThreads) {
      const int e = local_expert<C>(a, p);
      if (e >= 0) atomicAdd(&start[e], 1);
    }
  }
  __syncthreads();
  for (int e = tid; e < C::kE; e += kMetaThreads) tiles[e] = (start[e] + n - 1) / n;
  __syncthreads();
  block_exclusive_scan(tiles, C::kE, warp_sums);
  if constexpr (!C::kMasked) block_exclusive_scan(start, C::kE, warp_sums);
  // The work list: expert e's rows [first, first + count) in tiles of n.
  for (int e = tid; e < C::kE; e += kMetaThreads) {
    const int count = C::kMasked ? start[e] : start[e + 1] - start[e];
    const long long first = C::kMasked ? static_cast<long long>(e) * T : start[e];
    for (int j = 0, t = tiles[e]; j * n < count; ++j, ++t) {
      a.tiles[t] = ExpertsTile{e, static_cast<int>(first + static_cast<long long>(j) * n), min(n, count - j * n), tiles[e]};
    }
  }
  if (tid == 0) {
    a.tile_count[0] = tiles[C::kE];
    if constexpr (!C::kMasked) a.tile_count[1] = start[C::kE];
    a.tile_count[2] = a.tile_count[3] = 0;
  }
  __syncthreads();  // the work list has read the row starts the sort now advances
  if constexpr (!C::kMasked) {
    // The stable sort: a chunk of kMetaThreads pairs at a time, a warp at a time in pair order,
    // each group of lanes with the same expert taking consecutive rows.
    rank_pairs<C>(a, 0, T * C::kK, start);
  }
}

// ---- the GEMMs --------------------------------------------------------------------------------

namespace experts {

/// Where a thread of a GEMM CTA works: its warp's row group and K split, and its lane's row g
/// (of 8) and quad q (of 4) in the mma fragments.
template <int kGroups>
struct Place {
  int group, split, g, q;
  __device__ Place()
      : group(static_cast<int>(threadIdx.x / 32) % kGroups),
        split(static_cast<int>(threadIdx.x / 32) / kGroups),
        g(static_cast<int>(threadIdx.x % 32) / 4),
        q(static_cast<int>(threadIdx.x % 32) % 4) {}
};

/// The tile this CTA works on; false past the work list's end (the grid is sized for the most
/// tiles a call can have). The metadata kernel has finished: GEMM1 waits for it, and GEMM2
/// starts only once every GEMM1 CTA has.
__device__ __forceinline__ bool tile_of_block(const ExpertsGemmArgs& a, ExpertsTile& tile) {
  if (blockIdx.x >= static_cast<unsigned>(*a.tile_count)) return false;
  tile = a.tiles[blockIdx.x];
  return true;
}

/// Blocks in flight a warp of GEMM kGemm: the contract's ring with one n8 block of rows, else
/// pipeline_depth's.
template <class C, int kGemm, int kNB>
constexpr int ring() {
  return kNB == 1 ? (kGemm == 1 ? C::kRing1 : C::kRing2) : pipeline_depth<kNB>();
}

/// Warps of the one-token GEMM2's CTA: kSplit2 for each of up to 16 / kSplit2 slots at a time.
template <class C>
constexpr int one_token_warps() {
  const int slots = 16 / C::kSplit2 > 0 ? 16 / C::kSplit2 : 1;
  return (C::kK < slots ? C::kK : slots) * C::kSplit2;
}

/// The rows of n8 block j this lane's B loads read: the tile's row 8 j + g, or (past the
/// tile's rows) its first row, whose results are never stored.
__device__ __forceinline__ int tile_row(const ExpertsTile& tile, int j, int g) {
  const int r = 8 * j + g;
  return tile.row + (r < tile.rows ? r : 0);
}

/// One token's GEMM2 stash: `regions` regions of shared memory, each one slot's 16 w2 rows of every
/// K split, filled by bulk copies (TMA: no L1 held for loads in flight, unlike cp.async or the
/// register ring), then the h rows of the first `regions` slots. Slot k takes region k % regions
/// once slot k - regions has been read from it; at most two slots a region (2 regions >= K: a
/// barrier's phases are told apart by parity). A row is padded to a stride of 64 bytes mod 128,
/// so that the two rows (g, g + 1) a quarter-warp reads fall in different banks.
template <class C>
struct Stash {
  static constexpr int kBlocks = C::kI / kBlockK / C::kSplit2;
  static constexpr int kChunk = kBlocks * kBlockK * 2;  // bytes of a row one split reads
  static constexpr int kStride = experts_stash_stride(kChunk);
  static constexpr int kPart = 16 * kStride;  // one (slot, split)'s rows
  __device__ static char* part(char* stash, int region, int split) { return stash + (region * C::kSplit2 + split) * kPart; }
  __device__ static typename C::T* h(char* stash, int regions) {
    return reinterpret_cast<typename C::T*>(stash + regions * C::kSplit2 * kPart);
  }
};

/// acc += a stashed slot's 16 rows x h over the split's k blocks, in stream_mma's order (the same
/// bits): `rows` is the lane's row g at its k offset, `h` the slot's h row at the lane's k offset
/// (in shared memory with kSharedH, else global).
template <class C, bool kSharedH>
__device__ __forceinline__ void stash_mma(const char* rows, const typename C::T* h, float (&acc)[4]) {
  using T = typename C::T;
#pragma unroll 4
  for (int kb = 0; kb < Stash<C>::kBlocks; ++kb) {
    const uint4 x0 = load_shared_u4(rows + 2 * kBlockK * kb), x1 = load_shared_u4(rows + 8 * Stash<C>::kStride + 2 * kBlockK * kb);
    const uint4 y = kSharedH ? load_shared_u4(h + kBlockK * kb) : load_shared_row(h + kBlockK * kb);
    const unsigned a0[4] = {x0.x, x0.y, x0.z, x0.w}, a1[4] = {x1.x, x1.y, x1.z, x1.w}, b[4] = {y.x, y.y, y.z, y.w};
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      const unsigned a[4] = {a0[2 * s], a1[2 * s], a0[2 * s + 1], a1[2 * s + 1]};
      mma_16816<T>(acc, a, b[2 * s], b[2 * s + 1]);
    }
  }
}

}  // namespace experts

/// GEMM1 and the activation: CTA (tile blockIdx.x, h columns blockIdx.y * 8 kGroups1 ...). With
/// kOne (one token, no metadata) tile blockIdx.x is slot blockIdx.x's row and a CTA takes 8 h
/// columns (one row group): K I / 8 small CTAs spread over the SMs more evenly than K I / 32.
template <class C, int kNB, bool kOne = false>
__global__ void __launch_bounds__(32 * (kOne ? 1 : C::kGroups1) * C::kSplit1) experts_gemm1_kernel(ExpertsGemmArgs a) {
  static_assert(experts::Checks<C>::ok);
  static_assert(!kOne || (kNB == 1 && !C::kMasked), "one token: standard layout, tiles of one row");
  using namespace experts;
  using T = typename C::T;
  constexpr int kGroups = kOne ? 1 : C::kGroups1, kSplit = C::kSplit1, kU = kOne ? C::kRingOne : ring<C, 1, kNB>();
  constexpr int kBlocks = C::kH / kBlockK / kSplit;
  __shared__ float scratch[(kSplit > 1 ? kSplit - 1 : 1) * kGroups * 32 * kNB * 4];
  ExpertsTile tile;
  wait_for_primary();  // the work list (one token: the ids)
  if constexpr (kOne) {
    const int e = local_expert<C>(a, blockIdx.x);
    if (e < 0) return;
    tile = ExpertsTile{e, static_cast<int>(blockIdx.x), 1, 0};
  } else if (!tile_of_block(a, tile)) {
    return;
  }
  launch_dependents();  // GEMM2 may start streaming its weights
  const Place<kGroups> p;
  const int group = p.group, split = p.split, g = p.g, q = p.q;
  const int col = blockIdx.y * (8 * kGroups) + 8 * group + g;  // this lane's h column
  const long long gate_row = C::kInterleaved ? 2LL * col : col;
  const long long up_row = C::kInterleaved ? 2LL * col + 1 : static_cast<long long>(C::kI) + col;
  const long long k_offset = static_cast<long long>(split) * kBlocks * kBlockK + 8 * q;
  const T* w = static_cast<const T*>(a.w) + static_cast<long long>(tile.expert) * 2 * C::kI * C::kH;
  const char* a0 = reinterpret_cast<const char*>(w + gate_row * C::kH + k_offset);
  const char* a1 = reinterpret_cast<const char*>(w + up_row * C::kH + k_offset);
  const char* b[kNB];
  float scale[kNB];
#pragma unroll
  for (int j = 0; j < kNB; ++j) {
    const int row = tile_row(tile, j, g);
    long long x_row = row;
    scale[j] = 1.0f;
    if constexpr (!C::kMasked) {
      const int pair = kOne ? row : a.sorted[row];
      x_row = pair / C::kK;
      if constexpr (C::kWeightOnInput) scale[j] = a.topk_weights[pair];
    }
    b[j] = reinterpret_cast<const char*>(static_cast<const T*>(a.x) + x_row * C::kH + k_offset);
  }
  float acc[kNB][4] = {};
  stream_mma<T, kNB, kU, kBlocks, C::kWeightOnInput>(a0, a1, b, scale, acc);
  reduce_splits<kGroups, kSplit, kNB>(acc, scratch);
  if (split != 0) return;
  float gate_bias = 0.0f, up_bias = 0.0f;
  if constexpr (C::kBias) {
    const T* bias = static_cast<const T*>(a.bias) + static_cast<long long>(tile.expert) * 2 * C::kI;
    gate_bias = to_float(bias[gate_row]);
    up_bias = to_float(bias[up_row]);
  }
  T* h = static_cast<T*>(a.out);
#pragma unroll
  for (int j = 0; j < kNB; ++j) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int r = 8 * j + 2 * q + i;  // the C fragment's column: the tile's row
      if (r >= tile.rows) continue;
      const float gate = round_to<T>(C::kBias ? add(acc[j][i], gate_bias) : acc[j][i]);
      const float up = round_to<T>(C::kBias ? add(acc[j][2 + i], up_bias) : acc[j][2 + i]);
      h[static_cast<long long>(tile.row + r) * C::kI + col] = activation_of<C>(gate, up);
    }
  }
}

/// GEMM2 and the router weight: CTA (tile blockIdx.x, output columns blockIdx.y * 16 kGroups2 ...).
/// Its first weight blocks load before it waits for GEMM1's h.
template <class C, int kNB>
__global__ void __launch_bounds__(32 * C::kGroups2 * C::kSplit2) experts_gemm2_kernel(ExpertsGemmArgs a) {
  static_assert(experts::Checks<C>::ok);
  using namespace experts;
  using T = typename C::T;
  constexpr int kGroups = C::kGroups2, kSplit = C::kSplit2, kU = ring<C, 2, kNB>();
  constexpr int kBlocks = C::kI / kBlockK / kSplit;
  __shared__ float scratch[(kSplit > 1 ? kSplit - 1 : 1) * kGroups * 32 * kNB * 4];
  ExpertsTile tile;
  if (!tile_of_block(a, tile)) return;
  const Place<kGroups> p;
  const int group = p.group, split = p.split, g = p.g, q = p.q;
  const int col = blockIdx.y * (16 * kGroups) + 16 * group + g;  // rows g and g + 8: columns col, col + 8
  const long long k_offset = static_cast<long long>(split) * kBlocks * kBlockK + 8 * q;
  const T* w = static_cast<const T*>(a.w) + static_cast<long long>(tile.expert) * C::kH * C::kI;
  const char* a0 = reinterpret_cast<const char*>(w + static_cast<long long>(col) * C::kI + k_offset);
  const char* a1 = reinterpret_cast<const char*>(w + static_cast<long long>(col + 8) * C::kI + k_offset);
  const char* b[kNB];
  const float scale[kNB] = {};
#pragma unroll
  for (int j = 0; j < kNB; ++j) {
    b[j] = reinterpret_cast<const char*>(static_cast<const T*>(a.x) + static_cast<long long>(tile_row(tile, j, g)) * C::kI + k_offset);
  }
  float acc[kNB][4] = {};
  stream_mma<T, kNB, kU, kBlocks, false>(a0, a1, b, scale, acc, [] {
    wait_for_primary();  // h
    launch_dependents();
  });
  reduce_splits<kGroups, kSplit, kNB>(acc, scratch);
  if (split != 0) return;
  float bias[2] = {0.0f, 0.0f};
  if constexpr (C::kBias) {
    const T* b2 = static_cast<const T*>(a.bias) + static_cast<long long>(tile.expert) * C::kH;
    bias[0] = to_float(b2[col]);
    bias[1] = to_float(b2[col + 8]);
  }
  T* out = static_cast<T*>(a.out);
#pragma unroll
  for (int j = 0; j < kNB; ++j) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int r = 8 * j + 2 * q + i;
      if (r >= tile.rows) continue;
      int row = tile.row + r;
      asm volatile("" : "+r"(row));  // its address derived here, not held from before the reduction
      float weight = 1.0f;
      if constexpr (!C::kMasked && !C::kWeightOnInput) weight = a.topk_weights[a.sorted[row]];
      T* dst = out + static_cast<long long>(row) * C::kH + col;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        float v = acc[j][2 * half + i];
        if constexpr (C::kBias) v = add(v, bias[half]);
        if constexpr (!C::kMasked && !C::kWeightOnInput) v = mul(v, weight);
        dst[8 * half] = from_float<T>(v);
      }
    }
  }
}

/// One token's GEMM2, router weight and combine: CTA (output columns 16 blockIdx.x ...), warp
/// (slot w + kSlotWarps i for each i, K split s) of kSlotWarps x kSplit2. Its first weight blocks
/// load before it waits for GEMM1's h. It never lets the next kernel in early: that kernel's CTAs
/// would take SMs whose carveout this one's stash has made the largest, where a next call's GEMM1
/// streams at half speed with 28 KB of L1.
template <class C>
__global__ void __launch_bounds__(32 * experts::one_token_warps<C>()) experts_gemm2_one_kernel(ExpertsGemmArgs a) {
  static_assert(experts::Checks<C>::ok);
  static_assert(!C::kMasked, "one token: standard layout");
  using namespace experts;
  using T = typename C::T;
  constexpr int kSlotWarps = one_token_warps<C>() / C::kSplit2, kSplit = C::kSplit2, kU = ring<C, 2, 1>();
  constexpr int kBlocks = C::kI / kBlockK / kSplit, kRounds = (C::kK + kSlotWarps - 1) / kSlotWarps;
  __shared__ float scratch[(kSplit > 1 ? kSplit - 1 : 1) * kSlotWarps * 32 * 4];
  __shared__ float o[C::kK][16];  // each valid slot's rounded o
  __shared__ bool valid[C::kK];
  __shared__ unsigned long long full[C::kK * C::kSplit2], empty[C::kK * C::kSplit2];  // a (region, split) each
  extern __shared__ __align__(128) char stash[];  // Stash<C>
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int slot_warp = warp % kSlotWarps, split = warp / kSlotWarps, g = lane / 4, q = lane % 4;
  const int col = static_cast<int>(blockIdx.x) * 16 + g;  // rows g and g + 8: columns col, col + 8
  const long long k_offset = static_cast<long long>(split) * kBlocks * kBlockK + 8 * q;
  // w2 row r of expert e at element k, and at this lane's k offset.
  const auto w2_at = [&](int e, int r, long long k) {
    return reinterpret_cast<const char*>(static_cast<const T*>(a.w) + (static_cast<long long>(e) * C::kH + r) * C::kI + k);
  };
  const auto w2_row = [&](int e, int r) { return w2_at(e, r, k_offset); };
  const int regions = a.stash_regions;
  // Slot k's rows of this split into its region: one bulk copy a row from lanes 0-15, once the
  // slot before it in the region has been read. Every slot completes one phase of its region's
  // barriers, whether or not its id is valid. (compute-sanitizer's racecheck reports that reuse as
  // a WAR hazard: it does not see the empty barrier order the reads before the bulk copy's writes.)
  const auto barrier_of = [&](int k) { return (k % regions) * kSplit + split; };  // slot k's (region, split)
  const auto fetch = [&](int k, int e) {
    const int i = barrier_of(k), generation = k / regions;
    if (generation > 0) {
      sm90::barrier_wait(&empty[i], (generation - 1) & 1);
      sm90::fence_proxy_async();  // the reads of the slot before (generic proxy) ahead of the copies' writes (async proxy)
    }
    if (lane == 0) {
      if (e >= 0) sm90::barrier_expect(&full[i], 16 * Stash<C>::kChunk);
      else sm90::barrier_arrive(&full[i]);
    }
    __syncwarp();
    if (e >= 0 && lane < 16) {
      const char* src = w2_at(e, static_cast<int>(blockIdx.x) * 16 + lane, static_cast<long long>(split) * kBlocks * kBlockK);
      sm90::bulk_load(Stash<C>::part(stash, k % regions, split) + lane * Stash<C>::kStride, src, Stash<C>::kChunk, &full[i]);
    }
  };
  if (regions > 0) {
    if (threadIdx.x == 0) {
      for (int i = 0; i < regions * kSplit; ++i) sm90::barrier_init(&full[i], 1), sm90::barrier_init(&empty[i], 1);
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    for (int round = 0; round < kRounds; ++round) {
      const int k = round * kSlotWarps + slot_warp;
      if (k < regions) fetch(k, local_expert<C>(a, k));
    }
    wait_for_primary();  // h
    T* h = Stash<C>::h(stash, regions);
    const int vectors = regions * C::kI / 8;
    for (int v = static_cast<int>(threadIdx.x); v < vectors; v += static_cast<int>(blockDim.x)) {
      const uint4 y = load_shared_row(static_cast<const T*>(a.x) + 8LL * v);
      asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(sm90::smem_address(h + 8 * v)), "r"(y.x), "r"(y.y), "r"(y.z), "r"(y.w)
                   : "memory");
    }
    __syncthreads();
  }
  for (int round = 0; round < kRounds; ++round) {
    const int k = round * kSlotWarps + slot_warp;
    const int e = k < C::kK ? local_expert<C>(a, k) : -1;
    float acc[1][4] = {};
    if (regions > 0 && k < C::kK) {
      if (k >= regions) fetch(k, e);
      const int i = barrier_of(k);
      sm90::barrier_wait(&full[i], (k / regions) & 1);
      const char* rows = Stash<C>::part(stash, k % regions, split) + g * Stash<C>::kStride + 16 * q;
      if (e >= 0 && k < regions) {
        stash_mma<C, true>(rows, Stash<C>::h(stash, regions) + k * C::kI + k_offset, acc[0]);
      } else if (e >= 0) {
        stash_mma<C, false>(rows, static_cast<const T*>(a.x) + static_cast<long long>(k) * C::kI + k_offset, acc[0]);
      }
      __syncwarp();
      if (lane == 0 && k + regions < C::kK) sm90::barrier_arrive(&empty[i]);
    } else if (e >= 0) {
      const char* a0 = w2_row(e, col);
      const char* a1 = w2_row(e, col + 8);
      const char* const b[1] = {reinterpret_cast<const char*>(static_cast<const T*>(a.x) + static_cast<long long>(k) * C::kI + k_offset)};
      const float scale[1] = {};
      stream_mma<T, 1, kU, kBlocks, false>(a0, a1, b, scale, acc, [] { wait_for_primary(); });  // h
    }
    // Partial sums in split order, as reduce_splits adds them (its layout: kGroups = kSlotWarps),
    // written out here: through reduce_splits Kimi-K3 tp 1's instance spills 12 bytes.
    if constexpr (kSplit > 1) {
      if (split > 0) {
#pragma unroll
        for (int i = 0; i < 4; ++i) scratch[(((split - 1) * kSlotWarps + slot_warp) * 4 + i) * 32 + lane] = acc[0][i];
      }
      __syncthreads();
      if (split == 0) {
        for (int s = 1; s < kSplit; ++s) {
#pragma unroll
          for (int i = 0; i < 4; ++i) acc[0][i] = add(acc[0][i], scratch[(((s - 1) * kSlotWarps + slot_warp) * 4 + i) * 32 + lane]);
        }
      }
      __syncthreads();  // scratch read before the next round writes it
    }
    if (split == 0 && k < C::kK) {
      if (lane == 0) valid[k] = e >= 0;
      if (e >= 0 && q == 0) {  // the C fragment's column 0: the token; rows g and g + 8
        const float weight = C::kWeightOnInput ? 1.0f : a.topk_weights[k];
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          float v = acc[0][2 * half];
          if constexpr (C::kBias) v = add(v, to_float(static_cast<const T*>(a.bias)[static_cast<long long>(e) * C::kH + col + 8 * half]));
          if constexpr (!C::kWeightOnInput) v = mul(v, weight);
          o[k][g + 8 * half] = to_float(from_float<T>(v));
        }
      }
    }
  }
  __syncthreads();
  if (threadIdx.x < 16) {
    float s = 0.0f;
#pragma unroll 4
    for (int k = 0; k < C::kK; ++k) {
      if (valid[k]) s = add(s, o[k][threadIdx.x]);
    }
    static_cast<T*>(a.out)[static_cast<int>(blockIdx.x) * 16 + threadIdx.x] = from_float<T>(s);
  }
}

// ---- the combine ------------------------------------------------------------------------------

/// y[t] = the fp32 sum, in slot order, of o over t's valid slots (o's rows in sorted order, found
/// through position); a thread a vector of 8 columns.
template <class C>
__global__ void __launch_bounds__(experts::kCombineThreads) experts_combine_kernel(ExpertsCombineArgs a) {
  static_assert(experts::Checks<C>::ok);
  using T = typename C::T;
  constexpr int kVectors = C::kH / 8;
  dependent_launch_prologue();
  const long long v = static_cast<long long>(blockIdx.x) * experts::kCombineThreads + threadIdx.x;
  const long long t = v / kVectors;
  if (t >= a.tokens) return;
  const long long c = (v - t * kVectors) * 8;
  float s[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) s[i] = 0.0f;
#pragma unroll 4
  for (int k = 0; k < C::kK; ++k) {
    const long long row = a.position[t * C::kK + k];
    if (row < 0) continue;
    const Vec<T, 8> o = load_vec<T, 8>(static_cast<const T*>(a.o) + row * C::kH + c);
#pragma unroll
    for (int i = 0; i < 8; ++i) s[i] = add(s[i], to_float(o.v[i]));
  }
  Vec<T, 8> y;
#pragma unroll
  for (int i = 0; i < 8; ++i) y.v[i] = from_float<T>(s[i]);
  store_vec<T, 8>(static_cast<T*>(a.y) + t * C::kH + c, y);
}

}  // namespace moejit
