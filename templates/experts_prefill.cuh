#pragma once
// The experts op's prefill path (many rows an expert; sm_90a): the same metadata, numerics and
// combine as the decode path (experts.cuh), with its GEMMs as persistent, warp-specialized
// tensor-core kernels:
//
//   experts_gather_kernel   where the router weight applies on the input: x' [sorted row, H] =
//                           x[token] times the weight, rounded as the decode path rounds it, so
//                           that GEMM1's A is a plain 2-D tensor TMA can load; token-major,
//                           through each pair's position
//   experts_prefill_kernel  <1>: gate/up = x w13[e]^T (A: x's rows of the tile's pairs, or x'),
//                           rounded, the activation -> h
//                           <2>: o = h w2[e]^T (+ b2) times the router weight -> o [sorted
//                           row, H] (masked: y)
//
// A CTA of 384 threads: warpgroup 2 is the producer. Its first thread issues the TMA loads into
// a ring of kStages shared-memory stages (A: 128 rows x 64 k, B: N rows x 64 k, 128-byte
// swizzle); where GEMM1's A is x's rows themselves, the whole warpgroup copies them with cp.async
// into the same swizzle (produce_gathered: no x' written and read back through HBM). Full/empty
// mbarriers stand between it and warpgroups 0 and 1, which take rows 0-63 and 64-127 of each tile
// with wgmma m64nNk16 (fp32 accumulators in registers; warpgroup 1 idles on a tile of at most 64
// rows) and store from them: each warp its 16 rows, 64 columns at a time, staged in shared memory
// and stored by TMA (16-byte stores where the rows run past the tile's). The CTAs are persistent and
// take units in order from a counter: unit u of tile_count x (N tiles) is visited in bands of up
// to kBand tiles of one expert, N tile outer, so that the CTAs running together share their
// weight tiles in L2 and their A tiles stay there. The producer hands each unit to the consumers
// in a shared slot beside the stage of its first k block; the consumers keep one k block's wgmmas
// in flight while issuing the next.
//
// Config (generated): experts.cuh's, plus kCols1 (h columns a GEMM1 tile: its N is 2 kCols1,
// gate rows and up rows), kN2, kStages1, kStages2, kBand1, kBand2.

#include "experts.cuh"
#include "sm90.cuh"
#include "wgmma.cuh"

namespace moejit {
namespace prefill {

using namespace sm90;

inline constexpr int kBM = 128;  // tile rows (tokens): two warpgroups of 64
inline constexpr int kBK = 64;   // k a stage holds: one 128-byte swizzle row of 16-bit elements
inline constexpr int kThreads = 384;
inline constexpr int kGatherThreads = 256;

template <class C, int kGemm>
struct Shape {
  static constexpr int kK = kGemm == 1 ? C::kH : C::kI;           // the reduction
  static constexpr int kN = kGemm == 1 ? 2 * C::kCols1 : C::kN2;  // B rows a tile
  static constexpr int kNTiles = kGemm == 1 ? C::kI / C::kCols1 : C::kH / C::kN2;
  static constexpr int kStages = kGemm == 1 ? C::kStages1 : C::kStages2;
  static constexpr int kBand = kGemm == 1 ? C::kBand1 : C::kBand2;
  static constexpr int kKBlocks = kK / kBK;
  static constexpr int kABytes = kBM * kBK * 2;
  static constexpr int kBBytes = kN * kBK * 2;
  static constexpr int kStageBytes = kABytes + kBBytes;
  static_assert(kK % kBK == 0, "K in whole stages");
  static_assert(kN % 8 == 0 && kN <= 256, "a wgmma N");
  static_assert(kGemm == 2 || C::kCols1 % 8 == 0, "gate and up columns in whole n8 blocks");
  static_assert(kStageBytes % 1024 == 0, "stages on 1024-byte swizzle atoms");
};

/// A unit of work: N tile `n` of tile `tile` (its copy: expert, first row, rows).
struct Unit {
  ExpertsTile tile;
  int n;
};

/// Unit u: the tiles of an expert in bands of up to kBand (a band never holds two experts' tiles),
/// the N tile outer within a band, so that the CTAs running together share each weight tile and
/// the band's A tiles stay in L2. Band b of tiles [f, f + c) holds units [f kNTiles, (f + c) kNTiles).
template <class S>
__device__ __forceinline__ Unit unit_of(const ExpertsTile* tiles, int u, int tile_count) {
  const int t0 = u / S::kNTiles;
  const int first = tiles[t0].first;
  const int f = first + (t0 - first) / S::kBand * S::kBand;
  // c: the band's tiles, those of [f, f + kBand) whose expert's first tile is `first`
  int lo = t0 - f + 1, hi = min(S::kBand, tile_count - f);
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (tiles[f + mid - 1].first == first) lo = mid;
    else hi = mid - 1;
  }
  const int r = u - f * S::kNTiles;
  return {tiles[f + r % lo], r / lo};
}

template <class T>
__device__ __forceinline__ unsigned pack2(float lo, float hi) {
  T e[2] = {from_float<T>(lo), from_float<T>(hi)};
  unsigned out;
  memcpy(&out, e, 4);
  return out;
}

inline constexpr int kChunk = 64;                     // output columns a warp stages at a time: one 128-byte swizzle row
inline constexpr int kChunkBytes = 16 * kChunk * 2;   // a warp's 16 rows of them, 128-byte swizzled as a TMA store reads them
inline constexpr int kWarpStaging = 2 * kChunkBytes;  // two chunks: one written while the other's store reads it

/// Stores a warp's 16 rows x kCols columns at (row, col) of the output, 64 columns at a time,
/// through its two staging chunks (1024-byte aligned): a TMA store (`map`) of a chunk 64 columns
/// wide where all 16 rows are the tile's (`whole`), else 16-byte row stores (lane r < 16 holds
/// row r's first output column in row_dst: 0 for a row past the tile's). pair(j, half) is the
/// packed pair of columns 8 j + 2 q, + 1 of row lane / 4 + 8 half. Chunk c takes staging chunk
/// c % 2 and commits one bulk group (empty where it stored without TMA), so that the group before
/// last is the one that read it -- the last one where a tile has an odd number of chunks.
template <class T, int kCols, class Pair>
__device__ __forceinline__ void store_staged(unsigned char* buf, const TmaMap* map, int row, int col, bool whole,
                                             unsigned long long row_dst, int lane, Pair&& pair) {
  constexpr bool kOdd = (kCols + kChunk - 1) / kChunk % 2 == 1;
  // Opaque to the compiler: the staging addresses are derived here, each tile, not hoisted out of
  // the persistent loop into registers the epilogue's math needs (GELU's erfc spilled them).
  asm volatile("" : "+l"(buf));
  const int g = lane / 4, q = lane % 4;
#pragma unroll
  for (int c0 = 0; c0 < kCols; c0 += kChunk) {
    const int width = min(kChunk, kCols - c0), per_row = width / 8;
    unsigned char* chunk = buf + (c0 / kChunk % 2) * kChunkBytes;
    if (lane == 0) {
      if (kOdd && c0 == 0) asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
      else asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
    }
    __syncwarp();
    // The 128-byte swizzle: 16-byte unit j of row r at unit j ^ r % 8 (32 lanes on 32 banks). The
    // chunk being 1024-byte aligned, row g's unit j is at row_g ^ 16 j, row g + 8's 1024 bytes on.
    const unsigned row_g = smem_address(chunk) + g * 128 + (g << 4) + 4 * q;
#pragma unroll
    for (int j = 0; j < kChunk / 8; ++j) {
      if (j >= per_row) break;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        asm volatile("st.shared.b32 [%0], %1;" ::"r"((row_g + 1024 * half) ^ (j << 4)), "r"(pair(c0 / 8 + j, half)) : "memory");
      }
    }
    if (whole && width == kChunk) {
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the writes, to the TMA unit
      __syncwarp();
      if (lane == 0) tma_store(map, chunk, col + c0, row);
    } else {
      __syncwarp();
      for (int base = 0; base < 16 * per_row; base += 32) {
        const int v = base + lane, r = v < 16 * per_row ? v / per_row : 0, c16 = v - r * per_row;
        const unsigned long long dst = __shfl_sync(0xffffffffu, row_dst, r);
        if (v < 16 * per_row && dst) {
          *reinterpret_cast<uint4*>(reinterpret_cast<T*>(dst) + c0 + 8 * c16) =
              *reinterpret_cast<const uint4*>(chunk + r * 128 + (((c16 ^ r) & 7) << 4));
        }
      }
    }
    if (lane == 0) asm volatile("cp.async.bulk.commit_group;" ::: "memory");
  }
}

/// GEMM1's epilogue: h columns of tile unit (tile, n) from the warpgroup's accumulators.
template <class C, int kR>
__device__ __forceinline__ void store_h(const ExpertsPrefillArgs& a, const ExpertsTile& tile, int n, const float (&acc)[kR], int row0,
                                        int q, unsigned char* staging) {
  using T = typename C::T;
  T* h = static_cast<T*>(a.out);
  const T* bias = C::kBias ? static_cast<const T*>(a.bias) + static_cast<long long>(tile.expert) * 2 * C::kI : nullptr;
  if constexpr (!C::kInterleaved) {
    // accumulator columns c and kCols1 + c: gate and up of h column c
    const int lane = static_cast<int>(threadIdx.x) % 32, base = row0 - lane / 4, r = base + lane;  // lane < 16: row r of the warp's 16
    const unsigned long long dst =
        lane < 16 && r < tile.rows ? reinterpret_cast<unsigned long long>(h + static_cast<long long>(tile.row + r) * C::kI + n * C::kCols1) : 0;
    store_staged<T, C::kCols1>(staging, &a.c, tile.row + base, n * C::kCols1, base + 16 <= tile.rows, dst, lane, [&](int j, int half) {
      float v[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int c = 8 * j + 2 * q + i;
        float gate = acc[4 * j + 2 * half + i], up = acc[4 * (j + C::kCols1 / 8) + 2 * half + i];
        if constexpr (C::kBias) {
          gate = add(gate, to_float(bias[n * C::kCols1 + c]));
          up = add(up, to_float(bias[C::kI + n * C::kCols1 + c]));
        }
        v[i] = to_float(experts::activation_of<C>(round_to<T>(gate), round_to<T>(up)));
      }
      return pack2<T>(v[0], v[1]);
    });
  } else {
    // accumulator columns 2c, 2c + 1: gate and up of h column c (one element a lane: direct stores)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = row0 + 8 * half;
      if (r >= tile.rows) continue;
      T* out = h + static_cast<long long>(tile.row + r) * C::kI + n * C::kCols1;
#pragma unroll
      for (int j = 0; j < C::kCols1 / 4; ++j) {
        const int c = 4 * j + q;
        float gate = acc[4 * j + 2 * half], up = acc[4 * j + 2 * half + 1];
        if constexpr (C::kBias) {
          gate = add(gate, to_float(bias[2 * (n * C::kCols1 + c)]));
          up = add(up, to_float(bias[2 * (n * C::kCols1 + c) + 1]));
        }
        out[c] = experts::activation_of<C>(round_to<T>(gate), round_to<T>(up));
      }
    }
  }
}

/// GEMM2's epilogue: output columns of tile unit (tile, n), the bias and router weight applied.
template <class C, int kR>
__device__ __forceinline__ void store_o(const ExpertsPrefillArgs& a, const ExpertsTile& tile, int n, const float (&acc)[kR], int row0,
                                        int q, unsigned char* staging) {
  using T = typename C::T;
  T* o = static_cast<T*>(a.out);
  const T* bias = C::kBias ? static_cast<const T*>(a.bias) + static_cast<long long>(tile.expert) * C::kH + n * C::kN2 : nullptr;
  const int lane = static_cast<int>(threadIdx.x) % 32, base = row0 - lane / 4;
  // o's rows are in sorted order (the combine finds a pair's through position), y's are the tile's.
  unsigned long long dst = 0;  // lane < 16: row base + lane's first output column
  if (lane < 16 && base + lane < tile.rows) dst = reinterpret_cast<unsigned long long>(o + static_cast<long long>(tile.row + base + lane) * C::kH + n * C::kN2);
  float weight[2] = {1.0f, 1.0f};  // of rows row0 and row0 + 8
  if constexpr (!C::kMasked && !C::kWeightOnInput) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      if (row0 + 8 * half < tile.rows) weight[half] = a.topk_weights[a.sorted[tile.row + row0 + 8 * half]];
    }
  }
  store_staged<T, C::kN2>(staging, &a.c, tile.row + base, n * C::kN2, base + 16 <= tile.rows, dst, lane, [&](int j, int half) {
    float v[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      v[i] = acc[4 * j + 2 * half + i];
      if constexpr (C::kBias) v[i] = add(v[i], to_float(bias[8 * j + 2 * q + i]));
      if constexpr (!C::kMasked && !C::kWeightOnInput) v[i] = mul(v[i], weight[half]);
    }
    return pack2<T>(v[0], v[1]);
  });
}


/// Unit w's B box(es) of k block kb into b, completing on bar: GEMM1 the unit's gate rows then its
/// up rows (or the interleaved pairs), GEMM2 its N rows of w2.
template <class C, int kGemm>
__device__ __forceinline__ void load_b(unsigned char* b, const ExpertsPrefillArgs& a, unsigned long long* bar, const Unit& w, int kb) {
  if constexpr (kGemm == 2) {
    tma_load(b, &a.b, bar, kb * kBK, w.tile.expert * C::kH + w.n * C::kN2);
  } else if constexpr (C::kInterleaved) {
    tma_load(b, &a.b, bar, kb * kBK, w.tile.expert * 2 * C::kI + 2 * w.n * C::kCols1);
  } else {
    tma_load(b, &a.b, bar, kb * kBK, w.tile.expert * 2 * C::kI + w.n * C::kCols1);
    tma_load(b + C::kCols1 * 128, &a.b, bar, kb * kBK, w.tile.expert * 2 * C::kI + C::kI + w.n * C::kCols1);
  }
}

/// The next unit from the counter, or n = -1 past the last. Units go in order to whichever CTA
/// asks next: the CTAs running together hold consecutive units whatever each unit's length (a
/// static stride drifts apart on short tiles).
template <class S, int kGemm>
__device__ __forceinline__ Unit next_unit(const ExpertsPrefillArgs& a, int units, int tile_count) {
  const int u = atomicAdd(&a.tile_count[1 + kGemm], 1);
  if (u >= units) return Unit{{}, -1};
  return unit_of<S>(a.tiles, u, tile_count);
}

/// The producer where A is a 2-D tensor (x' where the router weight scales x, masked x, h): one
/// thread takes the units and loads each stage by TMA.
template <class C, int kGemm, class S>
__device__ __forceinline__ void produce_boxed(const ExpertsPrefillArgs& a, unsigned char* smem, unsigned long long* full,
                                              unsigned long long* empty, Unit* slot, int units, int tile_count) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(&a.a) : "memory");
  asm volatile("prefetch.tensormap [%0];" ::"l"(&a.b) : "memory");
  for (int it = 0;;) {  // it: stages filled
    const Unit w = next_unit<S, kGemm>(a, units, tile_count);
    if (w.n < 0) {  // the consumers' last slot: no unit
      const int s = it % S::kStages;
      barrier_wait(&empty[s], ((it / S::kStages) & 1) ^ 1);
      slot[s].n = -1;
      barrier_arrive(&full[s]);
      return;
    }
    for (int kb = 0; kb < S::kKBlocks; ++kb, ++it) {
      const int s = it % S::kStages;
      barrier_wait(&empty[s], ((it / S::kStages) & 1) ^ 1);
      if (kb == 0) slot[s] = w;  // released to the consumers by the arrive below
      unsigned char* stage = smem + s * S::kStageBytes;
      barrier_expect(&full[s], S::kStageBytes);
      tma_load(stage, &a.a, &full[s], kb * kBK, w.tile.row);
      load_b<C, kGemm>(stage + S::kABytes, a, &full[s], w, kb);
    }
  }
}

/// GEMM1's producer where A is x's rows themselves (the standard layout, no router weight on the
/// input): the whole warpgroup. Thread p copies 16-byte chunk p % 8 of each 128-byte stage row of
/// tile rows p / 8 + 16 i (i < 8: a warp's copies are 4 whole rows) with cp.async into the
/// 128-byte swizzle a TMA box would have, and arrives on the stage's full barrier once they land;
/// the barrier expects those 128 arrivals and thread 0's, which takes the units, hands each to the
/// warpgroup (a named barrier, two hand-off slots) and loads B by TMA. Rows past the tile's are
/// not copied: an output row reads only its own A row, and the epilogue stores none of those.
template <class C, class S>
__device__ __forceinline__ void produce_gathered(const ExpertsPrefillArgs& a, unsigned char* smem, unsigned long long* full,
                                                 unsigned long long* empty, Unit* slot, Unit* handoff, int units, int tile_count) {
  using T = typename C::T;
  const int p = static_cast<int>(threadIdx.x) % 128, chunk = p % 8, row0 = p / 8;
  if (p == 0) asm volatile("prefetch.tensormap [%0];" ::"l"(&a.b) : "memory");
  // The thread's first destination in a stage: row row0, its chunk swizzled by row0 % 8 (rows
  // 16 i further keep that swizzle: 16 i % 8 = 0).
  const unsigned offset = row0 * 128 + ((chunk ^ (row0 % 8)) << 4);
  for (int it = 0, round = 0;; ++round) {
    if (p == 0) handoff[round % 2] = next_unit<S, 1>(a, units, tile_count);
    named_barrier_sync(1, 128);  // also: every thread read the slot before thread 0 rewrites it next round
    const Unit w = handoff[round % 2];
    if (w.n < 0) {  // the consumers' last slot: no unit, and every expected arrival
      const int s = it % S::kStages;
      barrier_wait(&empty[s], ((it / S::kStages) & 1) ^ 1);
      if (p == 0) {
        slot[s].n = -1;
        barrier_arrive(&full[s]);
      }
      barrier_arrive(&full[s]);
      return;
    }
    int token[8];  // the tokens of the thread's rows; -1 past the tile's rows
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int r = row0 + 16 * i;
      token[i] = r < w.tile.rows ? a.sorted[w.tile.row + r] / C::kK : -1;
    }
    const T* x = static_cast<const T*>(a.x) + 8 * chunk;
    for (int kb = 0; kb < S::kKBlocks; ++kb, ++it) {
      const int s = it % S::kStages;
      barrier_wait(&empty[s], ((it / S::kStages) & 1) ^ 1);
      unsigned char* stage = smem + s * S::kStageBytes;
      if (p == 0) {
        if (kb == 0) slot[s] = w;  // released to the consumers by the arrive below
        barrier_expect(&full[s], S::kBBytes);
        load_b<C, 1>(stage + S::kABytes, a, &full[s], w, kb);
      }
      const unsigned dst = smem_address(stage) + offset;
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        if (token[i] >= 0) cp_async16(dst + 2048 * i, x + static_cast<long long>(token[i]) * C::kH + kb * kBK);
      }
      barrier_arrive_copies(&full[s]);
    }
  }
}

}  // namespace prefill

// ---- the metadata over many blocks (standard layout) -------------------------------------------
// experts_meta_kernel's work in three launches, so that a prefill call's sort is not one block's:
//   experts_count_kernel  block b counts its chunk of sort_chunk pairs by expert: block_counts[b][e]
//   experts_scan_kernel   one block: each expert's rows and start, the work list, and each block's
//                         first row an expert (block_counts[b][e], in place)
//   experts_rank_kernel   block b ranks its chunk's pairs from those rows, in pair order, as the
//                         single-block sort does: the same sorted order, position and work list.

/// Pass 1: an expert histogram of the block's chunk.
template <class C>
__global__ void __launch_bounds__(experts::kMetaThreads) experts_count_kernel(ExpertsMetaArgs a) {
  static_assert(experts::Checks<C>::ok);
  __shared__ int count[C::kE];
  dependent_launch_prologue();
  const int tid = threadIdx.x;
  for (int e = tid; e < C::kE; e += experts::kMetaThreads) count[e] = 0;
  __syncthreads();
  const long long pairs = a.tokens * C::kK, begin = static_cast<long long>(blockIdx.x) * a.sort_chunk;
  const long long end = min(pairs, begin + a.sort_chunk);
  for (long long p = begin + tid; p < end; p += experts::kMetaThreads) {
    const int e = experts::local_expert<C>(a, p);
    if (e >= 0) atomicAdd(&count[e], 1);
  }
  __syncthreads();
  for (int e = tid; e < C::kE; e += experts::kMetaThreads) a.block_counts[static_cast<long long>(blockIdx.x) * C::kE + e] = count[e];
}

/// Pass 2: one block of kMetaThreads.
template <class C>
__global__ void __launch_bounds__(experts::kMetaThreads) experts_scan_kernel(ExpertsMetaArgs a) {
  static_assert(experts::Checks<C>::ok);
  using namespace experts;
  __shared__ int start[C::kE + 1];
  __shared__ int tiles[C::kE + 1];
  __shared__ int warp_sums[32];
  dependent_launch_prologue();
  const int tid = threadIdx.x, n = a.tile_rows;
  const long long pairs = a.tokens * C::kK;
  const int blocks = static_cast<int>((pairs + a.sort_chunk - 1) / a.sort_chunk);
  // Each expert's blocks in block order: their exclusive sums (rows before, within the expert).
  for (int e = tid; e <= C::kE; e += kMetaThreads) {
    int run = 0;
    if (e < C::kE) {
      for (int b = 0; b < blocks; ++b) {
        int* c = a.block_counts + static_cast<long long>(b) * C::kE + e;
        const int here = *c;
        *c = run;
        run += here;
      }
    }
    start[e] = run;
  }
  __syncthreads();
  for (int e = tid; e < C::kE; e += kMetaThreads) tiles[e] = (start[e] + n - 1) / n;
  __syncthreads();
  block_exclusive_scan(tiles, C::kE, warp_sums);
  block_exclusive_scan(start, C::kE, warp_sums);
  for (int e = tid; e < C::kE; e += kMetaThreads) {
    for (int b = 0; b < blocks; ++b) a.block_counts[static_cast<long long>(b) * C::kE + e] += start[e];
    const int count = start[e + 1] - start[e];
    for (int j = 0, t = tiles[e]; j * n < count; ++j, ++t) a.tiles[t] = ExpertsTile{e, start[e] + j * n, min(n, count - j * n), tiles[e]};
  }
  if (tid == 0) {
    a.tile_count[0] = tiles[C::kE];
    a.tile_count[1] = start[C::kE];
    a.tile_count[2] = a.tile_count[3] = 0;
  }
}

/// Pass 3: the block's chunk in pair order, a warp at a time, each group of lanes with the same
/// expert taking consecutive rows (experts_meta_kernel's sort, from the block's own row offsets).
template <class C>
__global__ void __launch_bounds__(experts::kMetaThreads) experts_rank_kernel(ExpertsMetaArgs a) {
  static_assert(experts::Checks<C>::ok);
  using namespace experts;
  __shared__ int next[C::kE];
  dependent_launch_prologue();
  const int tid = threadIdx.x;
  for (int e = tid; e < C::kE; e += kMetaThreads) next[e] = a.block_counts[static_cast<long long>(blockIdx.x) * C::kE + e];
  __syncthreads();
  const long long pairs = a.tokens * C::kK, begin = static_cast<long long>(blockIdx.x) * a.sort_chunk;
  rank_pairs<C>(a, begin, min(pairs, begin + a.sort_chunk), next);
}

/// x' for the prefill GEMM1 where the router weight scales the input (standard layout; else GEMM1
/// gathers x's rows itself): a thread a 16-byte vector of a token's x, read once and written,
/// scaled, to each of its valid slots' sorted rows, grid-strided.
template <class C>
__global__ void __launch_bounds__(prefill::kGatherThreads) experts_gather_kernel(ExpertsGatherArgs a) {
  static_assert(experts::Checks<C>::ok);
  using T = typename C::T;
  constexpr int kVectors = C::kH / 8;
  dependent_launch_prologue();
  const long long total = a.tokens * kVectors;
  for (long long v = static_cast<long long>(blockIdx.x) * prefill::kGatherThreads + threadIdx.x; v < total;
       v += static_cast<long long>(gridDim.x) * prefill::kGatherThreads) {
    const long long t = v / kVectors, c = (v - t * kVectors) * 8;
    const uint4 x = *reinterpret_cast<const uint4*>(static_cast<const T*>(a.x) + t * C::kH + c);
#pragma unroll 4
    for (int k = 0; k < C::kK; ++k) {
      const long long row = a.position[t * C::kK + k];
      if (row < 0) continue;
      uint4 y = x;
      if constexpr (C::kWeightOnInput) {
        const float w = a.topk_weights[t * C::kK + k];
        y.x = wstream::scale_pair<T>(y.x, w), y.y = wstream::scale_pair<T>(y.y, w);
        y.z = wstream::scale_pair<T>(y.z, w), y.w = wstream::scale_pair<T>(y.w, w);
      }
      *reinterpret_cast<uint4*>(static_cast<T*>(a.out) + row * C::kH + c) = y;
    }
  }
}

/// The prefill GEMMs (kGemm 1 or 2). See the file's header.
template <class C, int kGemm>
__global__ void __launch_bounds__(prefill::kThreads, 1) experts_prefill_kernel(const __grid_constant__ ExpertsPrefillArgs a) {
  static_assert(experts::Checks<C>::ok);
  using namespace prefill;
  using S = Shape<C, kGemm>;
  using T = typename C::T;
  extern __shared__ unsigned char smem_raw[];
  // The swizzle atoms must sit on 1024-byte boundaries of the shared window.
  unsigned char* smem = smem_raw + ((1024 - (smem_address(smem_raw) & 1023)) & 1023);
  // After the ring: each consumer warp's epilogue staging (on swizzle atoms, as the ring's stages)
  unsigned char* staging = smem + S::kStages * S::kStageBytes;
  auto* full = reinterpret_cast<unsigned long long*>(staging + 8 * kWarpStaging);
  auto* empty = full + S::kStages;
  // The unit whose first k block a stage holds: the producer's hand-off to the consumers; then
  // the gathering producer's two hand-off slots within its warpgroup.
  auto* slot = reinterpret_cast<Unit*>(empty + S::kStages);
  auto* handoff = slot + S::kStages;
  static_assert(sizeof(Unit) == 20);
  // GEMM1 of the standard layout reads x's rows in place (produce_gathered) unless the router
  // weight scales them first (then x', from experts_gather_kernel, by TMA).
  constexpr bool kGatherA = kGemm == 1 && !C::kMasked && !C::kWeightOnInput;
  const int warpgroup = static_cast<int>(threadIdx.x) / 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S::kStages; ++s) {
      barrier_init(&full[s], kGatherA ? 1 + 128 : 1);
      barrier_init(&empty[s], 8);  // each consumer warp's first lane
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  wait_for_primary();  // the work list, and A (x, x' or h)
  const int tile_count = a.tile_count[0];
  const int units = tile_count * S::kNTiles;

  if (warpgroup == 2) {  // the producer
    registers_down<40>();
    if constexpr (kGatherA) {
      produce_gathered<C, S>(a, smem, full, empty, slot, handoff, units, tile_count);
    } else if (threadIdx.x == 256) {
      produce_boxed<C, kGemm, S>(a, smem, full, empty, slot, units, tile_count);
    }
  } else {  // the consumers: warpgroup 0 rows 0-63 of each tile, 1 rows 64-127
    registers_up<232>();
    const int lane = static_cast<int>(threadIdx.x) % 32, warp = (static_cast<int>(threadIdx.x) % 128) / 32;
    const int row0 = 64 * warpgroup + 16 * warp + lane / 4, q = lane % 4;
    float acc[S::kN / 2];
    int it = 0;
    for (;;) {
      // The unit, with the stage of its first k block.
      int s = it % S::kStages;
      barrier_wait(&full[s], (it / S::kStages) & 1);
      const Unit w = slot[s];
      if (w.n < 0) break;
      if (warpgroup == 1 && w.tile.rows <= 64) {  // no rows of its own: hand each stage back
        for (int kb = 0; kb < S::kKBlocks; ++kb, ++it) {
          s = it % S::kStages;
          if (kb > 0) barrier_wait(&full[s], (it / S::kStages) & 1);
          barrier_arrive_lane0(&empty[s], lane);
        }
        continue;
      }
      pin(acc);  // the last tile's epilogue reads before the first wgmma writes
      int held = s;
      for (int kb = 0; kb < S::kKBlocks; ++kb, ++it) {
        s = it % S::kStages;
        if (kb > 0) barrier_wait(&full[s], (it / S::kStages) & 1);
        const unsigned char* stage = smem + s * S::kStageBytes;
        const unsigned long long da = descriptor(stage + warpgroup * 64 * 128), db = descriptor(stage + S::kABytes);
        if constexpr (kGatherA) fence_proxy_async();  // A's cp.async writes, to the wgmmas (async proxy)
        wgmma_fence();
#pragma unroll
        for (int k = 0; k < kBK / 16; ++k) wgmma::Mma<T, S::kN>::run(acc, da + 2 * k, db + 2 * k, kb > 0 || k > 0);
        wgmma_commit();
        // One k block's wgmmas in flight while the next is issued (the tensor pipe never drains
        // between k blocks); the stage before is read once they are down to this one.
        wgmma_wait<1>();
        if (kb > 0) barrier_arrive_lane0(&empty[held], lane);
        held = s;
      }
      wgmma_wait<0>();
      pin(acc);
      barrier_arrive_lane0(&empty[held], lane);
      unsigned char* mine = staging + (4 * warpgroup + warp) * kWarpStaging;
      if constexpr (kGemm == 1) {
        store_h<C>(a, w.tile, w.n, acc, row0, q, mine);
      } else {
        store_o<C>(a, w.tile, w.n, acc, row0, q, mine);
      }
    }
    // The TMA stores done before the CTA (and its staging) goes.
    if (lane == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
  }
  launch_dependents();
}

}  // namespace moejit
