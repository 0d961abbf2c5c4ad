#pragma once
// The routing op's contract (templates/routing.cuh) and its kernel tiling.

#include <moejit/contract.hpp>

#include "spec/ops/routing.hpp"

#include <string_view>
#include <vector>

namespace moejit::detail {

/// The kernel tiling of a routing op (part of its contract).
struct RoutingTiling {
  int lanes = 32;           ///< warp kernel: lanes per token
  int warp_slots = 0;       ///< warp kernel: experts per lane (0: no warp kernel)
  int warp_vec = 1;         ///< warp kernel: experts per vector load (logits and bias)
  int warps_per_block = 4;  ///< warp kernel
  int group_slots = 1;      ///< groups per lane in the grouped selection
  int block_warps = 0;      ///< block kernel: warps per token (0: no block kernel)
  int block_slots = 0;      ///< block kernel: experts per thread per chunk
  int block_chunks = 0;
  /// A third warp kernel with lazy keys (templates/routing_select.cuh, routing::kLazyFor): a
  /// whole warp a token, 16 or more experts a lane, 5 <= top-k <= 16, vector loads.
  bool warp_lazy = false;
};
RoutingTiling routing_tiling(const RoutingSpec& s) noexcept;

/// Kernel roles of a routing contract, as many as its tiling has: the warp kernel with vector
/// loads (aligned pointers) and element by element, the block kernel, the lazy-keys warp kernel.
inline constexpr std::string_view kRoutingWarpVectors = "warp_vectors";
inline constexpr std::string_view kRoutingWarpElements = "warp_elements";
inline constexpr std::string_view kRoutingBlock = "block";
inline constexpr std::string_view kRoutingWarpLazy = "warp_lazy";

std::vector<Contract> routing_contracts(const OpSpec& op, std::string_view arch);

}  // namespace moejit::detail
