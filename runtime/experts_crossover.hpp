#pragma once
// The experts launcher's choice between the decode and prefill GEMMs by rows an expert, from the
// measured data in runtime/experts_crossover.json. Kernel-free, so a CPU test checks it.

#include "spec/ops/experts.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string_view>

namespace moejit::detail {

/// runtime/experts_crossover.json, parsed once (read-only after).
const nlohmann::json& experts_crossover_data();

/// Rows an active expert holds on average from which a call on the GPU named `gpu` (the driver's
/// device name) takes the prefill GEMMs: in the first of `data`'s tables whose `gpu` the name
/// contains (the last table's, "", matches every GPU), the entry of the same (hidden,
/// intermediate), else that table's default.
std::int64_t prefill_crossover_rows(const nlohmann::json& data, std::string_view gpu, const ExpertsSpec& s);

}  // namespace moejit::detail
