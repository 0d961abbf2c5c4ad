#pragma once
// Arguments of the latent-MoE tail kernels, shared by the host (runtime/latent_moe.cpp) and the
// template. Plain data only.

#include "tma_map.h"

namespace moejit {

inline constexpr int kTailMaxRanks = 8;
/// Threads of a CTA of the norm, exchange, gather and permute kernels.
inline constexpr int kTailThreads = 256;

// The up projection's sm_90a kernel (tail_upproj_tc_kernel): CTAs of `rows` W rows (a multiple
// of 8, at most wgmma's 64; the contract's tc_rows), two consumer warpgroups splitting L (each
// its own ring of stages: the CTA's W rows and the tile's tokens, 64 k), a producer warp issuing
// the TMA loads and a warp loading the epilogue's S.
inline constexpr int kTailTcMaxRows = 64;
inline constexpr int kTailTcSplit = 2;
inline constexpr int kTailTcThreads = 32 * 4 * kTailTcSplit + 64;
/// Floats a token of a warp's [token][16 rows] partial-sum tile (16 rows padded: tail::kTileStride).
inline constexpr int kTailTileStride = 20;
/// Where warp tile w of `tokens` tokens starts among the partial sums (floats): the tiles 16 floats
/// apart past their size, and pairs 2-3 mod 4 four more, so that the epilogue's 16-byte reads of a
/// quarter warp (its token's halves of up to four groups' tiles) land on distinct banks (a tile
/// being a multiple of 32 floats, they would all share them).
constexpr int tail_tile_at(int tokens, int w) { return w * (tokens * kTailTileStride + 16) + 4 * ((w >> 1) & 1); }
/// Floats of `n` warp tiles laid out by tail_tile_at.
constexpr int tail_tiles_floats(int tokens, int n) { return tail_tile_at(tokens, n - 1) + tokens * kTailTileStride; }
/// Whether a quarter warp's eight 16-byte reads in the epilogue (one token; groups g0..g0+3 of
/// split sp; halves 0 and 1) fall on eight distinct 16-byte bank groups, for every split and token.
constexpr bool tail_tiles_conflict_free(int tokens, int groups, int splits) {
  for (int sp = 0; sp < splits; ++sp)
    for (int g0 = 0; g0 + 4 <= groups; g0 += 4)
      for (int tt = 0; tt < tokens; ++tt) {
        unsigned seen = 0;
        for (int i = 0; i < 8; ++i) {
          const int unit = (tail_tile_at(tokens, sp * groups + g0 + i / 2) + tt * kTailTileStride + 8 * (i % 2)) / 4 % 8;
          if (seen & (1u << unit)) return false;
          seen |= 1u << unit;
        }
      }
  return true;
}
static_assert(tail_tiles_conflict_free(16, 4, kTailTcSplit) && tail_tiles_conflict_free(32, 4, kTailTcSplit) &&
                  tail_tiles_conflict_free(64, 4, kTailTcSplit),
              "the tensor-core kernel's epilogue reads without bank conflicts");
/// Stages a warpgroup's ring holds at a token tile: as many as 200 KB of shared memory take, at most 8.
constexpr int tail_tc_stages(int tokens, int rows) {
  const int n = 200 * 1024 / (kTailTcSplit * (rows + tokens) * 128);
  return n < 8 ? n : 8;
}
/// Dynamic shared memory of the kernel at a token tile: the rings (the epilogue's partial sums
/// reuse them), the tile's S (bf16), the rings' full and empty barriers and S's, and 1 KB to
/// align the swizzle atoms.
constexpr int tail_tc_shared_bytes(int tokens, int rows) {
  const int ring = kTailTcSplit * tail_tc_stages(tokens, rows) * (rows + tokens) * 128;
  const int sums = tail_tiles_floats(tokens, kTailTcSplit * 4) * 4;
  return (ring > sums ? ring : sums) + tokens * rows * 2 + (2 * kTailTcSplit * tail_tc_stages(tokens, rows) + 1) * 8 + 1024;
}

/// Where a rank's peer buffers live: the same layout in every rank's allocation.
///   routed slots [3 phases][tp][max tokens][L] bf16, shared slots [3][tp][max tokens][H/tp]
///   bf16, out slots [3][max tokens][H] bf16; an empty slot holds -0.0.
struct TailPeers {
  void* base[kTailMaxRanks];  // each rank's allocation, as this rank addresses it
};

/// The exchange + RMSNorm kernel (fused path) and the norm kernel (base path).
struct TailNormArgs {
  TailPeers peers;
  void* self;             // fused: this rank's own allocation (peers.base[rank])
  const void* routed;     // fused: this rank's partial [T, L]; base: all-gathered partials [tp, T, L]
  const void* shared;     // fused: this rank's shared partial [T, H] (null without shared experts)
  const void* gamma;      // [L]
  void* latent_sum;       // [T, L] bf16: the reduced routed latent R
  void* latent_norm;      // [T, L] bf16: z
  float* shared_sum;      // fused: [T, H/tp] fp32, the rank-order sum of this rank's shard
  const int* phase;       // fused: this rank's phase counter (0..2)
  int* error;             // fused: host-mapped flag, set when a peer did not arrive in time
  long long tokens;
  long long routed_rank_stride;  // base: elements between ranks' partials
  unsigned long long timeout_ns;
  int rank;
  int pad_;
};

/// The up projection out = bf16(z W^T + S) over rows [row0, row0 + rows) of W.
struct TailUpArgs {
  TailPeers peers;
  const void* z;            // [T, L] bf16
  const void* w;            // [H, L] bf16
  const void* shared_parts; // base: [ranks, T, H] bf16 partials summed in rank order; or null
  const float* shared_sum;  // fused: [T, rows] fp32; or null
  void* out;                // direct output [T, out_ld] from W row row0 on, or null to push into every rank's out slots
  const int* phase;         // push mode: this rank's phase counter
  long long tokens;
  long long shared_rank_stride;  // base: elements between ranks' shared partials
  long long out_ld;         // direct: elements between rows of out
  int row0;
  int rows;
  int ranks;                // shared partials to sum (base)
  int prefetch_bytes;       // streamer: how far ahead of its loads a warp asks its W rows into L2 (bytes); 0: never
};

/// The up projection's sm_90a kernel: TailUpArgs and the TMA descriptors of W and z.
struct TailUpTcArgs {
  TmaMap w;                 // W [H, L]: boxes of tc_rows rows x 64 k
  TmaMap z;                 // z [max tokens, L]: boxes of the kernel's token tile x 64 k
  TailUpArgs u;
};

/// The consumer of the fused path: assembles [T, H] from the out slots.
struct TailGatherArgs {
  void* self;               // this rank's allocation
  void* out;                // [T, H] bf16, the caller's buffer
  int* phase;
  unsigned* done;           // blocks finished; the last one advances the phase
  int* error;
  long long tokens;
  unsigned long long timeout_ns;
  int rank;
  int pad_;
};

/// Striped base path: [tp, T, H/tp] slices -> [T, H].
struct TailPermuteArgs {
  const void* slices;
  void* out;
  long long tokens;
};

}  // namespace moejit
