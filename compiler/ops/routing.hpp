#pragma once
// The `routing` op: router logits -> top-K expert ids and weights (numerics.md "routing").

#include <moejit/spec.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

namespace moejit {

namespace detail {
class SpecReader;
}

enum class RoutingScoring { softmax, sigmoid, sqrt_softplus, none };
enum class GroupScoreKind { top2_sum, max };
enum class SingleGroupKernel { automatic, block, warp };

std::string_view to_string(RoutingScoring s) noexcept;
std::string_view to_string(GroupScoreKind g) noexcept;
std::string_view to_string(SingleGroupKernel k) noexcept;

/// The largest top-k a routing contract accepts.
inline constexpr int kMaxTopK = 64;
/// Grouped selection keeps a token's keys in one warp's registers: 32 lanes x 32 slots.
inline constexpr int kMaxGroupedExperts = 1024;

struct RoutingSpec final : OpSpec {
  int num_experts = 0;
  int topk = 0;
  int n_group = 1;
  int topk_group = 1;
  GroupScoreKind group_score = GroupScoreKind::top2_sum;
  RoutingScoring scoring = RoutingScoring::sigmoid;
  std::optional<DType> bias;  ///< correction bias dtype; none when empty
  bool renormalize = false;
  float routed_scaling_factor = 1.0f;
  DType logits_dtype = DType::f32;
  DType ids_dtype = DType::i32;
  SingleGroupKernel single_group_kernel = SingleGroupKernel::automatic;

  std::string_view family() const noexcept override { return "routing"; }
  std::string canonical_json() const override;
  std::vector<Contract> contracts(std::string_view arch) const override;
  std::vector<TensorDecl> tensors() const override;

  /// Grouped selection matters only when some groups are dropped (TG < G); otherwise the op is
  /// plain top-K over all experts and takes the single-group kernels.
  bool grouped() const noexcept { return n_group > 1 && topk_group < n_group; }
  /// The kernel tiling of this op (part of the contract).
  struct Tiling {
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
  Tiling tiling() const noexcept;
  /// The block kernel's rank-tree selection (one expert per thread) serves these sizes.
  static constexpr int kRankTreeMaxExperts = 512;
  static constexpr int kRankTreeMaxK = 32;
  bool has_warp_kernel() const noexcept { return tiling().warp_slots > 0; }
  bool has_block_kernel() const noexcept { return tiling().block_warps > 0; }
};

std::shared_ptr<OpSpec> parse_routing(detail::SpecReader& reader);

}  // namespace moejit
