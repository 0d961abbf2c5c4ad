#pragma once
// The experts op's contract (templates/experts.cuh) and its tiling.

#include <moejit/contract.hpp>

#include "spec/ops/experts.hpp"

#include <string_view>
#include <vector>

namespace moejit::detail {

/// The experts kernels' tiling (part of the contract). Rows a GEMM tile holds (its N: 8 or 32,
/// picked per call) are not: both sizes are compiled.
struct ExpertsTiling {
  int groups1 = 4;  ///< GEMM1: warps of 16 w13 rows (8 h columns) a CTA
  int split1 = 1;   ///< GEMM1: warps splitting H
  int groups2 = 4;  ///< GEMM2: warps of 16 w2 rows (16 output columns) a CTA
  int split2 = 1;   ///< GEMM2: warps splitting I
};
ExpertsTiling experts_tiling(const ExpertsSpec& s) noexcept;

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
inline constexpr int kExpertsMetaThreads = 1024;
inline constexpr int kExpertsCombineThreads = 256;

std::vector<Contract> experts_contracts(const OpSpec& op, std::string_view arch);

}  // namespace moejit::detail
