// The experts reference against a direct implementation of numerics.md "experts" written here
// (one slot at a time, no grouping, no threads), and the harness's inputs, comparison and counts.
#include <moejit/spec.hpp>

#include "reference/activation.hpp"
#include "reference/experts.hpp"
#include "reference/numeric.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

using namespace moejit;
using namespace moejit::reference;

namespace {

const ExpertsSpec& experts(const Spec& s) { return dynamic_cast<const ExpertsSpec&>(*s.ops[0]); }

Spec spec_of(const std::string& fields) { return parse_spec(R"({"op": "experts", )" + fields + "}", "t.json"); }

std::size_t at(std::int64_t i) { return static_cast<std::size_t>(i); }

// The documented dot order (experts.hpp): 16 fp32 lanes per 64-element block, blocks in double.
float dot(const std::vector<float>& a, const float* b) {
  double lanes[16] = {};
  for (std::size_t i = 0; i < a.size(); i += 64) {
    for (std::size_t l = 0; l < 16; ++l) {
      float p = a[i + l] * b[i + l];
      for (std::size_t q = 16; q < 64; q += 16) p = p + a[i + q + l] * b[i + q + l];
      lanes[l] += p;
    }
  }
  double s = 0;
  for (double v : lanes) s += v;
  return static_cast<float>(s);
}

float value(DType d, const HostTensor& t, std::int64_t i) { return load(d, t.data.data(), at(i)); }

std::vector<float> row_of(DType d, const HostTensor& t, std::int64_t first, std::int64_t n) {
  std::vector<float> r(at(n));
  for (std::int64_t i = 0; i < n; ++i) r[at(i)] = value(d, t, first + i);
  return r;
}

// One expert on one input row: GEMM1 rounded to D, the activation, GEMM2 (+ bias) times `w`
// when `scale`, rounded to D.
std::vector<float> expert_row(const ExpertsSpec& op, std::span<const HostTensor> t, int e, const std::vector<float>& x, float w,
                              bool scale) {
  const auto ix = experts_tensors(op);
  const DType d = op.dtype;
  const std::int64_t H = op.hidden, I = op.intermediate;
  std::vector<float> a(at(2 * I));
  for (std::int64_t j = 0; j < 2 * I; ++j) {
    float acc = dot(x, row_of(d, t[at(ix.w13)], (e * 2 * I + j) * H, H).data());
    if (op.bias) acc = acc + value(d, t[at(ix.b13)], e * 2 * I + j);
    a[at(j)] = round_to(d, acc);
  }
  ActivationSpec act;
  static_cast<ActivationParams&>(act) = op.activation;
  act.dtype = act.out_dtype = d;
  std::vector<float> h(at(I));
  for (std::int64_t i = 0; i < I; ++i) {
    const float g = op.activation.interleaved ? a[at(2 * i)] : a[at(i)];
    const float u = op.activation.interleaved ? a[at(2 * i + 1)] : a[at(I + i)];
    h[at(i)] = activation_element(act, g, u);
  }
  std::vector<float> o(at(H));
  for (std::int64_t c = 0; c < H; ++c) {
    float acc = dot(h, row_of(d, t[at(ix.w2)], (e * H + c) * I, I).data());
    if (op.bias) acc = acc + value(d, t[at(ix.b2)], e * H + c);
    if (scale) acc = acc * w;
    o[at(c)] = round_to(d, acc);
  }
  return o;
}

std::int64_t id_of(const HostTensor& ids, std::int64_t s) {
  return ids.dtype == DType::i64 ? ids.as<std::int64_t>()[s] : ids.as<std::int32_t>()[s];
}

// y from numerics.md, directly; `y` arrives with its initial contents.
void direct(const ExpertsSpec& op, std::span<HostTensor> t, std::int64_t tokens) {
  const auto ix = experts_tensors(op);
  const DType d = op.dtype;
  const std::int64_t H = op.hidden;
  auto& y = t[at(ix.y)];
  if (op.masked()) {
    for (std::int64_t e = 0; e < op.num_experts; ++e) {
      const std::int64_t rows = std::clamp<std::int64_t>(t[at(ix.counts)].as<std::int32_t>()[e], 0, tokens);
      for (std::int64_t r = 0; r < rows; ++r) {
        const auto o = expert_row(op, t, static_cast<int>(e), row_of(d, t[at(ix.x)], (e * tokens + r) * H, H), 1.0f, false);
        for (std::int64_t c = 0; c < H; ++c) store(d, y.data.data(), at((e * tokens + r) * H + c), o[at(c)]);
      }
    }
    return;
  }
  for (std::int64_t tok = 0; tok < tokens; ++tok) {
    std::vector<float> sum(at(H), 0.0f);
    for (std::int64_t k = 0; k < op.topk; ++k) {
      const std::int64_t id = id_of(t[at(ix.ids)], tok * op.topk + k);
      if (id < 0 || id >= op.id_range()) continue;
      const std::int64_t e = ix.map >= 0 ? t[at(ix.map)].as<std::int32_t>()[id] : id;
      if (e < 0 || e >= op.num_experts) continue;
      const float w = t[at(ix.weights)].as<float>()[tok * op.topk + k];
      auto x = row_of(d, t[at(ix.x)], tok * H, H);
      if (op.weight_on_input) {
        for (auto& v : x) v = round_to(d, v * w);
      }
      const auto o = expert_row(op, t, static_cast<int>(e), x, w, !op.weight_on_input);
      for (std::int64_t c = 0; c < H; ++c) sum[at(c)] = sum[at(c)] + o[at(c)];
    }
    for (std::int64_t c = 0; c < H; ++c) store(d, y.data.data(), at(tok * H + c), sum[at(c)]);
  }
}

struct Case {
  std::vector<HostTensor> want, got;  // `want` from the reference, `got` from direct()
};

Case run_both(const ExpertsSpec& op, std::int64_t tokens, int variant, std::uint64_t seed,
              void (*edit)(const ExpertsSpec&, std::span<HostTensor>, std::int64_t) = nullptr) {
  const auto& harness = harness_for("experts");
  Case c;
  c.want = make_tensors(op, tokens);
  Rng rng(seed);
  harness.fill_inputs(op, c.want, tokens, rng, variant);
  if (edit) edit(op, c.want, tokens);
  c.want[at(experts_tensors(op).y)].fill_bytes(std::byte{0x5A});
  c.got = c.want;
  harness.run(op, c.want, tokens);
  direct(op, c.got, tokens);
  return c;
}

bool same_y(const ExpertsSpec& op, const Case& c) {
  const auto y = at(experts_tensors(op).y);
  return c.want[y].data == c.got[y].data;
}

const char* kShapes[] = {
    R"("hidden": 64, "intermediate": 64, "num_experts": 4, "topk": 2, "activation": {"kind": "silu"})",
    R"("hidden": 128, "intermediate": 64, "num_experts": 5, "topk": 3, "activation": {"kind": "gelu"}, "dtype": "fp16", "ids_dtype": "int64")",
    R"("hidden": 64, "intermediate": 128, "num_experts": 6, "topk": 2, "bias": true,
       "activation": {"kind": "swiglu_oai", "alpha": 1.702, "limit": 7.0, "interleaved": true})",
    R"("hidden": 64, "intermediate": 64, "num_experts": 4, "topk": 1, "apply_router_weight_on_input": true, "activation": {"kind": "silu"})",
    R"("hidden": 64, "intermediate": 64, "num_experts": 3, "topk": 2, "apply_router_weight_on_input": true, "dtype": "fp16",
       "activation": {"kind": "gelu_tanh"})",
    R"("hidden": 128, "intermediate": 64, "num_experts": 4, "topk": 3, "global_experts": 10, "activation": {"kind": "situ", "beta": 4.0, "linear_beta": 25.0})",
    R"("hidden": 64, "intermediate": 64, "num_experts": 4, "topk": 4, "global_experts": 4, "bias": true, "activation": {"kind": "silu", "interleaved": true})",
    R"("hidden": 64, "intermediate": 64, "num_experts": 5, "layout": "masked", "activation": {"kind": "silu"})",
    R"("hidden": 64, "intermediate": 128, "num_experts": 3, "layout": "masked", "bias": true, "dtype": "fp16",
       "activation": {"kind": "swiglu_oai", "interleaved": true})",
};

}  // namespace

TEST_CASE("fp16 and bf16 rows convert exactly, every bit pattern", "[reference][experts]") {
  std::vector<std::uint16_t> bits(65536);
  for (std::size_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<std::uint16_t>(i);
  std::vector<float> out(bits.size());
  for (DType d : {DType::bf16, DType::f16}) {
    to_float_row(d, bits.data(), out.data(), 65536);
    for (std::size_t i = 0; i < bits.size(); ++i) {
      const float want = load(d, bits.data(), i);
      INFO("dtype " << spec_name(d) << " bits " << i);
      if (std::isnan(want)) {
        CHECK(std::isnan(out[i]));
      } else {
        std::uint32_t a, b;
        std::memcpy(&a, &out[i], 4);
        std::memcpy(&b, &want, 4);
        CHECK(a == b);
      }
    }
  }
}

TEST_CASE("the dot product is close to the exact sum and follows its documented order", "[reference][experts]") {
  Rng rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> a(7168), b(7168);
  for (auto& v : a) v = normal(rng);
  for (auto& v : b) v = normal(rng);
  double exact = 0, magnitude = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    exact += static_cast<double>(a[i]) * b[i];
    magnitude += std::fabs(static_cast<double>(a[i]) * b[i]);
  }
  const float d = experts_dot(a.data(), b.data(), 7168);
  CHECK(std::fabs(d - exact) <= 1e-6 * magnitude);
  CHECK(d == dot(a, b.data()));
  CHECK(experts_dot(a.data(), b.data(), 0) == 0.0f);
}

TEST_CASE("the reference equals a direct implementation of numerics.md", "[reference][experts]") {
  for (const char* shape : kShapes) {
    const auto spec = spec_of(shape);
    const auto& op = experts(spec);
    for (int variant = 0; variant < 3; ++variant) {
      for (std::int64_t tokens : {0, 1, 9}) {
        INFO(op.canonical_json() << " variant " << variant << " T=" << tokens);
        const auto c = run_both(op, tokens, variant, 100 + static_cast<std::uint64_t>(variant));
        CHECK(same_y(op, c));
        CHECK(harness_for("experts").compare(op, c.want, c.got, tokens).empty());
      }
    }
  }
}

TEST_CASE("invalid slots contribute nothing; a token without a valid slot is +0", "[reference][experts]") {
  const auto spec = spec_of(R"("hidden": 64, "intermediate": 64, "num_experts": 4, "topk": 3, "global_experts": 6, "activation": {"kind": "silu"})");
  const auto& op = experts(spec);
  auto edit = [](const ExpertsSpec& o, std::span<HostTensor> t, std::int64_t) {
    const auto ix = experts_tensors(o);
    auto* map = t[at(ix.map)].as<std::int32_t>();
    const std::int32_t m[] = {2, -1, 0, 7, 1, 3};  // id 1: not on this rank; id 3: outside [0, E)
    std::copy(std::begin(m), std::end(m), map);
    const std::int32_t ids[] = {0, 1, 2,             // slot 1 dropped by the map
                                -1, 6, 1 << 30,      // none valid: y = +0
                                3, 5, 4,             // slot 0 maps outside [0, E)
                                2, 2, 0};            // the same expert twice: both count
    std::copy(std::begin(ids), std::end(ids), t[at(ix.ids)].as<std::int32_t>());
  };
  const auto c = run_both(op, 4, 0, 7, edit);
  CHECK(same_y(op, c));
  const auto* y = c.want[at(experts_tensors(op).y)].as<std::uint16_t>();
  for (int h = 0; h < 64; ++h) CHECK(y[64 + h] == 0x0000);

  // An invalid slot's weight is never read: a NaN there changes nothing.
  auto alone = c.want;
  alone[2].as<float>()[0 * 3 + 1] = std::numeric_limits<float>::quiet_NaN();
  alone[2].as<float>()[1 * 3 + 2] = std::numeric_limits<float>::quiet_NaN();
  harness_for("experts").run(op, alone, 4);
  CHECK(alone[at(experts_tensors(op).y)].data == c.want[at(experts_tensors(op).y)].data);
}

TEST_CASE("masked: counts are clamped and rows past them keep their contents", "[reference][experts]") {
  const auto spec = spec_of(R"("hidden": 64, "intermediate": 64, "num_experts": 4, "layout": "masked", "activation": {"kind": "silu"})");
  const auto& op = experts(spec);
  auto edit = [](const ExpertsSpec& o, std::span<HostTensor> t, std::int64_t) {
    const std::int32_t counts[] = {-3, 2, 99, 0};
    std::copy(std::begin(counts), std::end(counts), t[at(experts_tensors(o).counts)].as<std::int32_t>());
  };
  const std::int64_t tokens = 5;
  const auto c = run_both(op, tokens, 0, 11, edit);
  CHECK(same_y(op, c));
  const auto* y = c.want[at(experts_tensors(op).y)].as<std::uint16_t>();
  const std::int64_t rows[] = {0, 2, 5, 0};
  for (std::int64_t e = 0; e < 4; ++e) {
    for (std::int64_t r = 0; r < tokens; ++r) {
      INFO("expert " << e << " row " << r);
      bool untouched = true;
      for (std::int64_t h = 0; h < 64; ++h) untouched = untouched && y[(e * tokens + r) * 64 + h] == 0x5A5A;
      CHECK(untouched == (r >= rows[e]));
    }
  }
  const auto& harness = harness_for("experts");
  CHECK(harness.flops(op, c.want, tokens) == 2.0 * 7 * 3 * 64 * 64);
  CHECK(harness.bytes_moved(op, c.want, tokens) == 2.0 * 7 * 64 * 2 + 4 * 4 + 2.0 * static_cast<double>(op.expert_bytes()));
}

TEST_CASE("the exact variant's y is the activation of slot 0's gate and up values", "[reference][experts]") {
  for (const char* shape : {kShapes[0], kShapes[2], kShapes[5], kShapes[7]}) {
    const auto spec = spec_of(shape);
    const auto& op = experts(spec);
    INFO(op.canonical_json());
    const std::int64_t tokens = 6, H = op.hidden, I = op.intermediate;
    auto t = make_tensors(op, tokens);
    Rng rng(3);
    harness_for("experts").fill_inputs(op, t, tokens, rng, 2);
    harness_for("experts").run(op, t, tokens);
    const auto ix = experts_tensors(op);
    ActivationSpec act;
    static_cast<ActivationParams&>(act) = op.activation;
    act.dtype = act.out_dtype = op.dtype;
    const std::int64_t rows = op.masked() ? op.num_experts * tokens : tokens;
    for (std::int64_t r = 0; r < rows; ++r) {
      std::int64_t e = r / tokens;
      if (op.masked()) {
        if (r % tokens >= std::clamp<std::int64_t>(t[at(ix.counts)].as<std::int32_t>()[e], 0, tokens)) continue;
      } else {
        const std::int64_t id = id_of(t[at(ix.ids)], r * op.topk);
        e = ix.map >= 0 ? t[at(ix.map)].as<std::int32_t>()[id] : id;
        REQUIRE(e >= 0);
      }
      // a_j = round_D(sum over x's three +-1 entries of w13[e][j][h]): exact in any order.
      auto a = [&](std::int64_t j) {
        float s = 0;
        for (std::int64_t h = 0; h < H; ++h) {
          const float xv = value(op.dtype, t[at(ix.x)], r * H + h);
          if (xv != 0) s += xv * value(op.dtype, t[at(ix.w13)], (e * 2 * I + j) * H + h);
        }
        return round_to(op.dtype, s);
      };
      for (std::int64_t c = 0; c < H; ++c) {
        const std::int64_t i = c % I;
        const float g = op.activation.interleaved ? a(2 * i) : a(i), u = op.activation.interleaved ? a(2 * i + 1) : a(I + i);
        INFO("row " << r << " column " << c);
        CHECK(value(op.dtype, t[at(ix.y)], r * H + c) == activation_element(act, g, u));
      }
    }
  }
}

TEST_CASE("experts compare accepts the reference and rejects what numerics.md rules out", "[reference][experts]") {
  const auto& harness = harness_for("experts");
  const auto spec = spec_of(R"("hidden": 64, "intermediate": 64, "num_experts": 8, "topk": 2, "activation": {"kind": "silu"})");
  const auto& op = experts(spec);
  const std::int64_t tokens = 16;
  const auto y = at(experts_tensors(op).y);
  for (int variant = 0; variant < 3; ++variant) {
    INFO("variant " << variant);
    auto want = make_tensors(op, tokens);
    Rng rng(21);
    harness.fill_inputs(op, want, tokens, rng, variant);
    harness.run(op, want, tokens);
    CHECK(harness.compare(op, want, want, tokens).empty());

    // 2% too large everywhere (and so 3+ ulp off in bf16 on the exact variant).
    auto got = want;
    for (std::size_t i = 0; i < got[y].elements(); ++i) store(DType::bf16, got[y].data.data(), i, 1.02f * load(DType::bf16, want[y].data.data(), i));
    auto failures = harness.compare(op, want, got, tokens);
    REQUIRE_FALSE(failures.empty());
    CHECK(failures.size() <= 8);
    CHECK(failures.front().find("T=16") != std::string::npos);
    if (failures.size() == 8) CHECK(failures.back().starts_with("... and "));  // "... and N more"

    // One NaN.
    got = want;
    std::size_t nonzero = 0;
    while (load(DType::bf16, want[y].data.data(), nonzero) == 0) ++nonzero;
    got[y].as<std::uint16_t>()[nonzero] = 0x7FC0;
    failures = harness.compare(op, want, got, tokens);
    REQUIRE(failures.size() == 1);
    CHECK(failures[0].find("got nan") != std::string::npos);
    CHECK(failures[0].find("slots' experts [") != std::string::npos);
  }
  // The exact variant: 1 ulp on a rate of 1e-3 of the elements, judged on 1024 elements with the
  // allowance of a Poisson count of mean 1.024 (exceeded with odds below 1e-6: 9); never 2 ulp.
  auto want = make_tensors(op, tokens);
  Rng rng(22);
  harness.fill_inputs(op, want, tokens, rng, 2);
  harness.run(op, want, tokens);
  auto got = want;
  auto* bits = got[y].as<std::uint16_t>();
  for (int n = 1; n <= 9; ++n) {
    bits[10 * n] ^= 1;
    CHECK(harness.compare(op, want, got, tokens).empty());
  }
  bits[100] ^= 1;
  const auto ten = harness.compare(op, want, got, tokens);
  REQUIRE_FALSE(ten.empty());
  CHECK(ten.back().find("10 elements off by 1 ulp, at most 9") != std::string::npos);
  got = want;
  got[y].as<std::uint16_t>()[40] += 2;
  CHECK(harness.compare(op, want, got, tokens).front().find("(2 ulp)") != std::string::npos);
}

TEST_CASE("experts compare: empty tokens are exactly 0, unwritten masked rows untouched", "[reference][experts]") {
  const auto& harness = harness_for("experts");
  const auto spec = spec_of(R"("hidden": 64, "intermediate": 64, "num_experts": 8, "topk": 2, "activation": {"kind": "silu"})");
  const auto& op = experts(spec);
  auto want = make_tensors(op, 8);
  Rng rng(1);
  harness.fill_inputs(op, want, 8, rng, 1);  // token 5 has no valid slot
  harness.run(op, want, 8);
  auto got = want;
  got[at(experts_tensors(op).y)].as<std::uint16_t>()[5 * 64 + 7] = 0x3F80;  // a tiny error in norm, but not 0
  const auto failures = harness.compare(op, want, got, 8);
  REQUIRE(failures.size() == 1);
  CHECK(failures[0].find("y[5][7] (token 5, slots' experts [-, -]): got 1 want 0, the token has no valid slot") != std::string::npos);

  const auto mspec = spec_of(R"("hidden": 64, "intermediate": 64, "num_experts": 3, "layout": "masked", "activation": {"kind": "silu"})");
  const auto& masked = experts(mspec);
  auto mwant = make_tensors(masked, 4);
  harness.fill_inputs(masked, mwant, 4, rng, 0);  // counts 0, 4, 2
  const auto my = at(experts_tensors(masked).y);
  mwant[my].fill_bytes(std::byte{0x5A});
  harness.run(masked, mwant, 4);
  CHECK(harness.compare(masked, mwant, mwant, 4).empty());
  auto mgot = mwant;
  mgot[my].as<std::uint16_t>()[(2 * 4 + 3) * 64 + 9] = 0;  // expert 2, row 3: past its count of 2
  const auto mf = harness.compare(masked, mwant, mgot, 4);
  REQUIRE(mf.size() == 1);
  CHECK(mf[0].find("y[2][3][9] (expert 2, row 3 of 2): got 0 want") != std::string::npos);
  CHECK(mf[0].find("a row past the count was written") != std::string::npos);
}

TEST_CASE("experts: a non-finite x makes its own token's y non-finite and no other's; compare asks the same of the GPU", "[reference][experts]") {
  const auto& harness = harness_for("experts");
  const auto spec = spec_of(R"("hidden": 64, "intermediate": 64, "num_experts": 8, "topk": 2, "activation": {"kind": "silu"})");
  const auto& op = experts(spec);
  const auto ix = experts_tensors(op);
  const std::int64_t tokens = 16, H = 64;
  auto want = make_tensors(op, tokens);
  Rng rng(5);
  harness.fill_inputs(op, want, tokens, rng, 1);
  // Tokens 3, 5, 11 and 13 hold one non-finite x element each, the others none.
  for (std::int64_t t = 0; t < tokens; ++t) {
    std::int64_t non_finite = 0;
    for (std::int64_t c = 0; c < H; ++c) non_finite += !std::isfinite(value(op.dtype, want[at(ix.x)], t * H + c));
    INFO("token " << t);
    CHECK(non_finite == (t % 8 == 3 || t % 8 == 5 ? 1 : 0));
  }
  // The same call with x made finite again: only the poisoned tokens' y changes.
  auto clean = want;
  for (std::size_t i = 0; i < clean[at(ix.x)].elements(); ++i) {
    if (!std::isfinite(load(op.dtype, clean[at(ix.x)].data.data(), i))) store(op.dtype, clean[at(ix.x)].data.data(), i, 0.5f);
  }
  harness.run(op, want, tokens);
  harness.run(op, clean, tokens);
  const auto y = at(ix.y);
  for (std::int64_t t = 0; t < tokens; ++t) {
    std::int64_t non_finite = 0, same = 0;
    for (std::int64_t c = 0; c < H; ++c) {
      non_finite += !std::isfinite(value(op.dtype, want[y], t * H + c));
      same += std::memcmp(want[y].data.data() + at(t * H + c) * 2, clean[y].data.data() + at(t * H + c) * 2, 2) == 0;
    }
    INFO("token " << t);
    if (t % 8 == 3) CHECK(non_finite > 0);      // silu(-inf) is NaN, silu(+inf) * up is +-inf
    if (t % 8 == 5) CHECK(same == H);           // no valid slot: +0 whatever x holds
    if (t % 8 != 3 && t % 8 != 5) CHECK(same == H);
  }
  CHECK(harness.compare(op, want, want, tokens).empty());
  // A finite value where the reference is non-finite fails, naming the rule.
  std::int64_t i = 3 * H;
  while (std::isfinite(value(op.dtype, want[y], i))) ++i;
  auto got = want;
  store(op.dtype, got[y].data.data(), at(i), 1.0f);
  const auto failures = harness.compare(op, want, got, tokens);
  REQUIRE(failures.size() == 1);
  CHECK(failures[0].find("got 1 want") != std::string::npos);
  CHECK(failures[0].find("where a non-finite x makes y non-finite") != std::string::npos);
  // Either kind of non-finite value passes there (the GPU's sums may meet inf - inf in another order).
  store(op.dtype, got[y].data.data(), at(i), std::isnan(value(op.dtype, want[y], i)) ? std::numeric_limits<float>::infinity()
                                                                                  : std::numeric_limits<float>::quiet_NaN());
  CHECK(harness.compare(op, want, got, tokens).empty());
}

TEST_CASE("experts inputs: routing, invalid slots, the expert map and counts", "[reference][experts]") {
  const auto& harness = harness_for("experts");
  const auto spec = spec_of(R"("hidden": 64, "intermediate": 64, "num_experts": 16, "topk": 4, "global_experts": 32, "activation": {"kind": "silu"})");
  const auto& op = experts(spec);
  const auto ix = experts_tensors(op);
  const std::int64_t tokens = 64;
  for (int variant : {0, 1, 2, 4}) {
    INFO("variant " << variant);
    auto t = make_tensors(op, tokens);
    Rng rng(9);
    harness.fill_inputs(op, t, tokens, rng, variant);
    const auto* map = t[at(ix.map)].as<std::int32_t>();
    CHECK(std::count(map, map + 32, -1) == 8);  // about 3/4 mapped
    std::int64_t invalid = 0, empty = 0, on_hot = 0;
    for (std::int64_t tok = 0; tok < tokens; ++tok) {
      std::int64_t valid = 0;
      for (std::int64_t k = 0; k < 4; ++k) {
        const auto id = t[at(ix.ids)].as<std::int32_t>()[tok * 4 + k];
        const float w = t[at(ix.weights)].as<float>()[tok * 4 + k];
        for (std::int64_t j = 0; j < k; ++j) CHECK((id < 0 || id >= 32 || id != t[at(ix.ids)].as<std::int32_t>()[tok * 4 + j]));
        const bool ok = local_expert(op, id, map) >= 0;
        valid += ok;
        invalid += !ok;
        on_hot += k == 0 && local_expert(op, id, map) == 0;  // the hot expert
        if (variant == 2) CHECK(w == (k == 0 ? 1.0f : 0.0f));
        else CHECK((w > 0.0f && w <= 1.0f));
      }
      empty += valid == 0;
    }
    if (variant == 1) {
      CHECK(invalid > 10);
      CHECK(empty >= 8);  // tokens 5 mod 8, and any whose slots all came out invalid
      CHECK(on_hot > 40);
    } else {
      CHECK(invalid == 0);
      CHECK(on_hot == (variant == 4 ? tokens : on_hot));
    }
  }
  // The same seed, the same inputs.
  auto a = make_tensors(op, 8), b = make_tensors(op, 8);
  Rng ra(4), rb(4);
  harness.fill_inputs(op, a, 8, ra, 0);
  harness.fill_inputs(op, b, 8, rb, 0);
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i].data == b[i].data);

  const auto mspec = spec_of(R"("hidden": 64, "intermediate": 64, "num_experts": 10, "layout": "masked", "activation": {"kind": "silu"})");
  const auto& masked = experts(mspec);
  auto m = make_tensors(masked, 7);
  Rng rng(2);
  harness.fill_inputs(masked, m, 7, rng, 1);
  const auto* counts = m[1].as<std::int32_t>();
  CHECK(counts[0] < 0);
  CHECK(counts[1] > 7);
  CHECK(counts[2] == std::numeric_limits<std::int32_t>::min());
  CHECK(counts[3] == std::numeric_limits<std::int32_t>::max());
  harness.fill_inputs(masked, m, 7, rng, 3);
  CHECK(std::count(counts, counts + 10, 7) == 10);
  harness.fill_inputs(masked, m, 8, rng, 4);
  CHECK(counts[0] == 8);
  CHECK(counts[1] == 1);
}

TEST_CASE("experts token lists, bench inputs, bytes and flops", "[reference][experts]") {
  const auto& harness = harness_for("experts");
  const auto spec = spec_of(R"("hidden": 64, "intermediate": 128, "num_experts": 8, "topk": 2, "activation": {"kind": "silu"})");
  const auto& op = experts(spec);
  CHECK(harness.check_tokens(op) == std::vector<std::int64_t>{0, 1, 3, 8, 64});
  CHECK(harness.bench_tokens(op) == std::vector<std::int64_t>{1, 8, 32, 64, 512, 4096});
  const auto bench = harness.bench_inputs(op);
  REQUIRE(bench.size() == 2);
  CHECK(bench[0].name == "uniform");
  CHECK(bench[1].name == "skewed");
  const auto small = spec_of(R"("hidden": 64, "intermediate": 64, "num_experts": 8, "layout": "masked", "max_tokens": 100, "activation": {"kind": "silu"})");
  CHECK(harness.check_tokens(experts(small)) == std::vector<std::int64_t>{0, 1, 7, 64});
  CHECK(harness.bench_tokens(experts(small)) == std::vector<std::int64_t>{1, 8, 64});

  // Three tokens: experts {1, 2}, {1, invalid}, {invalid, invalid}: two experts' weights, three slots.
  auto t = make_tensors(op, 3);
  const std::int32_t ids[] = {1, 2, 1, -1, 8, -1};
  std::copy(std::begin(ids), std::end(ids), t[1].as<std::int32_t>());
  CHECK(harness.flops(op, t, 3) == 2.0 * 3 * 3 * 64 * 128);
  CHECK(harness.bytes_moved(op, t, 3) == 2.0 * 3 * 64 * 2 + 6 * (4 + 4) + 2.0 * 3 * 64 * 128 * 2);
}
