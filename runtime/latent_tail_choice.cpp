#include "latent_tail_choice.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>

namespace moejit::detail {

namespace {

using Path = LatentMoE::Path;

Path parse_path(const std::string& p) {
  return p == "fused" ? Path::fused : p == "base-striped" ? Path::base_striped : Path::base_full;
}

// The measurement that applies to `tokens`: the last entry at or below it.
const TailMeasurement* measurement(std::span<const TailMeasurement> measured, std::int64_t tokens) noexcept {
  const TailMeasurement* m = nullptr;
  for (const auto& e : measured) {
    if (e.tokens <= tokens) m = &e;
  }
  return m;
}

}  // namespace

std::vector<TailMeasurement> tail_measurements(std::string_view json, int tp) {
  const auto data = nlohmann::json::parse(json);
  std::vector<TailMeasurement> measured;
  for (const auto& e : data.at("entries")) {
    if (e.at("tp").get<int>() != tp) continue;
    measured.push_back({e.at("tokens").get<std::int64_t>(), parse_path(e.at("path").get<std::string>()),
                        parse_path(e.at("base").get<std::string>())});
  }
  std::sort(measured.begin(), measured.end(), [](const auto& a, const auto& b) { return a.tokens < b.tokens; });
  return measured;
}

Path choose_tail_path(const LatentTailSpec& spec, std::span<const TailMeasurement> measured, std::int64_t tokens) noexcept {
  if (spec.tp_size == 1) return Path::base_full;
  const bool fused_ok = spec.fused_possible() && tokens <= spec.slot_tokens();
  const TailMeasurement* m = measurement(measured, tokens);
  auto base = [&] {
    if (spec.base_variant == TailBaseVariant::full || !spec.striped_possible()) return Path::base_full;
    if (spec.base_variant == TailBaseVariant::striped) return Path::base_striped;
    return m && m->base == Path::base_striped ? Path::base_striped : Path::base_full;
  };
  if (spec.path == TailPath::base || !fused_ok) return base();
  if (spec.path == TailPath::fused) return Path::fused;
  // auto: fused unless a measurement says a base variant is faster here.
  return !m || m->best == Path::fused ? Path::fused : base();
}

}  // namespace moejit::detail
