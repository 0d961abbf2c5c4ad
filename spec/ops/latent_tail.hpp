#pragma once
// The `latent_tail` op: the tail of a latent-MoE layer (numerics.md "latent_tail"): all-reduce
// of the TP-partial routed latent output, RMSNorm, up projection L -> H with the shared-expert
// output added. A NCCL base path for any tp and a fused peer-buffer path for tp 2/4/8.

#include <moejit/spec.hpp>

#include <cstdint>
#include <memory>
#include <string_view>

namespace moejit {

namespace detail {
class SpecReader;
}

enum class TailPath { automatic, base, fused };
enum class TailBaseVariant { automatic, full, striped };

std::string_view to_string(TailPath p) noexcept;
std::string_view to_string(TailBaseVariant v) noexcept;

/// The fused path's limits: ranks it runs on and tokens per call.
inline constexpr int kFusedMaxTokens = 64;
inline constexpr int kTailMaxTp = 8;
/// The largest latent width: the norm kernel keeps a token's bf16 row (2L bytes) and 33 floats
/// of its reduction in static shared memory, which a kernel may hold up to 48 KB of.
inline constexpr int kTailMaxLatent = (48 * 1024 - 33 * 4) / 2 / 64 * 64;  // 24448

struct LatentTailSpec final : OpSpec {
  int tp_size = 1;
  int hidden = 0;              ///< H
  int latent = 0;              ///< L
  float eps = 1e-5f;
  bool shared_expert = true;
  std::int64_t max_tokens_ = 64;
  TailPath path = TailPath::automatic;
  TailBaseVariant base_variant = TailBaseVariant::automatic;
  int peer_timeout_ms = 10000;

  std::string_view family() const noexcept override { return "latent_tail"; }
  std::string canonical_json() const override;
  /// One rank's tensors.
  std::vector<TensorDecl> tensors() const override;
  std::int64_t max_tokens() const noexcept override { return max_tokens_; }
  int ranks() const noexcept override { return tp_size; }

  /// The fused path exists for tp 2, 4 and 8 when H splits into 64-row tiles per rank.
  bool fused_possible() const noexcept;
  bool striped_possible() const noexcept;
  /// Tokens the fused path's peer slots hold.
  int slot_tokens() const noexcept;
  /// Elements (bf16) of one rank's peer-buffer allocation.
  std::int64_t peer_elements() const noexcept;
};

std::shared_ptr<OpSpec> parse_latent_tail(detail::SpecReader& reader);

}  // namespace moejit
