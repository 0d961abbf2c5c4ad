#pragma once
// The latent tail's path per call: what the spec allows and asks for, and the faster path measured
// per (tp, tokens) in runtime/latent_tail_paths.json. Kernel-free, so a CPU test checks it.

#include <moejit/latent_moe.hpp>

#include "spec/ops/latent_tail.hpp"

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace moejit::detail {

/// One entry of runtime/latent_tail_paths.json: it applies from `tokens` up to the next entry's.
struct TailMeasurement {
  std::int64_t tokens = 0;
  LatentMoE::Path best = LatentMoE::Path::fused;       ///< the fastest path where fused is possible
  LatentMoE::Path base = LatentMoE::Path::base_full;   ///< the fastest base variant
};

/// The entries of `json` (latent_tail_paths.json's form) for `tp`, by ascending token count.
std::vector<TailMeasurement> tail_measurements(std::string_view json, int tp);

/// The path a call of `tokens` tokens takes.
LatentMoE::Path choose_tail_path(const LatentTailSpec& spec, std::span<const TailMeasurement> measured,
                                 std::int64_t tokens) noexcept;

}  // namespace moejit::detail
