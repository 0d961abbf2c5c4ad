#pragma once
// The `experts` op: a MoE layer's routed experts (numerics.md "experts") -- GEMM1 with the gated
// activation, GEMM2 with the router weight, and the combine of each token's slots -- in the
// standard layout (tokens routed by topk_ids) or the masked one (rows already grouped by expert,
// as expert-parallel dispatch leaves them).

#include <moejit/spec.hpp>

#include "activation.hpp"

#include <array>
#include <cstdint>
#include <memory>
#include <string_view>

namespace moejit {

namespace detail {
class SpecReader;
}

enum class ExpertsLayout { standard, masked };
std::string_view to_string(ExpertsLayout layout) noexcept;

/// Tile choices a spec may force on the experts kernels in place of the compiler's model and its
/// measured data (compiler/ops/experts.cpp), for tuning and inspection; 0 leaves a field to the
/// compiler. They are contract fields: each choice is its own cache entry. The ranges are what the
/// templates take (templates/experts.cuh's and experts_prefill.cuh's checks).
struct ExpertsTiles {
  static constexpr int kMaxWarps = 16;     ///< groups x split: a decode GEMM CTA of at most 512 threads
  static constexpr int kMaxRing = 16;      ///< k blocks in flight a warp
  /// The wgmma N a prefill tile may take (templates/wgmma.cuh's shapes): GEMM2's n2, GEMM1's 2 cols1.
  static constexpr std::array<int, 7> kWgmmaN = {16, 32, 64, 128, 192, 240, 256};
  static constexpr bool wgmma_n(std::int64_t n) noexcept {
    for (int v : kWgmmaN) {
      if (v == n) return true;
    }
    return false;
  }
  static constexpr int kMaxBand = 1 << 16;
  int groups1 = 0, split1 = 0;  ///< decode GEMM1: row groups (8 h columns each) and K-split warps a CTA; set together
  int groups2 = 0, split2 = 0;  ///< decode GEMM2: row groups (16 output columns each) and K-split warps; set together
  int ring1 = 0, ring2 = 0, ring_one = 0;  ///< k blocks in flight a warp: GEMM1, GEMM2, the one-token GEMM1
  int cols1 = 0, n2 = 0;                   ///< prefill (sm_90a): h columns a GEMM1 tile, output columns a GEMM2 tile
  int band1 = 0, band2 = 0;                ///< prefill: tiles of an expert a band sweeps N tile by N tile
  bool any() const noexcept;
};

struct ExpertsSpec final : OpSpec {
  /// What the kernels hold: hidden and intermediate widths in whole 64-element tiles, local
  /// experts counted in shared memory, (token, slot) pairs indexed in 32 bits.
  static constexpr int kWidthMultiple = 64;
  static constexpr int kMaxWidth = 1 << 16;
  static constexpr int kMaxExperts = 4096;
  static constexpr int kMaxGlobalExperts = 1 << 16;
  static constexpr int kMaxTopK = 64;
  static constexpr std::int64_t kMaxPairs = std::int64_t{1} << 24;

  int hidden = 0;        ///< H
  int intermediate = 0;  ///< I (per tensor-parallel rank)
  int num_experts = 0;   ///< E on this rank
  int topk = 0;          ///< K
  ActivationParams activation;
  DType dtype = DType::bf16;  ///< x, weights, biases, y
  DType ids_dtype = DType::i32;
  ExpertsLayout layout = ExpertsLayout::standard;
  bool weight_on_input = false;  ///< apply_router_weight_on_input
  bool bias = false;             ///< per-expert biases b13 [E, 2I], b2 [E, H]
  int global_experts = 0;        ///< E_global with an expert_map [E_global]; 0: ids are local
  std::int64_t max_tokens_ = 4096;  ///< T (masked: T_max) the workspace is sized for
  ExpertsTiles tiles;               ///< forced tile choices (spec field `tiles`); none by default

  std::string_view family() const noexcept override { return "experts"; }
  std::string canonical_json() const override;
  std::vector<TensorDecl> tensors() const override;
  std::int64_t max_tokens() const noexcept override { return max_tokens_; }

  bool masked() const noexcept { return layout == ExpertsLayout::masked; }
  /// Ids are taken from [0, id_range()): E_global with an expert map, else E.
  int id_range() const noexcept { return global_experts > 0 ? global_experts : num_experts; }
  /// Bytes of one expert's weights (w13 and w2, and its biases).
  std::int64_t expert_bytes() const noexcept;
};

std::shared_ptr<OpSpec> parse_experts(detail::SpecReader& reader);

}  // namespace moejit
