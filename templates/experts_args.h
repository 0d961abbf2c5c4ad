#pragma once
// The experts kernels' arguments, shared by the host launcher (runtime/experts_op.cpp) and the
// template: plain data only, so both compilers lay them out alike.

namespace moejit {

/// One unit of GEMM work: up to the GEMM's tile rows of one expert, rows [row, row + rows) of
/// the sorted order (standard layout) or of the expert's block of rows (masked).
struct ExpertsTile {
  int expert;
  int row;
  int rows;
  int unused;
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
  int* tile_count;           // [1]
};

struct ExpertsGemmArgs {
  const void* x;             // GEMM1: x; GEMM2: h (the workspace GEMM1 wrote)
  const void* w;             // w13 or w2
  const void* bias;          // b13 or b2; null without biases
  const float* topk_weights; // standard: [T, K]
  const int* sorted;         // standard: the pair of each sorted row
  const ExpertsTile* tiles;
  const int* tile_count;
  void* out;                 // GEMM1: h; GEMM2: o [T K, H] (standard) or y (masked)
  long long tokens;          // T (masked: T_max)
};

struct ExpertsCombineArgs {
  const void* o;             // [T K, H] per (token, slot)
  const int* position;       // [T K] -1 for invalid slots
  void* y;                   // [T, H]
  long long tokens;
};

}  // namespace moejit
