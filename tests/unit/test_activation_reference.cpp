// The activation reference: its math follows numerics.md (rounding points, clamps, non-finite
// inputs, masked rows left alone), and its comparison's tolerances.
#include <moejit/spec.hpp>

#include "reference/activation.hpp"
#include "reference/numeric.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

using namespace moejit;
using namespace moejit::reference;

namespace {

const ActivationSpec& act(const Spec& s) { return dynamic_cast<const ActivationSpec&>(*s.ops[0]); }

}  // namespace

TEST_CASE("activation elements follow numerics.md", "[reference]") {
  const auto silu = parse_spec(R"({"op": "activation", "kind": "silu", "d": 1})", "t.json");
  const auto situ = parse_spec(R"({"op": "activation", "kind": "situ", "d": 1, "beta": 4.0, "linear_beta": 25.0})", "t.json");
  const auto situ_plain = parse_spec(R"({"op": "activation", "kind": "situ", "d": 1, "beta": 4.0})", "t.json");
  const auto swiglu = parse_spec(R"({"op": "activation", "kind": "swiglu_oai", "d": 1, "out_dtype": "fp32"})", "t.json");
  const auto gelu32 = parse_spec(R"({"op": "activation", "kind": "gelu", "d": 1, "dtype": "fp32", "out_dtype": "fp32"})", "t.json");

  // silu rounds twice: bf16(float(bf16(silu(g))) * u)
  const float g = 1.3f, u = -2.7f;
  const float once = round_to(DType::bf16, static_cast<float>(g / (1 + std::exp(-g))));
  CHECK(activation_element(act(silu), g, u) == round_to(DType::bf16, once * u));
  CHECK(activation_element(act(silu), 0.0f, 5.0f) == 0.0f);

  // situ against a double-precision evaluation (one rounding at the end)
  const double expect = 4.0 * std::tanh(g / 4.0) / (1 + std::exp(-g)) * 25.0 * std::tanh(u / 25.0);
  CHECK(std::fabs(activation_element(act(situ), g, u) - expect) <= std::fabs(expect) * 1.0 / 128);
  CHECK(activation_element(act(situ_plain), 50.0f, 1.0f) == round_to(DType::bf16, 4.0f * std::tanh(12.5f)));

  // swiglu_oai clamps the gate above and the up half on both sides; NaN passes through
  const float big = activation_element(act(swiglu), 100.0f, 100.0f);
  CHECK(big == (7.0f + 1.0f) * (7.0f / (1.0f + std::exp(-1.702f * 7.0f))));
  CHECK(activation_element(act(swiglu), 1.0f, -100.0f) == (-7.0f + 1.0f) * (1.0f / (1.0f + std::exp(-1.702f))));
  CHECK(std::isnan(activation_element(act(swiglu), std::nanf(""), 1.0f)));

  // non-finite inputs follow IEEE
  constexpr float kInf = std::numeric_limits<float>::infinity();
  CHECK(activation_element(act(gelu32), 0.0f, kInf) != activation_element(act(gelu32), 0.0f, kInf));  // 0 * inf = NaN
  CHECK(activation_element(act(silu), kInf, 1.0f) == kInf);
}

TEST_CASE("the masked reference writes only each expert's first rows", "[reference]") {
  const auto spec = parse_spec(R"({"op": "activation", "kind": "silu", "d": 4, "layout": "masked", "num_experts": 3})", "t.json");
  const auto& op = act(spec);
  const std::int64_t tokens = 5;
  auto tensors = make_tensors(op, tokens);
  Rng rng(3);
  harness_for("activation").fill_inputs(op, tensors, tokens, rng, 0);
  std::int32_t* counts = tensors[1].as<std::int32_t>();
  counts[0] = 0;
  counts[1] = 2;
  counts[2] = 9;  // clamped to T
  tensors[2].fill_bytes(std::byte{0x5A});
  harness_for("activation").run(op, tensors, tokens);
  const auto* out = tensors[2].as<std::uint16_t>();
  for (std::int64_t e = 0; e < 3; ++e) {
    for (std::int64_t t = 0; t < tokens; ++t) {
      const bool written = t < std::min<std::int64_t>(counts[e], tokens);
      for (int j = 0; j < 4; ++j) {
        const auto v = out[(e * tokens + t) * 4 + j];
        INFO("expert " << e << " row " << t);
        if (!written) CHECK(v == 0x5A5A);
      }
    }
  }
  CHECK(harness_for("activation").bytes_moved(op, tensors, tokens) == (0 + 2 + 5) * 4 * (2 * 2 + 2) + 3 * 4);
}

TEST_CASE("masked activation inputs: variant 1's counts lie below 0 and past T, to int32's ends, and are clamped", "[reference]") {
  const auto spec = parse_spec(R"({"op": "activation", "kind": "silu", "d": 4, "layout": "masked", "num_experts": 10})", "t.json");
  const auto& op = act(spec);
  const std::int64_t tokens = 6;
  auto tensors = make_tensors(op, tokens);
  Rng rng(8);
  harness_for("activation").fill_inputs(op, tensors, tokens, rng, 1);
  const std::int32_t* counts = tensors[1].as<std::int32_t>();
  CHECK(counts[0] == -3);
  CHECK(counts[4] == tokens + 3);
  CHECK(counts[5] == std::numeric_limits<std::int32_t>::min());
  CHECK(counts[9] == std::numeric_limits<std::int32_t>::max());
  tensors[2].fill_bytes(std::byte{0x5A});
  harness_for("activation").run(op, tensors, tokens);
  const auto* out = tensors[2].as<std::uint16_t>();
  double rows = 0;
  for (std::int64_t e = 0; e < 10; ++e) {
    const std::int64_t n = std::clamp<std::int64_t>(counts[e], 0, tokens);
    rows += static_cast<double>(n);
    for (std::int64_t t = 0; t < tokens; ++t) {
      INFO("expert " << e << " row " << t);
      CHECK((out[(e * tokens + t) * 4] != 0x5A5A) == (t < n));
    }
  }
  CHECK(harness_for("activation").bytes_moved(op, tensors, tokens) == rows * 4 * (2 * 2 + 2) + 10 * 4);
}

TEST_CASE("masked activations bench at the T_max where half-full experts hold dense's rows", "[reference]") {
  const auto& harness = harness_for("activation");
  const auto dense = parse_spec(R"({"op": "activation", "kind": "silu", "d": 2048})", "t.json");
  CHECK(harness.bench_tokens(act(dense)) == std::vector<std::int64_t>{1, 16, 128, 1024, 8192, 32768});
  const auto eight = parse_spec(R"({"op": "activation", "kind": "silu", "d": 2048, "layout": "masked", "num_experts": 8})", "t.json");
  CHECK(harness.bench_tokens(act(eight)) == std::vector<std::int64_t>{1, 4, 32, 256, 2048, 8192});
  // Kimi-K3's masked SituGLU: 896 experts of T_max 32768 would be 360 GB of input.
  const auto k3 = parse_spec(R"({"op": "activation", "kind": "situ", "beta": 4.0, "d": 3072, "layout": "masked", "num_experts": 896})", "t.json");
  CHECK(harness.bench_tokens(act(k3)) == std::vector<std::int64_t>{1, 3, 19, 74});
}

TEST_CASE("activation compare: outputs of a subnormal gate are equal within FLT_MIN * |u|", "[reference]") {
  const auto spec = parse_spec(R"({"op": "activation", "kind": "gelu", "d": 2, "dtype": "fp32", "out_dtype": "fp32"})", "t.json");
  const auto& op = act(spec);
  const auto& harness = harness_for("activation");
  constexpr float kInf = std::numeric_limits<float>::infinity();
  auto tensors = make_tensors(op, 1);
  // Row [g0, g1, u0, u1]: g0 = -14 puts gelu in erfc's subnormal tail; g1 = 1 does not.
  float* x = tensors[0].as<float>();
  x[0] = -14.0f, x[1] = 1.0f, x[2] = 1000.0f, x[3] = 1000.0f;
  harness.run(op, tensors, 1);
  auto got = make_tensors(op, 1);
  got[0] = tensors[0];
  got[1] = tensors[1];
  CHECK(harness.compare(op, tensors, got, 1).empty());
  float* out = got[1].as<float>();
  out[0] += 1e-40f * 1000.0f;  // within FLT_MIN * |u| of the reference: equal
  CHECK(harness.compare(op, tensors, got, 1).empty());
  out[1] = std::nextafter(std::nextafter(out[1], kInf), kInf);  // 2 ulp off a normal gate: within 8 ulp
  CHECK(harness.compare(op, tensors, got, 1).empty());
  out[1] *= 1.001f;  // far off a normal gate: a failure
  CHECK(harness.compare(op, tensors, got, 1).size() == 1);
  // u infinite: a subnormal gate times inf is inf, a zero one NaN; either is accepted.
  x[2] = kInf;
  harness.run(op, tensors, 1);
  got[1] = tensors[1];
  got[1].as<float>()[0] = std::isnan(tensors[1].as<float>()[0]) ? -kInf : std::numeric_limits<float>::quiet_NaN();
  CHECK(harness.compare(op, tensors, got, 1).empty());
}

TEST_CASE("activation compare reports failures in element order, whatever the threads that judge them", "[reference]") {
  // 200 rows of 64: 20 elements 1 ulp off (13 allowed) and two far off, spread over the rows.
  const auto spec = parse_spec(R"({"op": "activation", "kind": "silu", "d": 64})", "t.json");
  const auto& op = act(spec);
  const auto& harness = harness_for("activation");
  auto want = make_tensors(op, 200);
  for (std::size_t i = 0; i < want[0].elements(); ++i) want[0].as<std::uint16_t>()[i] = 0x3F80;  // 1.0
  harness.run(op, want, 200);
  auto got = want;
  auto* out = got[1].as<std::uint16_t>();
  CHECK(harness.compare(op, want, got, 200).empty());
  for (std::size_t i = 0; i < 2000; i += 100) ++out[i];
  CHECK(harness.compare(op, want, got, 200).size() == 8);  // the 14th to 20th, and the count
  out[1050] += 5;
  out[12000] += 5;
  const auto failures = harness.compare(op, want, got, 200);
  REQUIRE(failures.size() == 9);
  CHECK(failures[0].starts_with("out[16][26] (T=200): "));  // element 1050, the first far one
  for (std::size_t k = 1; k < 7; ++k) CHECK(failures[k].starts_with(fmt::format("out[{}][{}] ", (1200 + 100 * k) / 64, (1200 + 100 * k) % 64)));
  // the 8th line, element 1900, gave way to element 12000
  CHECK(failures[7] == "... and more: 2 elements far off, in 2 rows of 16 to 187");
  CHECK(failures[8] == "20 elements off by 1 ulp, at most 13 allowed");
}
