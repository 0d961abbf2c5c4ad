// The latent tail's path per call (runtime/latent_tail_choice.cpp): tp 1, the fused path's
// limits, what the spec forces, and the measured entries by token range.
#include <moejit/spec.hpp>

#include "runtime/latent_tail_choice.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <string>

using namespace moejit;
using Path = LatentMoE::Path;

namespace moejit::detail {
std::string_view latent_tail_paths_json();
}

namespace {

std::shared_ptr<const OpSpec> tail(const std::string& fields, int hidden = 7168) {
  return parse_spec(fmt::format(R"({{"op": "latent_tail", "hidden": {}, "latent": 3584, {}}})", hidden, fields), "t.json").ops[0];
}
const LatentTailSpec& as(const std::shared_ptr<const OpSpec>& s) { return dynamic_cast<const LatentTailSpec&>(*s); }

// tp 2: fused up to 15 tokens, then striped is best; the base variant is full below 8 tokens.
constexpr std::string_view kData = R"({"entries": [
  {"tp": 2, "tokens": 16, "path": "base-striped", "base": "base-striped"},
  {"tp": 2, "tokens": 1, "path": "fused", "base": "base"},
  {"tp": 2, "tokens": 8, "path": "fused", "base": "base-striped"},
  {"tp": 4, "tokens": 1, "path": "base", "base": "base"}]})";

}  // namespace

TEST_CASE("measurements are the entries of one tp, by token count", "[latent_tail][runtime]") {
  const auto m = detail::tail_measurements(kData, 2);
  REQUIRE(m.size() == 3);
  CHECK(m[0].tokens == 1);
  CHECK(m[1].tokens == 8);
  CHECK(m[2].tokens == 16);
  CHECK(m[2].best == Path::base_striped);
  CHECK(detail::tail_measurements(kData, 8).empty());
}

TEST_CASE("the shipped measurements parse for every tp", "[latent_tail][runtime]") {
  for (int tp : {1, 2, 4, 8}) CHECK_NOTHROW(detail::tail_measurements(detail::latent_tail_paths_json(), tp));
  CHECK_FALSE(detail::tail_measurements(detail::latent_tail_paths_json(), 2).empty());
}

TEST_CASE("an automatic tail takes the measured path for its token range", "[latent_tail][runtime]") {
  const auto spec = tail(R"("tp_size": 2)");
  const auto m = detail::tail_measurements(kData, 2);
  CHECK(detail::choose_tail_path(as(spec), m, 1) == Path::fused);
  CHECK(detail::choose_tail_path(as(spec), m, 15) == Path::fused);
  CHECK(detail::choose_tail_path(as(spec), m, 16) == Path::base_striped);
  // Past the peer slots the fused path is impossible: the measured base variant runs.
  const auto past = as(spec).slot_tokens() + 1;
  CHECK(detail::choose_tail_path(as(spec), m, past) == Path::base_striped);
  // No measurement: fused where possible, else the full base path.
  CHECK(detail::choose_tail_path(as(spec), {}, 1) == Path::fused);
  CHECK(detail::choose_tail_path(as(spec), {}, past) == Path::base_full);
}

TEST_CASE("what the spec asks for overrides the measurements", "[latent_tail][runtime]") {
  const auto m = detail::tail_measurements(kData, 2);
  CHECK(detail::choose_tail_path(as(tail(R"("tp_size": 1)")), m, 16) == Path::base_full);
  CHECK(detail::choose_tail_path(as(tail(R"("tp_size": 2, "path": "fused")")), m, 16) == Path::fused);
  CHECK(detail::choose_tail_path(as(tail(R"("tp_size": 2, "path": "base")")), m, 1) == Path::base_full);
  CHECK(detail::choose_tail_path(as(tail(R"("tp_size": 2, "path": "base")")), m, 8) == Path::base_striped);
  CHECK(detail::choose_tail_path(as(tail(R"("tp_size": 2, "base_variant": "full")")), m, 16) == Path::base_full);
  CHECK(detail::choose_tail_path(as(tail(R"("tp_size": 2, "path": "base", "base_variant": "striped")")), m, 1) ==
        Path::base_striped);
  // A hidden size that does not split into 64-row stripes: neither fused nor striped.
  CHECK(detail::choose_tail_path(as(tail(R"("tp_size": 2)", 7104)), m, 16) == Path::base_full);
}
