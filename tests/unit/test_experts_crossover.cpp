// The experts launcher's decode/prefill crossover (runtime/experts_op.cpp): the GPU's table, then
// the (hidden, intermediate) entry, and the shipped data's fields.
#include <moejit/error.hpp>
#include <moejit/spec.hpp>

#include "runtime/experts_crossover.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

using namespace moejit;

namespace {

const ExpertsSpec& experts(std::int64_t hidden, std::int64_t intermediate) {
  static std::vector<std::shared_ptr<const OpSpec>> keep;  // NOTE: test scaffolding, keeps the specs alive
  keep.push_back(parse_spec(fmt::format(R"({{"op": "experts", "hidden": {}, "intermediate": {}, "num_experts": 8, "topk": 2, )"
                                        R"("activation": {{"kind": "silu"}}}})",
                                        hidden, intermediate),
                            "e.json")
                     .ops[0]);
  return dynamic_cast<const ExpertsSpec&>(*keep.back());
}

const nlohmann::json kData = nlohmann::json::parse(R"({"tables": [
  {"gpu": "H100", "default_crossover_rows": 16, "entries": [{"hidden": 2048, "intermediate": 768, "crossover_rows": 12}]},
  {"gpu": "", "default_crossover_rows": 20, "entries": [
    {"hidden": 2048, "intermediate": 768, "crossover_rows": 8},
    {"hidden": 7168, "intermediate": 2048, "crossover_rows": 2}]}]})");

}  // namespace

TEST_CASE("the crossover comes from the first table the GPU's name contains, then its (hidden, intermediate) entry", "[experts][runtime]") {
  CHECK(detail::prefill_crossover_rows(kData, "NVIDIA H100 80GB HBM3", experts(2048, 768)) == 12);
  CHECK(detail::prefill_crossover_rows(kData, "NVIDIA H200", experts(2048, 768)) == 8);
  // the H100's table has no entry of this shape: its own default, not another table's entry
  CHECK(detail::prefill_crossover_rows(kData, "NVIDIA H100 80GB HBM3", experts(7168, 2048)) == 16);
  CHECK(detail::prefill_crossover_rows(kData, "NVIDIA H200", experts(7168, 2048)) == 2);
  CHECK(detail::prefill_crossover_rows(kData, "NVIDIA H200", experts(4096, 1024)) == 20);
  auto no_fallback = kData;
  no_fallback["tables"].erase(1);
  CHECK_THROWS_AS(detail::prefill_crossover_rows(no_fallback, "NVIDIA B200", experts(2048, 768)), Error);
}

TEST_CASE("the shipped crossover data ends in a table for every GPU, and each entry is its own shape's", "[experts][runtime]") {
  const auto& data = detail::experts_crossover_data();
  const auto& tables = data.at("tables");
  REQUIRE_FALSE(tables.empty());
  CHECK(tables.back().at("gpu") == "");
  for (const auto& table : tables) {
    const auto gpu = table.at("gpu").get<std::string>();
    CHECK(table.at("default_crossover_rows").get<std::int64_t>() >= 1);
    CHECK_FALSE(table.at("device").get<std::string>().empty());
    for (const auto& e : table.at("entries")) {
      INFO(gpu << " " << e.dump());
      // the table's own entry, reached by a device name that only its `gpu` matches
      const auto name = gpu.empty() ? std::string("some other GPU") : "NVIDIA " + gpu;
      CHECK(detail::prefill_crossover_rows(data, name, experts(e.at("hidden"), e.at("intermediate"))) == e.at("crossover_rows").get<std::int64_t>());
      CHECK(e.at("crossover_rows").get<std::int64_t>() >= 1);
    }
  }
}
