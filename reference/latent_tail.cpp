#include "latent_tail.hpp"

#include "numeric.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstring>

namespace moejit::reference {

namespace {

const LatentTailSpec& as_tail(const OpSpec& op) { return dynamic_cast<const LatentTailSpec&>(op); }
float bf(std::uint16_t b) { return bf16_to_float(b); }
std::size_t at(std::int64_t i) { return static_cast<std::size_t>(i); }

// The kernels' sum of squares of one row: 256 threads take the row's 8-element vectors
// v = tid, tid + 256, ...; each warp folds with an xor butterfly; then warps in order.
float sum_of_squares(const std::uint16_t* row, int latent) {
  constexpr int kThreads = 256;
  std::vector<float> lane(kThreads, 0.0f);
  for (int tid = 0; tid < kThreads; ++tid) {
    for (int v = tid; v < latent / 8; v += kThreads) {
      for (int i = 0; i < 8; ++i) {
        const float f = bf(row[v * 8 + i]);
        lane[at(tid)] = lane[at(tid)] + f * f;
      }
    }
  }
  float total = 0.0f;
  for (int w = 0; w < kThreads / 32; ++w) {
    std::vector<float> x(lane.begin() + w * 32, lane.begin() + w * 32 + 32);
    for (int o = 16; o > 0; o /= 2) {
      std::vector<float> y(32);
      for (int l = 0; l < 32; ++l) y[at(l)] = x[at(l)] + x[at(l ^ o)];
      x = y;
    }
    total = total + x[0];
  }
  return total;
}

void normalize(const LatentTailSpec& op, const std::uint16_t* r, const std::vector<std::uint16_t>& gamma, std::uint16_t* z) {
  const float inv_l = 1.0f / static_cast<float>(op.latent);
  const float inv = 1.0f / std::sqrt(sum_of_squares(r, op.latent) * inv_l + op.eps);
  for (int l = 0; l < op.latent; ++l) z[l] = float_to_bf16((bf(r[l]) * inv) * bf(gamma[at(l)]));
}

}  // namespace

Stripe stripe_of(const LatentTailSpec& op, int rank) {
  const int shard = op.hidden / op.tp_size;
  return {rank * shard, shard};
}

TailOutputs latent_tail_reference(const LatentTailSpec& op, const TailInputs& in) {
  const auto t_count = in.tokens;
  const auto l = static_cast<std::int64_t>(op.latent), h = static_cast<std::int64_t>(op.hidden);
  TailOutputs o;
  o.latent_sum.resize(at(t_count * l));
  o.latent_norm.resize(at(t_count * l));
  o.out.resize(at(t_count * h));
  // 1. R = sum over ranks in rank order (fp32), one rounding.
  for (std::int64_t i = 0; i < t_count * l; ++i) {
    float acc = 0.0f;
    for (const auto& part : in.routed) acc = acc + bf(part[at(i)]);
    o.latent_sum[at(i)] = float_to_bf16(acc);
  }
  // 2. z, row by row. 3. out = bf16(z W^T + S), S in fp32 rank order.
  parallel_rows(t_count, [&](std::int64_t t) {
    normalize(op, &o.latent_sum[at(t * l)], in.gamma, &o.latent_norm[at(t * l)]);
    std::vector<float> z(at(l));
    for (std::int64_t k = 0; k < l; ++k) z[at(k)] = bf(o.latent_norm[at(t * l + k)]);
    for (std::int64_t row = 0; row < h; ++row) {
      double acc = 0;
      const std::uint16_t* w = &in.w_up[at(row * l)];
      for (std::int64_t k = 0; k < l; ++k) acc += static_cast<double>(z[at(k)]) * bf(w[k]);
      float s = 0.0f;
      for (const auto& part : in.shared) s = s + bf(part[at(t * h + row)]);
      o.out[at(t * h + row)] = float_to_bf16(static_cast<float>(acc) + (in.shared.empty() ? 0.0f : s));
    }
  });
  return o;
}

std::vector<std::uint16_t> norm_then_sum(const LatentTailSpec& op, const TailInputs& in) {
  const auto l = static_cast<std::int64_t>(op.latent);
  std::vector<std::uint16_t> out(at(in.tokens * l));
  std::vector<std::uint16_t> z(at(l));
  for (std::int64_t t = 0; t < in.tokens; ++t) {
    std::vector<float> acc(at(l), 0.0f);
    for (const auto& part : in.routed) {
      normalize(op, &part[at(t * l)], in.gamma, z.data());
      for (std::int64_t k = 0; k < l; ++k) acc[at(k)] = acc[at(k)] + bf(z[at(k)]);
    }
    for (std::int64_t k = 0; k < l; ++k) out[at(t * l + k)] = float_to_bf16(acc[at(k)]);
  }
  return out;
}

void fill_tail_rank(const LatentTailSpec& op, std::int64_t tokens, Rng& rng, int variant, std::vector<std::uint16_t>& routed,
                    std::vector<std::uint16_t>& shared) {
  std::uniform_int_distribution<int> small(-8, 8), pick(0, 99);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto value = [&]() -> std::uint16_t {
    if (variant == 0) {
      const int p = pick(rng);
      if (p < 5) return 0x8000;  // -0.0: must not change the result
      return float_to_bf16(static_cast<float>(small(rng)));
    }
    return float_to_bf16(normal(rng));
  };
  routed.resize(at(tokens * op.latent));
  for (auto& v : routed) v = value();
  shared.clear();
  if (!op.shared_expert) return;
  shared.resize(at(tokens * op.hidden));
  for (auto& v : shared) v = value();
}

void fill_tail_weights(const LatentTailSpec& op, Rng& rng, std::vector<std::uint16_t>& gamma, std::vector<std::uint16_t>& w_up) {
  std::normal_distribution<float> g(1.0f, 0.1f);
  gamma.resize(at(op.latent));
  for (auto& v : gamma) v = float_to_bf16(g(rng));
  // A cheap hash fill of each element's index, rows in parallel: W_up has 25M elements in Kimi-K3's shape.
  w_up.resize(at(static_cast<std::int64_t>(op.hidden) * op.latent));
  const std::uint64_t seed = rng();
  const auto latent = at(op.latent);
  parallel_rows(op.hidden, [&](std::int64_t row) {
    for (std::size_t i = at(row) * latent; i < at(row + 1) * latent; ++i) {
      std::uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      z ^= z >> 31;
      w_up[i] = float_to_bf16((static_cast<float>(z >> 40) * (1.0f / 16777216.0f) - 0.5f) * 0.06f);
    }
  });
}

std::string LatentTailHarness::variant_name(int variant) const {
  return variant == 0 ? "integer partials with -0.0" : "normal partials";
}

std::vector<std::int64_t> LatentTailHarness::check_tokens(const OpSpec&) const { return {0, 1, 4, 16, 64}; }
std::vector<std::int64_t> LatentTailHarness::bench_tokens(const OpSpec&) const { return {1, 4, 16, 64}; }

// tp_size 1 through the generic harness: tensors routed, [shared], gamma, w_up, out, latent_sum, latent_norm.
void LatentTailHarness::fill_inputs(const OpSpec& spec, std::span<HostTensor> t, std::int64_t tokens, Rng& rng, int variant) const {
  const auto& op = as_tail(spec);
  std::vector<std::uint16_t> routed, shared, gamma, w;
  fill_tail_rank(op, tokens, rng, variant, routed, shared);
  fill_tail_weights(op, rng, gamma, w);
  std::size_t i = 0;
  std::memcpy(t[i++].data.data(), routed.data(), routed.size() * 2);
  if (op.shared_expert) std::memcpy(t[i++].data.data(), shared.data(), shared.size() * 2);
  std::memcpy(t[i++].data.data(), gamma.data(), gamma.size() * 2);
  std::memcpy(t[i++].data.data(), w.data(), w.size() * 2);
}

namespace {
TailInputs inputs_of(const LatentTailSpec& op, std::span<const HostTensor> t, std::int64_t tokens) {
  auto bits = [](const HostTensor& x) {
    return std::vector<std::uint16_t>(x.as<std::uint16_t>(), x.as<std::uint16_t>() + x.elements());
  };
  TailInputs in;
  in.tokens = tokens;
  std::size_t i = 0;
  in.routed.push_back(bits(t[i++]));
  if (op.shared_expert) in.shared.push_back(bits(t[i++]));
  in.gamma = bits(t[i++]);
  in.w_up = bits(t[i++]);
  return in;
}
}  // namespace

void LatentTailHarness::run(const OpSpec& spec, std::span<HostTensor> t, std::int64_t tokens) const {
  const auto& op = as_tail(spec);
  const auto o = latent_tail_reference(op, inputs_of(op, t, tokens));
  const std::size_t first_out = op.shared_expert ? 4 : 3;
  std::memcpy(t[first_out].data.data(), o.out.data(), o.out.size() * 2);
  std::memcpy(t[first_out + 1].data.data(), o.latent_sum.data(), o.latent_sum.size() * 2);
  std::memcpy(t[first_out + 2].data.data(), o.latent_norm.data(), o.latent_norm.size() * 2);
}

std::vector<std::string> LatentTailHarness::compare(const OpSpec& spec, std::span<const HostTensor> want, std::span<const HostTensor> got,
                                                    std::int64_t tokens) const {
  // R exactly (integer partials sum exactly; in general one rounding of the same fp32 sum), z
  // within 2 ulp, out within 1e-2 relative (the GEMM's fp32 order differs from the reference's).
  const auto& op = as_tail(spec);
  const std::size_t first_out = op.shared_expert ? 4 : 3;
  std::vector<std::string> failures;
  const auto& out_w = want[first_out];
  const auto& out_g = got[first_out];
  double err = 0, ref = 0;
  for (std::size_t i = 0; i < out_w.elements(); ++i) {
    const double a = load(DType::bf16, out_g.data.data(), i), b = load(DType::bf16, out_w.data.data(), i);
    err += (a - b) * (a - b);
    ref += b * b;
  }
  if (!(std::sqrt(err) <= 1e-2 * std::sqrt(ref))) {
    failures.push_back(fmt::format("out: relative error {:.3g} (T={}), at most 1e-2", std::sqrt(err / std::max(ref, 1e-30)), tokens));
  }
  for (std::size_t k : {first_out + 1, first_out + 2}) {
    const std::int64_t allowed = k == first_out + 1 ? 0 : 2;
    for (std::size_t i = 0; i < want[k].elements(); ++i) {
      const auto d = ulp_distance(DType::bf16, want[k].data.data(), got[k].data.data(), i);
      if (d > allowed) {
        failures.push_back(fmt::format("{}[{}][{}]: {} ulp from the reference, at most {}", k == first_out + 1 ? "latent_sum" : "latent_norm",
                                       i / static_cast<std::size_t>(op.latent), i % static_cast<std::size_t>(op.latent), d, allowed));
        break;
      }
    }
  }
  return failures;
}

double LatentTailHarness::bytes_moved(const OpSpec& spec, std::span<const HostTensor>, std::int64_t tokens) const {
  const auto& op = as_tail(spec);
  const double t = static_cast<double>(tokens), h = op.hidden, l = op.latent;
  return 2.0 * (h * l + l + t * l + (op.shared_expert ? t * h : 0) + t * h);
}

}  // namespace moejit::reference
