#pragma once
// The latent tail's contract (templates/latent_tail.cuh).

#include <moejit/contract.hpp>

#include "spec/ops/latent_tail.hpp"

#include <string_view>
#include <vector>

namespace moejit::detail {

/// Kernel roles of a latent-tail contract: RMSNorm (and the fused path's reduce), the up
/// projection, and for tp > 1 the fused path's exchange, the base path's gather and permute.
inline constexpr std::string_view kTailNorm = "norm";
inline constexpr std::string_view kTailUpProj = "upproj";
inline constexpr std::string_view kTailExchange = "exchange";
inline constexpr std::string_view kTailGather = "gather";
inline constexpr std::string_view kTailPermute = "permute";

std::vector<Contract> latent_tail_contracts(const OpSpec& op, std::string_view arch);

}  // namespace moejit::detail
