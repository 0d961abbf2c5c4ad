#pragma once
// The routing launcher's choice of kernel by token count, from the measured data in
// runtime/routing_crossover.json. Kernel-free, so a CPU test checks it.

#include "spec/ops/routing.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>

namespace moejit::detail {

/// runtime/routing_crossover.json, parsed once (read-only after).
const nlohmann::json& routing_crossover_data();

/// Token count up to which the block kernel runs for `s`: the entry of `data` with the same kind
/// (grouped or not) nearest in log E, then K (the exact one first); with none of that kind, the
/// default.
std::int64_t crossover_tokens(const nlohmann::json& data, const RoutingSpec& s);

/// Up to this token count the warp kernel with lazy keys runs where the contract has it.
std::int64_t lazy_keys_max_tokens(const nlohmann::json& data);

}  // namespace moejit::detail
