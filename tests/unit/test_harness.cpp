// The generic part of the references (reference/harness.cpp): rows spread over threads each run
// once, tensors made from an op's declarations, and the table of op families.
#include <moejit/error.hpp>
#include <moejit/spec.hpp>

#include "reference/harness.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <vector>

using namespace moejit;
using namespace moejit::reference;

TEST_CASE("parallel_rows runs the body once for every row", "[reference][harness]") {
  for (std::int64_t rows : {0, 1, 63, 64, 65, 1000, 4099}) {
    std::vector<std::atomic<int>> seen(static_cast<std::size_t>(rows));
    parallel_rows(rows, [&](std::int64_t r) { seen[static_cast<std::size_t>(r)].fetch_add(1); });
    INFO(rows << " rows");
    for (const auto& s : seen) REQUIRE(s.load() == 1);
  }
}

TEST_CASE("make_tensors follows the op's declarations at a token count", "[reference][harness]") {
  const auto spec = parse_spec(R"({"op": "activation", "kind": "silu", "d": 64, "layout": "masked", "num_experts": 3})", "a.json");
  const auto& op = *spec.ops[0];
  const auto tensors = make_tensors(op, 5);
  REQUIRE(tensors.size() == op.tensors().size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    CHECK(tensors[i].dtype == op.tensors()[i].dtype);
    CHECK(tensors[i].shape == op.tensors()[i].shape_for(5));
  }
  CHECK(tensors[0].shape == std::vector<std::int64_t>{3, 5, 128});
  CHECK(tensors[0].bytes() == 3 * 5 * 128 * 2);
}

TEST_CASE("every family has a harness; an unknown one is a usage error", "[reference][harness]") {
  for (const auto& f : reference_families()) CHECK_NOTHROW(harness_for(f.name));
  try {
    (void)harness_for("no_such_family");
    FAIL("a harness for an unknown family");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::usage);
  }
}

TEST_CASE("a row's random inputs come from its own stream: the same however many rows are filled", "[reference][harness]") {
  const auto dense = parse_spec(R"({"op": "activation", "kind": "silu", "d": 32})", "a.json");
  const auto router = parse_spec(R"({"op": "routing", "num_experts": 64, "topk": 4, "scoring": "sigmoid"})", "r.json");
  for (const auto* spec : {&dense, &router}) {
    const auto& op = *spec->ops[0];
    const auto& harness = harness_for(op.family());
    for (int variant = 0; variant < harness.variants(); ++variant) {
      Rng few_rng(9), many_rng(9);
      auto few = make_tensors(op, 70), many = make_tensors(op, 300);
      harness.fill_inputs(op, few, 70, few_rng, variant);
      harness.fill_inputs(op, many, 300, many_rng, variant);
      INFO(op.family() << " variant " << variant);
      CHECK(std::equal(few[0].data.begin(), few[0].data.end(), many[0].data.begin()));
    }
  }
  CHECK(row_rng(1, 0)() == row_rng(1, 0)());
  CHECK(row_rng(1, 0)() != row_rng(1, 1)());
  CHECK(row_rng(1, 0)() != row_rng(2, 0)());
}
