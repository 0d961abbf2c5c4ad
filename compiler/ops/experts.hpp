#pragma once
// The experts op's contract (templates/experts.cuh) and its tiling.

#include <moejit/contract.hpp>

#include "spec/ops/experts.hpp"

#include <nlohmann/json_fwd.hpp>

#include <string_view>
#include <vector>

namespace moejit::detail {

/// The experts kernels' tiling (part of the contract): the model's, the measured data's for the
/// shape, and last what the spec forces (ExpertsSpec::tiles). Rows a GEMM tile holds (its N: 8 or
/// 32, picked per call) are not: both sizes are compiled.
struct ExpertsTiling {
  int groups1 = 4;  ///< GEMM1: warps of 16 w13 rows (8 h columns) a CTA
  int split1 = 1;   ///< GEMM1: warps splitting H
  int groups2 = 4;  ///< GEMM2: warps of 16 w2 rows (16 output columns) a CTA
  int split2 = 1;   ///< GEMM2: warps splitting I
  // Measured: compiler/ops/experts_rings.json.
  int ring1 = 0;     ///< GEMM1: k blocks in flight a warp, where its tiles take one n8 block of rows
  int ring2 = 0;     ///< GEMM2: the same (and the one-token GEMM2's slots it does not stash)
  int ring_one = 0;  ///< the one-token GEMM1 (CTAs of one row group): k blocks in flight a warp
};
ExpertsTiling experts_tiling(const ExpertsSpec& s);
/// compiler/ops/experts_rings.json, embedded: the measured ring depths experts_tiling() reads.
std::string_view experts_rings_json();
/// compiler/ops/experts_prefill_tiles.json: the prefill tiles' measured overrides.
std::string_view experts_prefill_tiles_json();

/// The prefill GEMMs' tiling (templates/experts_prefill.cuh; sm_90a only): tiles of 128 rows,
/// GEMM1's N = 2 cols1 (gate and up rows), GEMM2's n2; stages of 64 k in shared memory; bands
/// of tiles a persistent CTA sweeps N tile by N tile. The model's tiles, or an entry of
/// compiler/ops/experts_prefill_tiles.json for the shape (measured faster), or what the spec
/// forces. `ok` is false where no wgmma N divides the shape (the decode kernels then take every
/// call).
struct ExpertsPrefillTiling {
  bool ok = false;
  int cols1 = 0, n2 = 0;
  int stages1 = 0, stages2 = 0;
  int band1 = 0, band2 = 0;
  /// Dynamic shared memory a prefill GEMM CTA takes (its ring, its barriers, 1 KB for alignment).
  int shared_bytes(int gemm) const noexcept;
};
ExpertsPrefillTiling experts_prefill_tiling(const ExpertsSpec& s, std::string_view arch);
/// The same with `overrides` in the place of the shipped experts_prefill_tiles.json (tests).
ExpertsPrefillTiling experts_prefill_tiling(const ExpertsSpec& s, std::string_view arch, const nlohmann::json& overrides);
inline constexpr int kExpertsPrefillRows = 128;
inline constexpr int kExpertsPrefillThreads = 384;
inline constexpr int kExpertsPrefillStoreRows = 16;  ///< rows a TMA store of the epilogue writes (a warp's)
/// The consumer warps' epilogue staging: 8 warps x two chunks of 16 rows x 64 columns, 2 bytes
/// each (experts_prefill.cuh's kWarpStaging).
inline constexpr int kExpertsPrefillStaging = 8 * 2 * 16 * 64 * 2;
inline constexpr int kExpertsGatherThreads = 256;

/// The columns a row group of the decode GEMMs computes (experts.cuh): GEMM1's h columns, GEMM2's
/// output columns; a CTA holds groups1 or groups2 of them.
inline constexpr int kExpertsGemm1Columns = 8;
inline constexpr int kExpertsGemm2Columns = 16;

/// Tile rows of the two compiled GEMM sizes; a call takes the small one while the rows an
/// active expert holds on average fit it.
inline constexpr int kExpertsSmallTile = 8;
inline constexpr int kExpertsLargeTile = 32;

/// Kernel roles.
inline constexpr std::string_view kExpertsMeta = "meta";
inline constexpr std::string_view kExpertsGemm1Small = "gemm1_n8";
inline constexpr std::string_view kExpertsGemm1Large = "gemm1_n32";
inline constexpr std::string_view kExpertsGemm2Small = "gemm2_n8";
inline constexpr std::string_view kExpertsGemm2Large = "gemm2_n32";
inline constexpr std::string_view kExpertsCombine = "combine";
inline constexpr std::string_view kExpertsGemm1One = "gemm1_one";  ///< one token (standard layout): no metadata
inline constexpr std::string_view kExpertsGemm2One = "gemm2_one";  ///< one token: GEMM2 and the combine
inline constexpr std::string_view kExpertsGather = "gather";
inline constexpr std::string_view kExpertsCount = "count";  ///< the sort over many blocks (prefill, standard)
inline constexpr std::string_view kExpertsScan = "scan";
inline constexpr std::string_view kExpertsRank = "rank";
/// Pairs a block of that sort takes.
inline constexpr int kExpertsSortChunk = 4096;
inline constexpr std::string_view kExpertsPrefill1 = "gemm1_wgmma";
inline constexpr std::string_view kExpertsPrefill2 = "gemm2_wgmma";
inline constexpr int kExpertsMetaThreads = 1024;
inline constexpr int kExpertsCombineThreads = 256;
/// Threads of the one-token GEMM2's CTA (experts.cuh's one_token_warps), which takes 16 output columns.
int experts_one_token_threads(const ExpertsSpec& s, const ExpertsTiling& t) noexcept;
inline constexpr int kExpertsOneTokenColumns = 16;

/// The SMs a one-token GEMM2 lands on.
struct OneTokenResidency {
  int sm_count = 0;
  int shared_per_sm = 0;     ///< bytes an SM has for its CTAs' shared memory
  int shared_per_block = 0;  ///< the opt-in maximum a CTA may take, static included
  int gemm2_static = 0;      ///< the one-token GEMM2's static shared memory
};
/// Shared memory the driver reserves for each resident CTA (sm_80 and later).
inline constexpr int kReservedSharedPerBlock = 1024;
/// The regions of shared memory the one-token GEMM2 stashes w2 rows in before h is ready, a slot's
/// rows (and h row) each (templates/experts.cuh's Stash): as many as fit when the SMs hold the whole
/// grid at once (its CTAs take the SMs GEMM1 leaves: an SM changes its shared-memory carveout only
/// once idle), at most topk; 0 (the register ring) where a region would serve more than two slots,
/// and for the masked layout.
int experts_one_token_stash_regions(const ExpertsSpec& s, const ExpertsTiling& t, const OneTokenResidency& r) noexcept;
/// The dynamic shared memory of a one-token GEMM2 with `regions` regions.
std::int64_t experts_one_token_stash_bytes(const ExpertsSpec& s, const ExpertsTiling& t, int regions) noexcept;

/// The decode contract (metadata, streamer GEMMs, combine) and, on sm_90a where the shape allows,
/// the prefill contract (gather, wgmma GEMMs): two compilations, run side by side at warmup.
std::vector<Contract> experts_contracts(const OpSpec& op, std::string_view arch);

}  // namespace moejit::detail
