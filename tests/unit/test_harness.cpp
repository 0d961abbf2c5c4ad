// The generic part of the references (reference/harness.cpp): rows spread over threads each run
// once, tensors made from an op's declarations, the table of op families, and the sampled rows
// a check can compare alone, and the mean work of the windows a bench rotates through.
#include <moejit/error.hpp>
#include <moejit/spec.hpp>

#include "reference/harness.hpp"
#include "tools/op_runner.hpp"

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

TEST_CASE("sample_rows: the first, the last and distinct rows drawn from the seed, in order", "[reference][harness]") {
  CHECK(sample_rows(5, 0, 1) == std::vector<std::int64_t>{0, 1, 2, 3, 4});
  CHECK(sample_rows(5, 5, 1) == std::vector<std::int64_t>{0, 1, 2, 3, 4});
  CHECK(sample_rows(5, 9, 1) == std::vector<std::int64_t>{0, 1, 2, 3, 4});
  CHECK(sample_rows(0, 3, 1).empty());
  CHECK(sample_rows(1000, 2, 1) == std::vector<std::int64_t>{0, 999});
  for (const std::uint64_t seed : {1u, 2u, 3u}) {
    const auto rows = sample_rows(16384, 128, seed);
    REQUIRE(rows.size() == 128);
    CHECK(rows.front() == 0);
    CHECK(rows.back() == 16383);
    CHECK(std::adjacent_find(rows.begin(), rows.end(), [](auto a, auto b) { return a >= b; }) == rows.end());
    CHECK(rows == sample_rows(16384, 128, seed));
  }
  CHECK(sample_rows(16384, 128, 1) != sample_rows(16384, 128, 2));
}

TEST_CASE("gather_rows copies whole rows along the first dimension", "[reference][harness]") {
  auto t = HostTensor::zeros(DType::i32, {4, 3});
  for (int i = 0; i < 12; ++i) t.as<std::int32_t>()[i] = i;
  const std::vector<std::int64_t> rows = {3, 1};
  const auto g = gather_rows(t, rows);
  CHECK(g.shape == std::vector<std::int64_t>{2, 3});
  CHECK(std::vector<std::int32_t>(g.as<std::int32_t>(), g.as<std::int32_t>() + 6) == std::vector<std::int32_t>{9, 10, 11, 3, 4, 5});
  CHECK(gather_rows(t, std::vector<std::int64_t>{}).bytes() == 0);
  CHECK_THROWS_AS(gather_rows(t, std::vector<std::int64_t>{4}), Error);
}

// What a sampled check (tools::check_case's sample_rows) rests on: a token-major op's reference
// computes a row the same whether the call holds every row or only the sampled ones.
TEST_CASE("a token-major op's reference gives the sampled rows alone the whole call's outputs", "[reference][harness]") {
  const std::vector<std::string> ops = {
      R"({"op": "routing", "num_experts": 64, "topk": 6, "n_group": 8, "topk_group": 3, "scoring": "sigmoid", "bias": "fp32", "renormalize": true, "routed_scaling_factor": 2.5})",
      R"({"op": "routing", "num_experts": 40, "topk": 4, "scoring": "softmax", "logits_dtype": "bf16"})",
      R"({"op": "activation", "kind": "situ", "d": 96, "beta": 4.0, "linear_beta": 25.0})",
      R"({"op": "activation", "kind": "swiglu_oai", "d": 64, "interleaved": true})",
      R"({"op": "experts", "hidden": 128, "intermediate": 64, "num_experts": 6, "topk": 3, "global_experts": 9, "bias": true, "activation": {"kind": "silu"}})",
      R"({"op": "experts", "hidden": 64, "intermediate": 64, "num_experts": 4, "topk": 2, "apply_router_weight_on_input": true, "activation": {"kind": "gelu_tanh"}})",
      R"({"op": "latent_tail", "tp_size": 1, "hidden": 128, "latent": 64})",
  };
  const std::int64_t T = 37;
  for (const auto& json : ops) {
    const auto spec = parse_spec(json, "s.json");
    const auto& op = *spec.ops[0];
    const auto& harness = harness_for(op.family());
    const auto decls = op.tensors();
    for (int variant = 0; variant < harness.variants(); ++variant) {
      INFO(json << " variant " << variant);
      Rng rng(5);
      auto whole = make_tensors(op, T);
      harness.fill_inputs(op, whole, T, rng, variant);
      const auto rows = sample_rows(T, 6, 11);
      std::vector<HostTensor> sampled;
      for (std::size_t i = 0; i < decls.size(); ++i) {
        const bool token = std::ranges::any_of(decls[i].shape, [](const Extent& e) { return e.tokens; });
        sampled.push_back(token ? gather_rows(whole[i], rows) : whole[i]);
      }
      harness.run(op, whole, T);
      harness.run(op, sampled, static_cast<std::int64_t>(rows.size()));
      std::vector<HostTensor> got(decls.size());
      for (std::size_t i = 0; i < decls.size(); ++i) {
        if (decls[i].role != TensorRole::output) continue;
        got[i] = gather_rows(whole[i], rows);
        CHECK(got[i].data == sampled[i].data);
      }
      CHECK(harness.compare(op, sampled, got, static_cast<std::int64_t>(rows.size())).empty());
    }
  }
}

TEST_CASE("a bench's bytes and flops are the mean of the windows its calls run on, the rows put back after", "[reference][harness]") {
  const auto spec = parse_spec(R"({"op": "experts", "hidden": 128, "intermediate": 64, "num_experts": 8, "topk": 2, )"
                               R"("activation": {"kind": "silu"}})",
                               "e.json");
  const auto& op = *spec.ops[0];
  auto host = make_tensors(op, 6);
  std::size_t ids = 0;
  while (op.tensors()[ids].name != "topk_ids") ++ids;
  // three windows of two tokens: experts {0, 1}, {0, 1, 2, 3}, {4, 5, 6}
  const std::vector<std::int32_t> routing = {0, 1, 1, 0, 0, 1, 2, 3, 4, 5, 6, 4};
  std::copy(routing.begin(), routing.end(), host[ids].as<std::int32_t>());
  const auto before = host;
  const auto& harness = harness_for(op.family());
  const auto first = tools::mean_work(op, host, 2, 1);
  CHECK(first.bytes == harness.bytes_moved(op, host, 2));
  CHECK(first.flops == harness.flops(op, host, 2));
  const auto mean = tools::mean_work(op, host, 2, 3);
  // the experts' bytes as the mean of 2, 4 and 3 experts; the rest and the flops as every window's
  const double expert_bytes = 3.0 * 128 * 64 * 2;
  CHECK(mean.bytes == Approx(first.bytes + (3.0 - 2.0) * expert_bytes));
  CHECK(mean.flops == Approx(first.flops));
  for (std::size_t i = 0; i < host.size(); ++i) CHECK(host[i].data == before[i].data);
}
