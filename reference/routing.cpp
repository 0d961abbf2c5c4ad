#include "routing.hpp"

#include "numeric.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace moejit::reference {

namespace {

using u32 = std::uint32_t;
using u64 = std::uint64_t;

const RoutingSpec& as_routing(const OpSpec& op) { return dynamic_cast<const RoutingSpec&>(op); }

u32 bits(float x) {
  u32 b;
  std::memcpy(&b, &x, 4);
  return b;
}
u32 orderable(float c) {
  const u32 u = bits(c);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
std::size_t at(int i) { return static_cast<std::size_t>(i); }
u64 pack(u32 hi, int e) { return (static_cast<u64>(hi) << 32) | (0xFFFFu - static_cast<u32>(e)); }
int expert_of(u64 key) { return static_cast<int>(0xFFFFu - static_cast<u32>(key)); }
bool valid_key(u64 key) { return static_cast<u32>(key >> 32) >= 0x00800000u; }
float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

struct Stats {
  float max = 0.0f;
  float sum = 1.0f;
};

// Softmax statistics: the largest finite logit and sum of exp(x - max) in 2^-47 fixed point.
Stats softmax_stats(const RoutingSpec& op, const float* x) {
  Stats st;
  bool any = false;
  for (int e = 0; e < op.num_experts; ++e) {
    if (std::isfinite(x[e]) && (!any || x[e] > st.max)) st.max = x[e], any = true;
  }
  u64 q = 0;
  for (int e = 0; e < op.num_experts; ++e) {
    if (std::isfinite(x[e])) q += static_cast<u64>(std::exp(x[e] - st.max) * 0x1p47f);
  }
  st.sum = static_cast<float>(q) * 0x1p-47f;
  return st;
}

float score(const RoutingSpec& op, float x, const Stats& st) {
  switch (op.scoring) {
    case RoutingScoring::sigmoid: return sigmoid(x);
    case RoutingScoring::softmax: return std::exp(x - st.max) / st.sum;
    case RoutingScoring::sqrt_softplus: return std::sqrt(x > 20.0f ? x : std::log1p(std::exp(x)));
    case RoutingScoring::none: return x;
  }
  return 0;
}

float weight(const RoutingSpec& op, float x, const Stats& st) {
  return op.scoring == RoutingScoring::none ? sigmoid(x) : score(op, x, st);
}

std::vector<float> finish_weights(const RoutingSpec& op, const float* x, const Stats& st, const std::vector<u64>& chosen,
                                  bool any_finite) {
  std::vector<float> w(chosen.size(), 0.0f);
  for (std::size_t k = 0; k < chosen.size(); ++k) {
    if (valid_key(chosen[k])) w[k] = weight(op, x[expert_of(chosen[k])], st);
  }
  if (op.renormalize) {
    float sum = 0.0f;
    for (float v : w) sum += v;
    const float denom = sum + 1e-20f;
    for (auto& v : w) v = op.routed_scaling_factor * (v / denom);
  } else {
    for (auto& v : w) v = op.routed_scaling_factor * v;
  }
  if (!any_finite) std::fill(w.begin(), w.end(), op.renormalize ? 1.0f / static_cast<float>(op.topk) : 0.0f);
  return w;
}

bool any_finite_logit(const RoutingSpec& op, const float* x) {
  return std::any_of(x, x + op.num_experts, [](float v) { return std::isfinite(v); });
}

}  // namespace

RoutingRow route_row(const RoutingSpec& op, const float* x, const float* bias) {
  const int n = op.num_experts;
  const Stats st = op.scoring == RoutingScoring::softmax ? softmax_stats(op, x) : Stats{};
  RoutingRow row;
  row.keys.resize(at(n));
  row.key_values.assign(static_cast<std::size_t>(n), std::numeric_limits<float>::quiet_NaN());
  for (int e = 0; e < n; ++e) {
    row.keys[at(e)] = pack(1, e);  // invalid
    if (!std::isfinite(x[e])) continue;
    float c = score(op, x[e], st);
    if (bias) c = c + bias[e];
    c = c + 0.0f;
    if (!std::isfinite(c)) continue;
    row.key_values[at(e)] = c;
    row.keys[at(e)] = pack(orderable(c), e);
  }
  if (op.grouped()) {
    // Rule 3: group scores over valid keys; keep the TG best, lower index on ties.
    const int size = n / op.n_group;
    std::vector<u64> group_keys;
    for (int j = 0; j < op.n_group; ++j) {
      float c1 = -INFINITY, c2 = -INFINITY;
      for (int i = j * size; i < (j + 1) * size; ++i) {
        const float v = valid_key(row.keys[at(i)]) ? row.key_values[at(i)] : -INFINITY;
        if (v > c1) c2 = c1, c1 = v;
        else if (v > c2) c2 = v;
      }
      const float g = op.group_score == GroupScoreKind::top2_sum ? c1 + c2 : c1;
      group_keys.push_back(pack(orderable(g), j));
    }
    std::sort(group_keys.begin(), group_keys.end(), std::greater<>());
    std::vector<bool> kept(static_cast<std::size_t>(op.n_group), false);
    for (int t = 0; t < op.topk_group; ++t) kept[at(expert_of(group_keys[at(t)]))] = true;
    for (int e = 0; e < n; ++e) {
      if (!kept[at(e / size)]) row.keys[at(e)] = pack(0, e);
    }
  }
  std::vector<u64> sorted = row.keys;
  std::partial_sort(sorted.begin(), sorted.begin() + op.topk, sorted.end(), std::greater<>());
  sorted.resize(static_cast<std::size_t>(op.topk));
  for (u64 k : sorted) row.ids.push_back(expert_of(k));
  row.weights = finish_weights(op, x, st, sorted, any_finite_logit(op, x));
  return row;
}

std::vector<float> weights_for(const RoutingSpec& op, const float* x, const RoutingRow& row, const std::vector<int>& ids) {
  const Stats st = op.scoring == RoutingScoring::softmax ? softmax_stats(op, x) : Stats{};
  std::vector<u64> chosen;
  for (int id : ids) {
    const bool valid = id >= 0 && id < op.num_experts && valid_key(row.keys[at(id)]);
    chosen.push_back(valid ? pack(0x80000000u, id) : pack(1, id));
  }
  return finish_weights(op, x, st, chosen, any_finite_logit(op, x));
}

std::string RoutingHarness::variant_name(int variant) const {
  switch (variant) {
    case 0: return "normal";
    case 1: return "equal and tied logits; best keys crowded into a few lanes";
    default: return "NaN (with payloads), +-inf, far-apart and all-invalid rows; non-finite bias entries";
  }
}

std::vector<std::int64_t> RoutingHarness::bench_tokens(const OpSpec&) const { return {1, 16, 128, 1024, 4096, 16384}; }

namespace {

// Row t of the logits, from the row's own stream; t % 7 picks the row's pattern.
void fill_logits_row(const RoutingSpec& op, int variant, Rng rng, void* logits, std::int64_t t) {
  const auto n = static_cast<std::size_t>(op.num_experts);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::uniform_int_distribution<int> small(-1, 2), pick(0, 99);
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const float kNegativeNaN = std::bit_cast<float>(0xffc00123u);
  const std::size_t row = static_cast<std::size_t>(t) * n;
  const int pattern = static_cast<int>(t % 7);
  const float same = normal(rng);
  for (std::size_t e = 0; e < n; ++e) {
    float v = normal(rng);
    if (variant == 1) {
      if (pattern == 0) v = same;                        // a row of equal logits
      else if (pattern <= 3) v = static_cast<float>(small(rng));  // many exact ties
      else if (pattern == 4 && e % 2) v = same;
      else if (pattern == 5 && e % 128 < 4) v += 12.0f;  // the best keys crowd into one lane or a few
    } else if (variant == 2) {
      const int p = pick(rng);
      if (pattern == 0) v = p < 50 ? std::nanf("") : (p < 75 ? kInf : -kInf);  // no finite logit
      else if (pattern == 1) v = e < static_cast<std::size_t>(op.topk - 1) ? v : std::nanf("");  // K - 1 finite
      else if (pattern == 2 && p < 40) v -= 70.0f + 2.0f * static_cast<float>(p);  // softmax exp at 2^-100 and far below, 0 included; sigmoid 1 + exp(-x) = inf
      else if (p < 4) v = std::nanf("");
      else if (p < 8) v = kNegativeNaN;  // a sign and a payload: the kernels must not rely on one NaN's bits
      else if (p < 12) v = kInf;
      else if (p < 16) v = -kInf;
    }
    store(op.logits_dtype, logits, row + e, v);
  }
}

}  // namespace

void RoutingHarness::fill_inputs(const OpSpec& spec, std::span<HostTensor> tensors, std::int64_t tokens, Rng& rng,
                                 int variant) const {
  const auto& op = as_routing(spec);
  // Rows fill in parallel, each from its own stream.
  const std::uint64_t seed = rng();
  parallel_rows(tokens, [&](std::int64_t t) { fill_logits_row(op, variant, row_rng(seed, t), tensors[0].data.data(), t); });
  if (op.bias) {
    const auto n = static_cast<std::size_t>(op.num_experts);
    constexpr float kInf = std::numeric_limits<float>::infinity();
    std::normal_distribution<float> bias(0.0f, 0.5f);
    for (std::size_t e = 0; e < n; ++e) {
      float b = variant == 1 ? 0.0f : bias(rng);
      // Variant 2: a few non-finite bias entries (their experts are invalid in every row).
      if (variant == 2 && e % 37 == 5) b = e % 2 ? kInf : -kInf;
      if (variant == 2 && e % 37 == 23) b = std::nanf("");
      store(*op.bias, tensors[1].data.data(), e, b);
    }
  }
}

void RoutingHarness::run(const OpSpec& spec, std::span<HostTensor> tensors, std::int64_t tokens) const {
  const auto& op = as_routing(spec);
  const auto n = static_cast<std::size_t>(op.num_experts);
  const auto k = static_cast<std::size_t>(op.topk);
  std::vector<float> bias;
  if (op.bias) {
    for (std::size_t e = 0; e < n; ++e) bias.push_back(load(*op.bias, tensors[1].data.data(), e));
  }
  auto& weights = tensors[op.bias ? 2 : 1];
  auto& ids = tensors[op.bias ? 3 : 2];
  parallel_rows(tokens, [&](std::int64_t t) {
    std::vector<float> x(n);
    for (std::size_t e = 0; e < n; ++e) x[e] = load(op.logits_dtype, tensors[0].data.data(), static_cast<std::size_t>(t) * n + e);
    const auto row = route_row(op, x.data(), op.bias ? bias.data() : nullptr);
    for (std::size_t j = 0; j < k; ++j) {
      const std::size_t o = static_cast<std::size_t>(t) * k + j;
      weights.as<float>()[o] = row.weights[j];
      if (op.ids_dtype == DType::i64) ids.as<std::int64_t>()[o] = row.ids[j];
      else ids.as<std::int32_t>()[o] = row.ids[j];
    }
  });
}

std::vector<std::string> RoutingHarness::compare(const OpSpec& spec, std::span<const HostTensor> want,
                                                 std::span<const HostTensor> got, std::int64_t tokens) const {
  // Ids exactly, but for near-ties: two reference keys less than 4 fp32 ulps apart (and not
  // equal) may come in either order. Weights within 2e-5 (times the scaling factor) of the
  // reference weights of the ids the GPU chose.
  const auto& op = as_routing(spec);
  const auto n = static_cast<std::size_t>(op.num_experts);
  const auto k = static_cast<std::size_t>(op.topk);
  const std::size_t wi = op.bias ? 2 : 1, ii = op.bias ? 3 : 2;
  const float tolerance = 2e-5f * std::max(1.0f, op.routed_scaling_factor);
  std::vector<float> bias;
  if (op.bias) {
    for (std::size_t e = 0; e < n; ++e) bias.push_back(load(*op.bias, want[1].data.data(), e));
  }
  auto id_at = [&](const HostTensor& t, std::size_t o) {
    return op.ids_dtype == DType::i64 ? static_cast<int>(t.as<std::int64_t>()[o]) : t.as<std::int32_t>()[o];
  };
  // Rows are judged on all cores; the first 8 failing rows are reported, in order.
  std::vector<std::string> problems(static_cast<std::size_t>(tokens));
  parallel_rows(tokens, [&](std::int64_t t) {
    std::vector<float> x(n);
    for (std::size_t e = 0; e < n; ++e) x[e] = load(op.logits_dtype, want[0].data.data(), static_cast<std::size_t>(t) * n + e);
    const auto row = route_row(op, x.data(), op.bias ? bias.data() : nullptr);
    std::vector<int> gpu_ids;
    std::string problem;
    for (std::size_t j = 0; j < k; ++j) {
      const std::size_t o = static_cast<std::size_t>(t) * k + j;
      const int g = id_at(got[ii], o), r = row.ids[j];
      gpu_ids.push_back(g);
      if (g == r) continue;
      const bool near = g >= 0 && at(g) < n && valid_key(row.keys[at(g)]) && valid_key(row.keys[at(r)]) &&
                        row.key_values[at(g)] != row.key_values[at(r)] &&
                        std::llabs(static_cast<long long>(orderable(row.key_values[at(g)])) -
                                   static_cast<long long>(orderable(row.key_values[at(r)]))) < 4;
      if (!near && problem.empty()) problem = fmt::format("id[{}] = {}, reference {}", j, g, r);
    }
    const auto ref_w = gpu_ids == row.ids ? row.weights : weights_for(op, x.data(), row, gpu_ids);
    for (std::size_t j = 0; j < k && problem.empty(); ++j) {
      const float w = got[wi].as<float>()[static_cast<std::size_t>(t) * k + j];
      if (!(std::fabs(w - ref_w[j]) <= tolerance)) problem = fmt::format("weight[{}] = {}, reference {}", j, w, ref_w[j]);
    }
    if (problem.empty()) return;
    problems[static_cast<std::size_t>(t)] =
        fmt::format("row {}: {} (reference ids {}, got {})", t, problem, fmt::join(row.ids, ","), fmt::join(gpu_ids, ","));
  });
  std::vector<std::string> failures;
  for (auto& p : problems) {
    if (failures.size() == 8) break;
    if (!p.empty()) failures.push_back(std::move(p));
  }
  return failures;
}

}  // namespace moejit::reference
