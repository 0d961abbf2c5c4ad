// The routing launcher's kernel choice (runtime/routing_op.cpp): the block/warp crossover looked
// up by (E, K) among entries of the same kind, and the shipped data's fields.
#include <moejit/spec.hpp>

#include "runtime/routing_op.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

using namespace moejit;

namespace {

const RoutingSpec& router(const std::string& fields) {
  static std::vector<std::shared_ptr<const OpSpec>> keep;  // NOTE: test scaffolding, keeps the specs alive
  keep.push_back(parse_spec(R"({"op": "routing", "scoring": "sigmoid", )" + fields + "}", "r.json").ops[0]);
  return dynamic_cast<const RoutingSpec&>(*keep.back());
}

const nlohmann::json kData = nlohmann::json::parse(R"({
  "default_crossover_tokens": 128,
  "lazy_keys_max_tokens": 384,
  "entries": [
    {"num_experts": 128, "topk": 8, "crossover_tokens": 10},
    {"num_experts": 128, "topk": 4, "crossover_tokens": 11},
    {"num_experts": 1024, "topk": 8, "crossover_tokens": 20},
    {"num_experts": 256, "topk": 8, "grouped": true, "crossover_tokens": 30}]})");

}  // namespace

TEST_CASE("the crossover is the exact entry's, else the nearest in log E, then K", "[routing][runtime]") {
  CHECK(detail::crossover_tokens(kData, router(R"("num_experts": 128, "topk": 8)")) == 10);
  CHECK(detail::crossover_tokens(kData, router(R"("num_experts": 128, "topk": 4)")) == 11);
  CHECK(detail::crossover_tokens(kData, router(R"("num_experts": 128, "topk": 5)")) == 11);
  CHECK(detail::crossover_tokens(kData, router(R"("num_experts": 160, "topk": 8)")) == 10);
  CHECK(detail::crossover_tokens(kData, router(R"("num_experts": 896, "topk": 16)")) == 20);
}

TEST_CASE("grouped and single-group routers look only at entries of their kind", "[routing][runtime]") {
  const auto& grouped = router(R"("num_experts": 128, "topk": 8, "n_group": 8, "topk_group": 4)");
  CHECK(detail::crossover_tokens(kData, grouped) == 30);
  auto single_only = kData;
  single_only["entries"].erase(3);
  CHECK(detail::crossover_tokens(single_only, grouped) == 128);  // none of its kind: the default
  CHECK(detail::lazy_keys_max_tokens(kData) == 384);
}

TEST_CASE("the shipped crossover data gives each measured router its own entry, and every shipped router one", "[routing][runtime]") {
  const auto& data = detail::routing_crossover_data();
  CHECK(detail::lazy_keys_max_tokens(data) >= 0);
  for (const auto& e : data.at("entries")) {
    const bool grouped = e.value("grouped", false);
    const auto& r = router(fmt::format(R"("num_experts": {}, "topk": {}{})", e.at("num_experts").get<int>(), e.at("topk").get<int>(),
                                       grouped ? R"(, "n_group": 8, "topk_group": 4)" : ""));
    INFO(e.dump());
    CHECK(detail::crossover_tokens(data, r) == e.at("crossover_tokens").get<std::int64_t>());
  }
  const std::string dir = MOEJIT_SOURCE_DIR "/specs";
  for (const auto& file : spec_files(std::span(&dir, 1))) {
    for (const auto& op : load_spec(file).ops) {
      const auto* r = dynamic_cast<const RoutingSpec*>(op.get());
      INFO(file << " " << op->name);
      if (r) CHECK(detail::crossover_tokens(data, *r) >= 0);
    }
  }
}
