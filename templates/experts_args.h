#pragma once
// The experts kernels' arguments, shared by the host launcher (runtime/experts_op.cpp) and the
// template: plain data only, so both compilers lay them out alike.

#include "tma_map.h"

namespace moejit {

/// One unit of GEMM work: up to the GEMM's tile rows of one expert, rows [row, row + rows) of
/// the sorted order (standard layout) or of the expert's block of rows (masked).
struct ExpertsTile {
  int expert;
  int row;
  int rows;
  int first;  // the index of the expert's first tile in the work list
};

struct ExpertsMetaArgs {
  const void* ids;           // standard: topk_ids [T, K]
  const int* expert_map;     // standard with global experts: [E_global]; else null
  const int* counts;         // masked: expert_num_tokens [E]
  long long tokens;          // T (masked: T_max)
  int tile_rows;             // rows a tile of the GEMMs launched next holds
  int* sorted;               // standard: [T K] the (token, slot) pair of each sorted row
  int* position;             // standard: [T K] the sorted row of each pair, -1 when invalid
  ExpertsTile* tiles;        // the GEMMs' work list
  int* tile_count;           // [4]: the tiles, the valid (sorted) rows, then the prefill GEMMs' unit
                             // counters (GEMM1's, GEMM2's), which it zeroes
  int* block_counts;         // the sort over many blocks (prefill): [blocks][E] counts, then row offsets
  int sort_chunk;            // pairs a block of that sort takes
};

/// The one-token GEMM2 stash's row stride for rows of `chunk` bytes (experts.cuh's Stash; the host
/// sizes the stash by it): 64 bytes mod 128, so that the two rows a quarter-warp reads fall in
/// different banks.
constexpr int experts_stash_stride(int chunk) { return chunk % 128 == 0 ? chunk + 64 : chunk; }

struct ExpertsGemmArgs {
  const void* x;             // GEMM1: x; GEMM2: h (the workspace GEMM1 wrote)
  const void* w;             // w13 or w2
  const void* bias;          // b13 or b2; null without biases
  const float* topk_weights; // standard: [T, K]
  const int* sorted;         // standard: the pair of each sorted row
  const ExpertsTile* tiles;
  const int* tile_count;
  void* out;                 // GEMM1: h; GEMM2: o [sorted row, H] (standard) or y (masked); one
                             // token: h [slot, I], then y
  long long tokens;          // T (masked: T_max)
  const void* ids;           // one token (no metadata): topk_ids, each slot's expert; else null
  const int* expert_map;     // one token with global experts: [E_global]; else null
  int stash_regions;         // one token's GEMM2: the regions of shared memory it stashes slots'
                             // weights in, the first before h is ready (experts.cuh's Stash); else 0
};


/// The prefill GEMMs (experts_prefill.cuh): A and B through TMA, the rest as ExpertsGemmArgs.
struct ExpertsPrefillArgs {
  TmaMap a;           // GEMM1: x' [rows, H] (masked: x [E T_max, H]; unused where x is gathered); GEMM2: h [rows, I]
  TmaMap b;           // GEMM1: w13 [E 2I, H]; GEMM2: w2 [E H, I]
  TmaMap c;           // out, stored through TMA in boxes of 16 rows x 64 columns
  const void* bias;
  const float* topk_weights;
  const int* sorted;
  const ExpertsTile* tiles;
  int* tile_count;           // [4]: see ExpertsMetaArgs; [2 + GEMM - 1] hands out units
  void* out;                 // GEMM1: h [rows, I]; GEMM2: o [rows, H] (standard) or y [E T_max, H] (masked)
  long long tokens;
  const void* x;             // GEMM1 of the standard layout without the weight on the input: x [T, H],
                             // its rows gathered by the producer (null elsewhere)
};

/// x' [rows, H]: x's row of each sorted (token, slot) pair times its router weight, where the
/// weight applies on the input; the prefill GEMM1 reads it through TMA.
struct ExpertsGatherArgs {
  const void* x;             // [T, H]
  const float* topk_weights;
  const int* position;       // [T K] each pair's sorted row, -1 for invalid slots
  void* out;                 // x' [sorted row, H]
  long long tokens;
};

struct ExpertsCombineArgs {
  const void* o;             // [sorted row, H]
  const int* position;       // [T K] -1 for invalid slots
  void* y;                   // [T, H]
  long long tokens;
};

}  // namespace moejit
