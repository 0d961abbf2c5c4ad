#pragma once
// What the experts reference (experts.cpp) and its harness (experts_harness.cpp) share.

#include "experts.hpp"

#include <algorithm>
#include <cstdint>
#include <span>

namespace moejit::reference::experts_detail {

inline const ExpertsSpec& as_experts(const OpSpec& op) { return dynamic_cast<const ExpertsSpec&>(op); }
inline std::size_t at(std::int64_t i) { return static_cast<std::size_t>(i); }
inline std::int64_t clamp_count(std::int32_t count, std::int64_t tokens) { return std::clamp<std::int64_t>(count, 0, tokens); }

// Variants (ExpertsHarness::variants() says what each one is).
constexpr int kUniform = 0, kSkewedInvalid = 1, kExact = 2, kBenchUniform = 3, kBenchSkewed = 4;

inline std::int64_t id_at(const HostTensor& ids, std::size_t i) noexcept {
  return ids.dtype == DType::i64 ? ids.as<std::int64_t>()[i] : ids.as<std::int32_t>()[i];
}

inline const std::int32_t* map_of(const ExpertsTensors& ix, std::span<const HostTensor> t) {
  return ix.map >= 0 ? t[at(ix.map)].as<std::int32_t>() : nullptr;
}

}  // namespace moejit::reference::experts_detail
