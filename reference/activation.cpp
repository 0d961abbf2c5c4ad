#include "activation.hpp"

#include "numeric.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <string>
#include <vector>

namespace moejit::reference {

namespace {

const ActivationSpec& as_activation(const OpSpec& op) { return dynamic_cast<const ActivationSpec&>(op); }

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

std::int64_t clamp_count(std::int32_t count, std::int64_t tokens) {
  return std::clamp<std::int64_t>(count, 0, tokens);
}

// Rows of expert e that the op processes.
std::int64_t rows_of(const ActivationSpec& op, const std::int32_t* counts, std::int64_t e, std::int64_t tokens) {
  return op.layout == ActivationLayout::masked ? clamp_count(counts[e], tokens) : tokens;
}

}  // namespace

float activation_gate(const ActivationSpec& op, float g) noexcept {
  switch (op.kind) {
    case ActivationKind::silu: return g / (1.0f + std::exp(-g));
    case ActivationKind::gelu: return (0.5f * g) * std::erfc(-(g * 0.70710678118654752f));
    case ActivationKind::gelu_tanh: {
      const float inner = 0.7978845608f * (g + 0.044715f * ((g * g) * g));
      return g / (1.0f + std::exp(-(2.0f * inner)));
    }
    case ActivationKind::swiglu_oai:
    case ActivationKind::situ: return 1.0f;  // no separately evaluated gate with a subnormal tail
  }
  return 1.0f;
}

float activation_element(const ActivationSpec& op, float g, float u) noexcept {
  const DType out = op.out_dtype;
  switch (op.kind) {
    case ActivationKind::silu: {
      const float a = round_to(out, g / (1.0f + std::exp(-g)));
      return round_to(out, a * u);
    }
    case ActivationKind::gelu: {  // 1 + erf(x) evaluated as erfc(-x): no cancellation
      const float a = round_to(out, (0.5f * g) * std::erfc(-(g * 0.70710678118654752f)));
      return round_to(out, a * u);
    }
    case ActivationKind::gelu_tanh: {  // 0.5 (1 + tanh(y)) evaluated as 1 / (1 + exp(-2y))
      const float cube = (g * g) * g;
      const float inner = 0.7978845608f * (g + 0.044715f * cube);
      const float a = round_to(out, g / (1.0f + std::exp(-(2.0f * inner))));
      return round_to(out, a * u);
    }
    case ActivationKind::swiglu_oai: {
      const float gc = g > op.limit ? op.limit : g;
      const float uc = u > op.limit ? op.limit : (u < -op.limit ? -op.limit : u);
      const float glu = gc * sigmoid(op.alpha * gc);
      return round_to(out, (uc + 1.0f) * glu);
    }
    case ActivationKind::situ: {
      const float inv_beta = 1.0f / op.beta;
      const float a = (op.beta * std::tanh(g * inv_beta)) * sigmoid(g);
      float v = u;
      if (op.linear_beta > 0) v = op.linear_beta * std::tanh(u * (1.0f / op.linear_beta));
      return round_to(out, a * v);
    }
  }
  return 0;
}

void activation_reference(const ActivationSpec& op, const HostTensor& x, const std::int32_t* counts, HostTensor& out,
                          std::int64_t tokens) {
  const std::int64_t experts = op.layout == ActivationLayout::masked ? op.num_experts : 1;
  const auto d = static_cast<std::size_t>(op.d);
  parallel_rows(experts * tokens, [&](std::int64_t r) {
    const std::int64_t e = r / std::max<std::int64_t>(tokens, 1), t = r % std::max<std::int64_t>(tokens, 1);
    if (t < rows_of(op, counts, e, tokens)) {
      const auto row = static_cast<std::size_t>(r);
      for (std::size_t j = 0; j < d; ++j) {
        const std::size_t gi = op.interleaved ? row * 2 * d + 2 * j : row * 2 * d + j;
        const std::size_t ui = op.interleaved ? gi + 1 : gi + d;
        const float g = load(op.dtype, x.data.data(), gi);
        const float u = load(op.dtype, x.data.data(), ui);
        store(op.out_dtype, out.data.data(), row * d + j, activation_element(op, g, u));
      }
    }
  });
}

std::vector<std::int64_t> ActivationHarness::check_tokens(const OpSpec& spec) const {
  // Masked: keep E x T rows near 64K, so a check of a 896-expert layout stays seconds long.
  const auto& op = as_activation(spec);
  if (op.layout != ActivationLayout::masked) return {0, 1, 7, 33, 1024};
  return {0, 1, 7, std::clamp<std::int64_t>(65536 / op.num_experts, 8, 1024)};
}

std::vector<std::int64_t> ActivationHarness::bench_tokens(const OpSpec& spec) const {
  const auto& op = as_activation(spec);
  auto tokens = OpHarness::bench_tokens(spec);
  if (op.layout != ActivationLayout::masked) return tokens;
  for (auto& t : tokens) t = std::max<std::int64_t>(1, (2 * t + op.num_experts - 1) / op.num_experts);
  tokens.erase(std::unique(tokens.begin(), tokens.end()), tokens.end());
  return tokens;
}

std::string ActivationHarness::variant_name(int variant) const {
  switch (variant) {
    case 0: return "normal(0, 2)";
    case 1: return "large, zero and infinite values, subnormal sigmoids";
    case 2: return "half-full experts";
    case 3: return "0-12 rows an expert";
    case 4: return "expert 0 full, the others empty";
    default: return "every expert full";
  }
}

std::vector<OpHarness::BenchInputs> ActivationHarness::bench_inputs(const OpSpec& spec) const {
  if (as_activation(spec).layout != ActivationLayout::masked) return {{"uniform", 2, "uniform(-4, 4)"}};
  // A masked activation's rows are whatever the dispatch sent: half full (the typical load), a
  // few rows an expert (decode with a large T_max), all on one expert (a skewed router), or
  // every expert full (the layout's cost beside dense at the same rows).
  return {{"half-full", 2, variant_name(2)}, {"few", 3, variant_name(3)}, {"one-full", 4, variant_name(4)},
          {"full", 5, variant_name(5)}};
}

namespace {

// Bench-sized inputs: a cheap hash (splitmix64) of the index, uniform in [-4, 4), no zeros.
float hashed_input(std::uint64_t seed, std::size_t i) {
  std::uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * (8.0f / 16777216.0f) - 3.999f;
}

// One row of variant 0 (normal) or 1 (special values) inputs, from the row's own stream.
void fill_random_row(const ActivationSpec& op, int variant, Rng rng, void* x, std::size_t first, std::size_t count) {
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::uniform_real_distribution<float> large(-50.0f, 50.0f);
  // Arguments of the sigmoid whose 1 / (1 + exp(-x)) is subnormal (1 + exp(-x) in [2^126,
  // FLT_MAX]): the GPU's reciprocal leaves its fast path there (templates/activation.cuh).
  const float sigmoid_scale = op.kind == ActivationKind::swiglu_oai ? op.alpha : 1.0f;
  std::uniform_real_distribution<float> subnormal_sigmoid(-88.6f / sigmoid_scale, -87.4f / sigmoid_scale);
  std::uniform_int_distribution<int> pick(0, 99);
  constexpr float kInf = std::numeric_limits<float>::infinity();
  for (std::size_t i = first; i < first + count; ++i) {
    float v = normal(rng);
    if (variant == 1) {
      const int p = pick(rng);
      if (p < 10) v = 0.0f;
      else if (p < 40) v = large(rng);
      else if (p < 42) v = kInf;
      else if (p < 44) v = -kInf;
      else if (p < 46) v = subnormal_sigmoid(rng);
    }
    store(op.dtype, x, i, v);
  }
}

}  // namespace

void ActivationHarness::fill_inputs(const OpSpec& spec, std::span<HostTensor> tensors, std::int64_t tokens, Rng& rng,
                                    int variant) const {
  const auto& op = as_activation(spec);
  auto& x = tensors[0];
  // Rows fill in parallel: bench inputs hash their index, the others draw from the row's stream.
  const std::uint64_t seed = rng();
  const std::size_t row_elements = 2 * static_cast<std::size_t>(op.d);
  parallel_rows(static_cast<std::int64_t>(x.elements() / row_elements), [&](std::int64_t r) {
    const std::size_t first = static_cast<std::size_t>(r) * row_elements;
    if (variant < 2) {
      fill_random_row(op, variant, row_rng(seed, r), x.data.data(), first, row_elements);
    } else {
      for (std::size_t i = first; i < first + row_elements; ++i) store(op.dtype, x.data.data(), i, hashed_input(seed, i));
    }
  });
  if (op.layout != ActivationLayout::masked) return;
  // Experts with no rows, all rows, some rows, and counts outside [0, T] (clamped).
  auto* counts = tensors[1].as<std::int32_t>();
  std::uniform_int_distribution<std::int64_t> some(0, tokens);
  for (std::int64_t e = 0; e < op.num_experts; ++e) {
    if (variant >= 2) {
      // The same counts for every seed: bench figures compare across runs and binaries.
      constexpr std::int32_t kFew[] = {3, 0, 7, 1, 12, 5, 0, 2};
      const std::int64_t n = variant == 2   ? tokens / 2
                             : variant == 3 ? kFew[e % 8]
                             : variant == 4 ? (e == 0 ? tokens : 0)
                                            : tokens;
      counts[e] = static_cast<std::int32_t>(std::min(n, tokens));
      continue;
    }
    // Variant 1: below 0 and past T, as far as int32 goes every other time.
    const bool far = e % 10 >= 5;
    switch (e % 5) {
      case 0:
        counts[e] = variant == 1 ? (far ? std::numeric_limits<std::int32_t>::min() : -3) : 0;
        break;
      case 1: counts[e] = static_cast<std::int32_t>(tokens); break;
      case 2: counts[e] = static_cast<std::int32_t>(tokens / 2); break;
      case 3: counts[e] = static_cast<std::int32_t>(some(rng)); break;
      default:
        counts[e] = variant == 1 ? (far ? std::numeric_limits<std::int32_t>::max() : static_cast<std::int32_t>(tokens + 3))
                                 : static_cast<std::int32_t>(some(rng));
    }
  }
}

void ActivationHarness::run(const OpSpec& spec, std::span<HostTensor> tensors, std::int64_t tokens) const {
  const auto& op = as_activation(spec);
  const bool masked = op.layout == ActivationLayout::masked;
  activation_reference(op, tensors[0], masked ? tensors[1].as<std::int32_t>() : nullptr, tensors[masked ? 2 : 1], tokens);
}

namespace {

enum class Verdict { equal, off_by_one, failed };

// One output element against the reference, by numerics.md's rules (ActivationHarness::compare).
class Judge {
 public:
  Judge(const ActivationSpec& op, const HostTensor& x, const HostTensor& want, const HostTensor& got)
      : op_(op), x_(x), w_(want), g_(got), d_(static_cast<std::size_t>(op.d)), fp32_(op.out_dtype == DType::f32),
        fp32_ulps_(op.kind == ActivationKind::situ ? 16 : 8) {}

  Verdict operator()(std::size_t i) const {
    const auto dist = ulps(i);
    if (dist == 0 || (fp32_ && dist <= fp32_ulps_) || (subnormal(w_, i) && subnormal(g_, i)) || gate_tail(i)) {
      return Verdict::equal;
    }
    return !fp32_ && dist == 1 ? Verdict::off_by_one : Verdict::failed;
  }

  std::string describe(std::size_t i, std::int64_t tokens) const {
    return fmt::format("out[{}][{}] (T={}): got {} want {} ({} ulp)", i / d_, i % d_, tokens, load(op_.out_dtype, g_.data.data(), i),
                       load(op_.out_dtype, w_.data.data(), i), ulps(i));
  }

 private:
  static constexpr float kMin = std::numeric_limits<float>::min();

  std::int64_t ulps(std::size_t i) const { return ulp_distance(op_.out_dtype, w_.data.data(), g_.data.data(), i); }
  bool subnormal(const HostTensor& t, std::size_t i) const { return std::fabs(load(op_.out_dtype, t.data.data(), i)) < kMin; }

  // Neither libm nor CUDA is ulp-accurate in a transcendental's far tail (gelu's erfc at
  // g < -9, up to 253 ulp apart near 1e-38): where the CPU's gate a = act(g) is below 2^-100,
  // fp32 outputs count as equal within 64 ulp, and where it is below FLT_MIN (subnormal: known
  // only to about FLT_MIN, absolutely) within FLT_MIN * |u| (both NaN or infinite when u is
  // infinite: 0 * inf is NaN, a subnormal * inf is inf).
  bool gate_tail(std::size_t i) const {
    const std::size_t row = i / d_, j = i % d_;
    const std::size_t gi = op_.interleaved ? row * 2 * d_ + 2 * j : row * 2 * d_ + j;
    const std::size_t ui = op_.interleaved ? gi + 1 : gi + d_;
    const float gv = load(op_.dtype, x_.data.data(), gi), uv = load(op_.dtype, x_.data.data(), ui);
    const float a = std::fabs(activation_gate(op_, gv));
    if (!(a < 0x1p-100f)) return false;
    if (fp32_ && ulps(i) <= 64) return true;
    if (!(a < kMin)) return false;
    const float wv = load(op_.out_dtype, w_.data.data(), i), ov = load(op_.out_dtype, g_.data.data(), i);
    if (std::isinf(uv)) return !std::isfinite(wv) && !std::isfinite(ov);
    return std::fabs(ov - wv) <= kMin * std::fabs(uv);
  }

  const ActivationSpec& op_;
  const HostTensor &x_, &w_, &g_;
  std::size_t d_;
  bool fp32_;
  // situ chains three transcendentals (two tanhf, one expf), each up to 2 ulp on the GPU (9 ulp seen in fp32).
  std::int64_t fp32_ulps_;
};

struct RowVerdicts {
  std::size_t off_by_one = 0, failed = 0;
};

// "... and more", with the far-off elements' count and the rows they lie in: a block of rows
// (a grid's last blocks) tells a kernel cut short from scattered misses.
std::string and_more(std::span<const RowVerdicts> rows) {
  std::size_t failed = 0, first = rows.size(), last = 0, failing_rows = 0;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    if (rows[r].failed == 0) continue;
    failed += rows[r].failed;
    first = std::min(first, r);
    last = r;
    ++failing_rows;
  }
  if (failed == 0) return "... and more";
  return fmt::format("... and more: {} elements far off, in {} rows of {} to {}", failed, failing_rows, first, last);
}

// The failure lines of one pass in element order: up to 8 (the 8th becomes and_more's line when
// more follow), then the count of 1-ulp differences past the allowance. Rows with nothing to say
// are skipped by their counts.
std::vector<std::string> failure_lines(const Judge& judge, std::span<const RowVerdicts> rows, std::size_t d,
                                       std::size_t allowed, std::int64_t tokens) {
  std::size_t off_by_one = 0;
  bool more = false;  // "... and more" said: later failures change nothing but the count
  std::vector<std::string> failures;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    if (more || (rows[r].failed == 0 && off_by_one + rows[r].off_by_one <= allowed)) {
      off_by_one += rows[r].off_by_one;
      continue;
    }
    for (std::size_t i = r * d; i < (r + 1) * d; ++i) {
      const Verdict v = judge(i);
      if (v == Verdict::equal || (v == Verdict::off_by_one && ++off_by_one <= allowed)) continue;
      if (failures.size() < 8) {
        failures.push_back(judge.describe(i, tokens));
      } else {
        failures.back() = and_more(rows);
        more = true;
      }
    }
  }
  if (off_by_one > allowed) failures.push_back(fmt::format("{} elements off by 1 ulp, at most {} allowed", off_by_one, allowed));
  return failures;
}

}  // namespace

std::vector<std::string> ActivationHarness::compare(const OpSpec& spec, std::span<const HostTensor> want,
                                                    std::span<const HostTensor> got, std::int64_t tokens) const {
  // numerics.md: bf16/fp16 outputs equal except at most 1 ulp on at most 1e-3 of the elements
  // (CPU and GPU expf/tanhf/erff may differ in their last fp32 bit); fp32 within 8 ulp -- 16 for
  // situ and the far-tail rules of Judge (README, "Where moejit refines numerics.md").
  const auto& op = as_activation(spec);
  const std::size_t out_index = op.layout == ActivationLayout::masked ? 2 : 1;
  const Judge judge(op, want[0], want[out_index], got[out_index]);
  const auto d = static_cast<std::size_t>(op.d);
  const std::size_t n = want[out_index].elements();
  const std::size_t allowed = (n + 999) / 1000;
  // Rows are judged on all cores; only a failing output is walked again, in order, for its lines.
  std::vector<RowVerdicts> rows(n / d);
  parallel_rows(static_cast<std::int64_t>(rows.size()), [&](std::int64_t r) {
    auto& v = rows[static_cast<std::size_t>(r)];
    for (std::size_t i = static_cast<std::size_t>(r) * d; i < static_cast<std::size_t>(r + 1) * d; ++i) {
      const Verdict verdict = judge(i);
      if (verdict == Verdict::off_by_one) ++v.off_by_one;
      if (verdict == Verdict::failed) ++v.failed;
    }
  });
  std::size_t off_by_one = 0, failed = 0;
  for (const auto& v : rows) {
    off_by_one += v.off_by_one;
    failed += v.failed;
  }
  if (failed == 0 && off_by_one <= allowed) return {};
  return failure_lines(judge, rows, d, allowed, tokens);
}

double ActivationHarness::bytes_moved(const OpSpec& spec, std::span<const HostTensor> tensors, std::int64_t tokens) const {
  const auto& op = as_activation(spec);
  const double per_row = static_cast<double>(op.d) * static_cast<double>(2 * size_of(op.dtype) + size_of(op.out_dtype));
  if (op.layout != ActivationLayout::masked) return per_row * static_cast<double>(tokens);
  const auto* counts = tensors[1].as<std::int32_t>();
  double rows = 0;
  for (std::int64_t e = 0; e < op.num_experts; ++e) rows += static_cast<double>(clamp_count(counts[e], tokens));
  return per_row * rows + 4.0 * static_cast<double>(op.num_experts);
}

}  // namespace moejit::reference
