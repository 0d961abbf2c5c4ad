#include "latent_tail.hpp"

#include "spec/canonical.hpp"
#include "spec/spec_reader.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>

namespace moejit {

std::string_view to_string(TailPath p) noexcept {
  switch (p) {
    case TailPath::automatic: return "auto";
    case TailPath::base: return "base";
    case TailPath::fused: return "fused";
  }
  return "?";
}

std::string_view to_string(TailBaseVariant v) noexcept {
  switch (v) {
    case TailBaseVariant::automatic: return "auto";
    case TailBaseVariant::full: return "full";
    case TailBaseVariant::striped: return "striped";
  }
  return "?";
}

std::shared_ptr<OpSpec> parse_latent_tail(detail::SpecReader& r) {
  auto s = std::make_shared<LatentTailSpec>();
  s->tp_size = static_cast<int>(r.integer("tp_size", 1, kTailMaxTp));
  s->hidden = static_cast<int>(r.integer("hidden", 64, 1 << 17));
  s->latent = static_cast<int>(r.integer("latent", 64, kTailMaxLatent));
  if (s->hidden % 64) r.fail("hidden", fmt::format("hidden {} is not a multiple of 64 (the up projection's row tile)", s->hidden), "a multiple of 64");
  if (s->latent % 64) r.fail("latent", fmt::format("latent {} is not a multiple of 64 (the up projection's K tile)", s->latent), "a multiple of 64");
  s->eps = r.f32("eps", detail::kF32Min, detail::kF32Max, 1e-5);
  s->shared_expert = r.boolean("shared_expert", true);
  s->max_tokens_ = r.integer("max_tokens", 1, 65536, 64);
  r.choice("dtype", {"bf16"}, "bf16");
  const auto path = r.choice("path", {"auto", "base", "fused"}, "auto");
  s->path = path == "base" ? TailPath::base : path == "fused" ? TailPath::fused : TailPath::automatic;
  const auto variant = r.choice("base_variant", {"auto", "full", "striped"}, "auto");
  s->base_variant = variant == "full" ? TailBaseVariant::full : variant == "striped" ? TailBaseVariant::striped : TailBaseVariant::automatic;
  s->peer_timeout_ms = static_cast<int>(r.integer("peer_timeout_ms", 1, 600000, 10000));

  if (s->path == TailPath::fused && !(s->tp_size == 2 || s->tp_size == 4 || s->tp_size == 8)) {
    r.fail("path", fmt::format("the fused path runs on tp 2, 4 or 8, not tp {}", s->tp_size), "base or auto");
  }
  if ((s->path == TailPath::fused || s->base_variant == TailBaseVariant::striped) && s->hidden % (64 * s->tp_size)) {
    r.fail("hidden", fmt::format("hidden {} does not split into 64-row tiles over {} ranks", s->hidden, s->tp_size),
           fmt::format("a multiple of {} (64 x tp_size)", 64 * s->tp_size));
  }
  if (s->base_variant == TailBaseVariant::striped && s->tp_size == 1) {
    r.fail("base_variant", "the striped variant needs tp_size > 1", "full or auto");
  }
  r.finish();
  return s;
}

bool LatentTailSpec::fused_possible() const noexcept {
  return (tp_size == 2 || tp_size == 4 || tp_size == 8) && hidden % (64 * tp_size) == 0 && path != TailPath::base;
}

bool LatentTailSpec::striped_possible() const noexcept { return tp_size > 1 && hidden % (64 * tp_size) == 0; }

int LatentTailSpec::slot_tokens() const noexcept {
  return static_cast<int>(std::min<std::int64_t>(max_tokens_, kFusedMaxTokens));
}

std::int64_t LatentTailSpec::peer_elements() const noexcept {
  if (!fused_possible()) return 0;
  const std::int64_t slots = slot_tokens();
  return 3 * (slots * latent * tp_size + slots * (hidden / tp_size) * tp_size + slots * hidden);
}

std::string LatentTailSpec::canonical_json() const {
  nlohmann::json j{{"op", "latent_tail"},       {"tp_size", tp_size},
                   {"hidden", hidden},           {"latent", latent},
                   {"eps", detail::canonical_number(eps)}, {"shared_expert", shared_expert},
                   {"max_tokens", max_tokens_},  {"dtype", "bf16"},
                   {"path", to_string(path)},    {"base_variant", to_string(base_variant)},
                   {"peer_timeout_ms", peer_timeout_ms}};
  return j.dump();
}

std::vector<TensorDecl> LatentTailSpec::tensors() const {
  const auto t = Extent::token_count();
  // The kernels read and write 16 bytes at a time; at tp 1 the up projection also takes S and out
  // element by element where they are not 16-byte aligned, the multi-GPU paths do not.
  const std::size_t vec = kVectorAlign, rank_vec = tp_size > 1 ? kVectorAlign : 0;
  std::vector<TensorDecl> d;
  d.push_back({.name = "routed", .dtype = DType::bf16, .shape = {t, Extent::fixed(latent)}, .role = TensorRole::input, .align = vec,
               .note = "this rank's partial of the routed latent output"});
  if (shared_expert) {
    d.push_back({.name = "shared", .dtype = DType::bf16, .shape = {t, Extent::fixed(hidden)}, .role = TensorRole::input, .align = rank_vec,
                 .note = "this rank's partial of the shared-expert output"});
  }
  d.push_back({.name = "gamma", .dtype = DType::bf16, .shape = {Extent::fixed(latent)}, .role = TensorRole::input, .align = vec,
               .note = "RMSNorm weight"});
  d.push_back({.name = "w_up", .dtype = DType::bf16, .shape = {Extent::fixed(hidden), Extent::fixed(latent)}, .role = TensorRole::input,
               .align = vec, .note = "up projection, rows K-contiguous"});
  d.push_back({.name = "out", .dtype = DType::bf16, .shape = {t, Extent::fixed(hidden)}, .role = TensorRole::output, .align = rank_vec,
               .note = "the same on every rank"});
  d.push_back({.name = "latent_sum", .dtype = DType::bf16, .shape = {t, Extent::fixed(latent)}, .role = TensorRole::output,
               .optional = true, .align = vec, .note = "the reduced routed latent R, for inspection"});
  d.push_back({.name = "latent_norm", .dtype = DType::bf16, .shape = {t, Extent::fixed(latent)}, .role = TensorRole::output,
               .optional = true, .align = vec, .note = "the normalized latent z, for inspection"});
  return d;
}

}  // namespace moejit
