// The routing reference on hand-checked cases: tie rules, bias only for selection, grouped
// selection, non-finite logits, renormalization and scaling.
#include <moejit/spec.hpp>

#include "reference/routing.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

using namespace moejit;
using namespace moejit::reference;

namespace {

std::shared_ptr<const OpSpec> routing(const std::string& fields) {
  return parse_spec(R"({"op": "routing", )" + fields + "}", "t.json").ops[0];
}
const RoutingSpec& as(const std::shared_ptr<const OpSpec>& s) { return dynamic_cast<const RoutingSpec&>(*s); }
float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

}  // namespace

TEST_CASE("equal keys go to the lower index; output is descending", "[reference][routing]") {
  const auto op = routing(R"("num_experts": 6, "topk": 3, "scoring": "sigmoid", "renormalize": true)");
  const std::vector<float> x = {0.5f, 2.0f, 0.5f, 2.0f, -1.0f, 0.5f};
  const auto row = route_row(as(op), x.data(), nullptr);
  CHECK(row.ids == std::vector<int>{1, 3, 0});
  const float s2 = sigmoid(2.0f), s05 = sigmoid(0.5f);
  const float denom = (s2 + s2 + s05) + 1e-20f;
  CHECK(row.weights == std::vector<float>{s2 / denom, s2 / denom, s05 / denom});

  const std::vector<float> same(6, 1.25f);
  CHECK(route_row(as(op), same.data(), nullptr).ids == std::vector<int>{0, 1, 2});
  const std::vector<float> zeros = {-0.0f, 0.0f, -0.0f, -5.0f, -6.0f, -7.0f};  // -0 and +0 tie
  const auto none = routing(R"("num_experts": 6, "topk": 2, "scoring": "none")");
  CHECK(route_row(as(none), zeros.data(), nullptr).ids == std::vector<int>{0, 1});
}

TEST_CASE("the bias chooses experts but never enters a weight; alpha scales", "[reference][routing]") {
  const auto op = routing(R"("num_experts": 4, "topk": 2, "scoring": "sigmoid", "bias": "fp32", "renormalize": true, "routed_scaling_factor": 2.5)");
  const std::vector<float> x = {3.0f, 2.0f, 1.0f, 0.0f};
  const std::vector<float> bias = {0.0f, 0.0f, 5.0f, 0.0f};
  const auto row = route_row(as(op), x.data(), bias.data());
  CHECK(row.ids == std::vector<int>{2, 0});
  const float w2 = sigmoid(1.0f), w0 = sigmoid(3.0f);
  const float denom = (w2 + w0) + 1e-20f;
  CHECK(row.weights[0] == 2.5f * (w2 / denom));
  CHECK(row.weights[1] == 2.5f * (w0 / denom));
}

TEST_CASE("grouped selection keeps the best groups, lower group index on ties", "[reference][routing]") {
  // 8 experts in 4 groups of 2; keep 2 groups; top2_sum of sigmoid scores.
  const auto op = routing(R"("num_experts": 8, "topk": 2, "n_group": 4, "topk_group": 2, "scoring": "sigmoid", "bias": "fp32", "renormalize": true)");
  // Group 0: {4, -4} (one high expert); group 1: {1, 1}; group 2: {1, 1} (ties group 1); group 3: {0, 0}.
  const std::vector<float> x = {4.0f, -4.0f, 1.0f, 1.0f, 1.0f, 1.0f, 0.0f, 0.0f};
  const std::vector<float> bias(8, 0.0f);
  const auto row = route_row(as(op), x.data(), bias.data());
  // top2_sum: g0 = s(4)+s(-4) = 1.0, g1 = g2 = 2 s(1) = 1.46; keep groups 1 and 2 (group 0 out despite expert 0).
  CHECK(row.ids == std::vector<int>{2, 3});
  const auto max = routing(R"("num_experts": 8, "topk": 2, "n_group": 4, "topk_group": 2, "group_score": "max", "scoring": "sigmoid", "bias": "fp32", "renormalize": true)");
  // max: g0 = s(4) wins, then groups 1 and 2 tie at s(1): group 1.
  CHECK(route_row(as(max), x.data(), bias.data()).ids == std::vector<int>{0, 2});
  // Experts of dropped groups are never taken, even past invalid ones of kept groups.
  const std::vector<float> nan_in_kept = {kNaN, kNaN, 5.0f, kNaN, -9.0f, -9.0f, -9.0f, -9.0f};
  const auto g2 = routing(R"("num_experts": 8, "topk": 2, "n_group": 4, "topk_group": 1, "group_score": "max", "scoring": "sigmoid", "renormalize": true)");
  const auto r2 = route_row(as(g2), nan_in_kept.data(), nullptr);
  CHECK(r2.ids == std::vector<int>{2, 3});  // group 1 kept: expert 2, then its invalid expert 3
  CHECK(r2.weights[1] == 0.0f);
}

TEST_CASE("non-finite logits are taken last with weight 0; an all-invalid row is ids 0..K-1", "[reference][routing]") {
  const auto op = routing(R"("num_experts": 6, "topk": 3, "scoring": "softmax", "renormalize": true)");
  const std::vector<float> x = {kInf, 1.0f, kNaN, -kInf, 2.0f, kNaN};
  const auto row = route_row(as(op), x.data(), nullptr);
  CHECK(row.ids == std::vector<int>{4, 1, 0});  // +inf does not win; invalid lowest index first
  CHECK(row.weights[2] == 0.0f);
  CHECK(std::fabs(row.weights[0] + row.weights[1] - 1.0f) < 1e-6f);

  const std::vector<float> bad = {kNaN, kInf, -kInf, kNaN, kNaN, kNaN};
  const auto all = route_row(as(op), bad.data(), nullptr);
  CHECK(all.ids == std::vector<int>{0, 1, 2});
  CHECK(all.weights == std::vector<float>{1.0f / 3, 1.0f / 3, 1.0f / 3});
  const auto plain = routing(R"("num_experts": 6, "topk": 3, "scoring": "sigmoid", "routed_scaling_factor": 2.0)");
  CHECK(route_row(as(plain), bad.data(), nullptr).weights == std::vector<float>{0, 0, 0});
}

TEST_CASE("softmax sums in fixed point: equal logits give exactly 1/E", "[reference][routing]") {
  const auto op = routing(R"("num_experts": 896, "topk": 16, "scoring": "softmax")");
  const std::vector<float> x(896, 0.75f);
  const auto row = route_row(as(op), x.data(), nullptr);
  for (float w : row.weights) CHECK(w == 1.0f / 896.0f);
  CHECK(row.ids.front() == 0);
  CHECK(row.ids.back() == 15);
}

TEST_CASE("scoring none selects on the logit and weights by its sigmoid", "[reference][routing]") {
  const auto op = routing(R"("num_experts": 16, "topk": 1, "scoring": "none")");
  std::vector<float> x(16, -1.0f);
  x[11] = 0.3f;
  const auto row = route_row(as(op), x.data(), nullptr);
  CHECK(row.ids == std::vector<int>{11});
  CHECK(row.weights[0] == sigmoid(0.3f));
}

TEST_CASE("sqrt_softplus switches to sqrt(x) above 20", "[reference][routing]") {
  const auto op = routing(R"("num_experts": 3, "topk": 3, "scoring": "sqrt_softplus")");
  const std::vector<float> x = {25.0f, 0.0f, -30.0f};
  const auto row = route_row(as(op), x.data(), nullptr);
  CHECK(row.ids == std::vector<int>{0, 1, 2});
  CHECK(row.weights[0] == std::sqrt(25.0f));
  CHECK(row.weights[1] == std::sqrt(std::log1p(1.0f)));
}

TEST_CASE("the harness accepts near-ties only", "[reference][routing]") {
  const auto op = routing(R"("num_experts": 4, "topk": 2, "scoring": "none")");
  const auto& h = harness_for("routing");
  auto want = make_tensors(*op, 1);
  const float x[] = {1.0f, std::nextafter(1.0f, 2.0f), 0.5f, 0.25f};  // experts 0 and 1: one ulp apart
  std::memcpy(want[0].data.data(), x, sizeof x);
  h.run(*op, want, 1);
  CHECK(want[2].as<std::int32_t>()[0] == 1);
  auto got = want;
  got[2].as<std::int32_t>()[0] = 0;  // the other side of a near-tie
  got[2].as<std::int32_t>()[1] = 1;
  got[1].as<float>()[0] = sigmoid(x[0]);
  got[1].as<float>()[1] = sigmoid(x[1]);
  CHECK(h.compare(*op, want, got, 1).empty());
  got[2].as<std::int32_t>()[1] = 2;  // a real mistake
  CHECK_FALSE(h.compare(*op, want, got, 1).empty());
}

TEST_CASE("the harness reports the first 8 failing rows in row order, whatever the threads that judge them", "[reference][routing]") {
  const auto op = routing(R"("num_experts": 64, "topk": 4, "scoring": "sigmoid")");
  const auto& h = harness_for("routing");
  Rng rng(3);
  auto want = make_tensors(*op, 500);
  h.fill_inputs(*op, want, 500, rng, 0);
  h.run(*op, want, 500);
  auto got = want;
  CHECK(h.compare(*op, want, got, 500).empty());
  const std::vector<int> bad = {3, 70, 71, 200, 201, 202, 350, 351, 352, 499};
  for (int t : bad) got[2].as<std::int32_t>()[t * 4] = -1;
  const auto failures = h.compare(*op, want, got, 500);
  REQUIRE(failures.size() == 8);
  for (std::size_t i = 0; i < 8; ++i) {
    INFO(failures[i]);
    CHECK(failures[i].starts_with(fmt::format("row {}: id[0] = -1, reference ", bad[i])));
  }
}
