// CPU reference of the experts op (experts.hpp); its harness is experts_harness.cpp.
#include "experts.hpp"
#include "experts_detail.hpp"

#include "activation.hpp"
#include "numeric.hpp"

#include <algorithm>
#include <bit>

namespace moejit::reference {

using namespace experts_detail;

namespace {

// D elements to fp32 by bit moves, so that whole-row conversions vectorize. fp16: exponent and
// mantissa moved into fp32's place and scaled by 2^112 (exact for normals and subnormals); the
// top exponent stays infinity or NaN.
float bf16_bits(std::uint16_t b) noexcept { return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16); }
float half_bits(std::uint16_t h) noexcept {
  const std::uint32_t mag = static_cast<std::uint32_t>(h & 0x7FFF) << 13;
  const std::uint32_t scaled = std::bit_cast<std::uint32_t>(std::bit_cast<float>(mag) * 0x1p112f);
  const std::uint32_t bits = (h & 0x7C00) == 0x7C00 ? (mag | 0x7F800000u) : scaled;
  return std::bit_cast<float>(bits | static_cast<std::uint32_t>(h & 0x8000) << 16);
}

// The activation op's element function, for the experts' activation params and output dtype D.
ActivationSpec activation_of(const ExpertsSpec& op) {
  ActivationSpec a;
  static_cast<ActivationParams&>(a) = op.activation;
  a.d = op.intermediate;
  a.dtype = a.out_dtype = op.dtype;
  return a;
}

// One GEMM row: a valid (token, slot), or a masked row below its expert's count.
struct Row {
  int expert = 0;
  std::int64_t x = 0;    // its fp32 input row in Plan::x
  std::int64_t out = 0;  // standard: the slot t * K + k; masked: the row e * T + t of y
  float weight = 1;      // standard without weight on input: the router weight GEMM2 applies
};

struct Plan {
  std::vector<Row> rows;            // grouped by expert; (token, slot) or row order within one
  std::vector<std::int64_t> first;  // expert e's rows: [first[e], first[e + 1])
  std::vector<float> x;             // GEMM1's fp32 inputs, H each
};

// Groups rows by expert (a stable counting sort), so that each weight row is converted once and
// dotted with every row of its expert.
void group_by_expert(const ExpertsSpec& op, std::vector<Row> rows, Plan& plan) {
  plan.first.assign(at(op.num_experts) + 1, 0);
  for (const auto& r : rows) ++plan.first[at(r.expert) + 1];
  for (std::size_t e = 0; e < at(op.num_experts); ++e) plan.first[e + 1] += plan.first[e];
  auto next = plan.first;
  plan.rows.resize(rows.size());
  for (const auto& r : rows) plan.rows[at(next[at(r.expert)]++)] = r;
}

Plan plan_standard(const ExpertsSpec& op, std::span<const HostTensor> t, std::int64_t tokens) {
  const auto ix = experts_tensors(op);
  const std::int64_t H = op.hidden, K = op.topk;
  const auto* map = map_of(ix, t);
  const auto* weights = t[at(ix.weights)].as<float>();
  std::vector<Row> rows;
  for (std::int64_t s = 0; s < tokens * K; ++s) {
    const int e = local_expert(op, id_at(t[at(ix.ids)], at(s)), map);
    if (e >= 0) rows.push_back({e, s / K, s, op.weight_on_input ? 1.0f : weights[s]});
  }
  Plan plan;
  group_by_expert(op, std::move(rows), plan);
  const auto* x = t[at(ix.x)].as<std::uint16_t>();
  if (!op.weight_on_input) {  // one input row per token
    plan.x.resize(at(tokens * H));
    parallel_rows(tokens, [&](std::int64_t r) { to_float_row(op.dtype, x + r * H, &plan.x[at(r * H)], H); });
    return plan;
  }
  // x' = round_D(x * w) per slot: the fp32 product, rounded to D.
  plan.x.resize(plan.rows.size() * at(H));
  parallel_rows(static_cast<std::int64_t>(plan.rows.size()), [&](std::int64_t r) {
    auto& row = plan.rows[at(r)];
    float* dst = &plan.x[at(r * H)];
    to_float_row(op.dtype, x + row.x * H, dst, H);
    for (std::int64_t h = 0; h < H; ++h) dst[h] = round_to(op.dtype, dst[h] * weights[row.out]);
    row.x = r;
  });
  return plan;
}

Plan plan_masked(const ExpertsSpec& op, std::span<const HostTensor> t, std::int64_t tokens) {
  const auto ix = experts_tensors(op);
  const std::int64_t H = op.hidden;
  const auto* counts = t[at(ix.counts)].as<std::int32_t>();
  std::vector<Row> rows;
  for (int e = 0; e < op.num_experts; ++e) {
    for (std::int64_t r = 0; r < clamp_count(counts[e], tokens); ++r) {
      rows.push_back({e, static_cast<std::int64_t>(rows.size()), e * tokens + r, 1.0f});
    }
  }
  Plan plan;
  group_by_expert(op, std::move(rows), plan);  // already in expert order: x indices stay
  const auto* x = t[at(ix.x)].as<std::uint16_t>();
  plan.x.resize(plan.rows.size() * at(H));
  parallel_rows(static_cast<std::int64_t>(plan.rows.size()), [&](std::int64_t r) {
    to_float_row(op.dtype, x + plan.rows[at(r)].out * H, &plan.x[at(r * H)], H);
  });
  return plan;
}

// The inputs of expert e's GEMM rows (input(r) for its rows r of the Plan).
template <class RowInput>
std::vector<const float*> inputs_of(const Plan& plan, int e, RowInput input) {
  std::vector<const float*> xs;
  for (std::int64_t r = plan.first[at(e)]; r < plan.first[at(e) + 1]; ++r) xs.push_back(input(r));
  return xs;
}

// ---- dot products, in the order experts_dot() documents ----

// NOTE: GCC/Clang vector types make the 16 lanes SIMD operations at any -march; the AVX2 copy,
// picked at run time, does the same IEEE operations in the same order, so both give the same
// bits (and so does a build without it).
using F16 = float __attribute__((vector_size(64)));
using D16 = double __attribute__((vector_size(128)));
using F16Unaligned = float __attribute__((vector_size(64), aligned(4), may_alias));

// Rows x[0, R) against one weight row w; out[r] = experts_dot(x[r], w, n). Each 64-element
// block of w is loaded once for the R rows.
template <std::size_t R>
[[gnu::always_inline]] inline void dot_block(const float* w, const float* const* x, std::int64_t n, float* out) noexcept {
  D16 total[R] = {};
  for (std::int64_t i = 0; i < n; i += 64) {
    const auto* wv = reinterpret_cast<const F16Unaligned*>(w + i);
    for (std::size_t r = 0; r < R; ++r) {
      const auto* xv = reinterpret_cast<const F16Unaligned*>(x[r] + i);
      F16 p = xv[0] * wv[0];
      p = p + xv[1] * wv[1];
      p = p + xv[2] * wv[2];
      p = p + xv[3] * wv[3];
      total[r] += __builtin_convertvector(p, D16);
    }
  }
  for (std::size_t r = 0; r < R; ++r) {
    double sum = 0;
    for (int l = 0; l < 16; ++l) sum += total[r][l];
    out[r] = static_cast<float>(sum);
  }
}

[[gnu::always_inline]] inline void dot_rows_body(const float* w, const float* const* x, std::size_t rows, std::int64_t n, float* out) noexcept {
  std::size_t r = 0;
  for (; r + 4 <= rows; r += 4) dot_block<4>(w, x + r, n, out + r);
  for (; r + 2 <= rows; r += 2) dot_block<2>(w, x + r, n, out + r);
  for (; r < rows; ++r) dot_block<1>(w, x + r, n, out + r);
}

void dot_rows_base(const float* w, const float* const* x, std::size_t rows, std::int64_t n, float* out) noexcept {
  dot_rows_body(w, x, rows, n, out);
}

#if defined(__x86_64__)
[[gnu::target("avx2")]] void dot_rows_avx2(const float* w, const float* const* x, std::size_t rows, std::int64_t n, float* out) noexcept {
  dot_rows_body(w, x, rows, n, out);
}
#endif

void dot_rows(const float* w, const float* const* x, std::size_t rows, std::int64_t n, float* out) noexcept {
#if defined(__x86_64__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return dot_rows_avx2(w, x, rows, n, out);
#endif
  dot_rows_base(w, x, rows, n, out);
}

// Work items: blocks of one expert's output rows (GEMM1: intermediate indices, each a gate and
// an up row; GEMM2: hidden columns), block-major, so that parallel_rows' contiguous shares of
// them each hold a part of every expert, the hot one of a skewed routing too.
struct Item {
  int expert = 0;
  std::int64_t begin = 0, end = 0;
};

std::vector<Item> items_of(const ExpertsSpec& op, const Plan& plan, std::int64_t width, std::int64_t block) {
  std::vector<Item> items;
  for (std::int64_t b = 0; b < width; b += block) {
    for (int e = 0; e < op.num_experts; ++e) {
      if (plan.first[at(e)] < plan.first[at(e) + 1]) items.push_back({e, b, std::min(width, b + block)});
    }
  }
  return items;
}

// GEMM1, rounded to D, and the activation: h [rows, I] (fp32 holding D values).
std::vector<float> gemm1_activation(const ExpertsSpec& op, std::span<const HostTensor> t, const Plan& plan) {
  const auto ix = experts_tensors(op);
  const std::int64_t H = op.hidden, I = op.intermediate;
  const auto act = activation_of(op);
  const auto* w13 = t[at(ix.w13)].as<std::uint16_t>();
  const auto* b13 = ix.b13 >= 0 ? t[at(ix.b13)].as<std::uint16_t>() : nullptr;
  std::vector<float> h(plan.rows.size() * at(I));
  const auto items = items_of(op, plan, I, 16);
  parallel_rows(static_cast<std::int64_t>(items.size()), [&](std::int64_t n) {
    const Item it = items[at(n)];
    const auto xs = inputs_of(plan, it.expert, [&](std::int64_t r) { return &plan.x[at(plan.rows[at(r)].x * H)]; });
    const std::int64_t first = plan.first[at(it.expert)];
    std::vector<float> gate_w(at(H)), up_w(at(H)), g(xs.size()), u(xs.size());
    for (std::int64_t i = it.begin; i < it.end; ++i) {
      const std::int64_t base = it.expert * 2 * I;
      const std::int64_t jg = base + (op.activation.interleaved ? 2 * i : i);
      const std::int64_t ju = base + (op.activation.interleaved ? 2 * i + 1 : I + i);
      to_float_row(op.dtype, w13 + jg * H, gate_w.data(), H);
      to_float_row(op.dtype, w13 + ju * H, up_w.data(), H);
      dot_rows(gate_w.data(), xs.data(), xs.size(), H, g.data());
      dot_rows(up_w.data(), xs.data(), xs.size(), H, u.data());
      for (std::size_t r = 0; r < xs.size(); ++r) {
        if (b13) {
          g[r] = g[r] + load(op.dtype, b13, at(jg));
          u[r] = u[r] + load(op.dtype, b13, at(ju));
        }
        h[at(first + static_cast<std::int64_t>(r)) * at(I) + at(i)] = activation_element(act, round_to(op.dtype, g[r]), round_to(op.dtype, u[r]));
      }
    }
  });
  return h;
}

// GEMM2 with the router weight, rounded to D: masked rows go straight to y; standard rows to
// o [rows, H] for the combine.
std::vector<float> gemm2(const ExpertsSpec& op, std::span<HostTensor> t, const Plan& plan, const std::vector<float>& h) {
  const auto ix = experts_tensors(op);
  const std::int64_t H = op.hidden, I = op.intermediate;
  const auto* w2 = t[at(ix.w2)].as<std::uint16_t>();
  const auto* b2 = ix.b2 >= 0 ? t[at(ix.b2)].as<std::uint16_t>() : nullptr;
  void* y = t[at(ix.y)].data.data();
  const bool scale = !op.masked() && !op.weight_on_input;
  std::vector<float> o(op.masked() ? 0 : plan.rows.size() * at(H));
  const auto items = items_of(op, plan, H, 64);
  parallel_rows(static_cast<std::int64_t>(items.size()), [&](std::int64_t n) {
    const Item it = items[at(n)];
    const std::int64_t first = plan.first[at(it.expert)];
    const auto hs = inputs_of(plan, it.expert, [&](std::int64_t r) { return &h[at(r * I)]; });
    std::vector<float> w(at(I)), acc(hs.size());
    for (std::int64_t c = it.begin; c < it.end; ++c) {
      to_float_row(op.dtype, w2 + (it.expert * H + c) * I, w.data(), I);
      dot_rows(w.data(), hs.data(), hs.size(), I, acc.data());
      for (std::size_t k = 0; k < hs.size(); ++k) {
        const Row& row = plan.rows[at(first) + k];
        float a = acc[k];
        if (b2) a = a + load(op.dtype, b2, at(it.expert * H + c));
        if (scale) a = a * row.weight;
        if (op.masked()) {
          store(op.dtype, y, at(row.out * H + c), a);
        } else {
          o[(at(first) + k) * at(H) + at(c)] = round_to(op.dtype, a);
        }
      }
    }
  });
  return o;
}

// y[t] = round_D(the fp32 sum of the token's valid slots in slot order, from +0).
void combine(const ExpertsSpec& op, HostTensor& y, const Plan& plan, const std::vector<float>& o, std::int64_t tokens) {
  const std::int64_t H = op.hidden, K = op.topk;
  std::vector<std::int64_t> row_of(at(tokens * K), -1);
  for (std::size_t r = 0; r < plan.rows.size(); ++r) row_of[at(plan.rows[r].out)] = static_cast<std::int64_t>(r);
  parallel_rows(tokens, [&](std::int64_t t) {
    for (std::int64_t c = 0; c < H; ++c) {
      float s = 0.0f;
      for (std::int64_t k = 0; k < K; ++k) {
        const std::int64_t r = row_of[at(t * K + k)];
        if (r >= 0) s = s + o[at(r * H + c)];
      }
      store(op.dtype, y.data.data(), at(t * H + c), s);
    }
  });
}

}  // namespace

ExpertsTensors experts_tensors(const ExpertsSpec& op) noexcept {
  ExpertsTensors ix;
  int n = 1;
  if (op.masked()) {
    ix.counts = n++;
  } else {
    ix.ids = n++;
    ix.weights = n++;
  }
  ix.w13 = n++;
  ix.w2 = n++;
  if (op.bias) {
    ix.b13 = n++;
    ix.b2 = n++;
  }
  if (op.global_experts > 0) ix.map = n++;
  ix.y = n;
  return ix;
}

void to_float_row(DType d, const std::uint16_t* src, float* dst, std::int64_t n) noexcept {
  if (d == DType::bf16) {
    for (std::int64_t i = 0; i < n; ++i) dst[i] = bf16_bits(src[i]);
  } else {
    for (std::int64_t i = 0; i < n; ++i) dst[i] = half_bits(src[i]);
  }
}

int local_expert(const ExpertsSpec& op, std::int64_t id, const std::int32_t* expert_map) noexcept {
  if (id < 0 || id >= op.id_range()) return -1;
  const std::int64_t e = expert_map ? expert_map[id] : id;
  return e >= 0 && e < op.num_experts ? static_cast<int>(e) : -1;
}

float experts_dot(const float* a, const float* b, std::int64_t n) noexcept {
  float out = 0;
  dot_rows(b, &a, 1, n, &out);
  return out;
}

void experts_reference(const ExpertsSpec& op, std::span<HostTensor> tensors, std::int64_t tokens) {
  const Plan plan = op.masked() ? plan_masked(op, tensors, tokens) : plan_standard(op, tensors, tokens);
  const auto h = gemm1_activation(op, tensors, plan);
  const auto o = gemm2(op, tensors, plan, h);
  if (!op.masked()) combine(op, tensors[at(experts_tensors(op).y)], plan, o, tokens);
}

}  // namespace moejit::reference
