// The experts op's harness (reference/harness.hpp): its inputs, from uniform routing to the exact-GEMM
// variant, the comparison against numerics.md's bounds, and its token lists, bytes and flops.
#include "experts_detail.hpp"

#include "activation.hpp"
#include "numeric.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numbers>

namespace moejit::reference {

using namespace experts_detail;

namespace {

// ---- inputs ----

// Counter-based values: element i of a tensor is a hash (splitmix64) of (seed, i), so a 15 GB
// weight tensor fills on every core and a seed gives the same tensor at any thread count.
std::uint64_t hash(std::uint64_t seed, std::uint64_t i) noexcept {
  std::uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
float symmetric(std::uint64_t seed, std::uint64_t i) noexcept {  // uniform in [-1, 1)
  return static_cast<float>(hash(seed, i) >> 40) * 0x1p-23f - 1.0f;
}
float normal(std::uint64_t seed, std::uint64_t i) noexcept {  // Box-Muller on the hash's two halves
  const std::uint64_t z = hash(seed, i);
  const double u1 = static_cast<double>((z >> 40) + 1) * 0x1p-24, u2 = static_cast<double>((z >> 8) & 0xFFFFFF) * 0x1p-24;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2));
}

template <class Value>
void fill_each(HostTensor& t, Value value) {
  constexpr std::int64_t kChunk = 1 << 16;
  const auto n = static_cast<std::int64_t>(t.elements());
  parallel_rows((n + kChunk - 1) / kChunk, [&](std::int64_t chunk) {
    const auto begin = static_cast<std::uint64_t>(chunk * kChunk), end = static_cast<std::uint64_t>(std::min(n, (chunk + 1) * kChunk));
    auto* out = t.as<std::uint16_t>();  // bf16 or fp16
    if (t.dtype == DType::bf16) {  // round to nearest even, inline (the values are finite)
      for (std::uint64_t i = begin; i < end; ++i) {
        const auto b = std::bit_cast<std::uint32_t>(value(i));
        out[i] = static_cast<std::uint16_t>((b + 0x7FFF + ((b >> 16) & 1)) >> 16);
      }
    } else {
      for (std::uint64_t i = begin; i < end; ++i) out[i] = float_to_half(value(i));
    }
  });
}

// Variant 2's x: three entries of +-1 at distinct random columns of each row, the rest 0.
void fill_sparse_x(const ExpertsSpec& op, HostTensor& x, Rng& rng) {
  const std::int64_t H = op.hidden, rows = static_cast<std::int64_t>(x.elements()) / H;
  std::fill(x.data.begin(), x.data.end(), std::byte{0});
  std::uniform_int_distribution<std::int64_t> column(0, H - 1);
  for (std::int64_t r = 0; r < rows; ++r) {
    std::int64_t cols[3];
    for (int n = 0; n < 3; ++n) {
      do cols[n] = column(rng);
      while (std::find(cols, cols + n, cols[n]) != cols + n);
      store(op.dtype, x.data.data(), at(r * H + cols[n]), (rng() & 1) ? 1.0f : -1.0f);
    }
  }
}

// Variant 1's non-finite inputs: x rows r = 3 and 5 mod 8 (standard: tokens; masked: rows of
// [E, T_max]) take one element of +inf, -inf or NaN each. Standard tokens 5 mod 8 have no valid
// slot, so their y stays +0; the others' y is non-finite (or, where the activation saturates,
// finite and compared as usual), and no other row may change.
void poison_x(const ExpertsSpec& op, HostTensor& x) {
  const std::int64_t H = op.hidden, rows = static_cast<std::int64_t>(x.elements()) / H;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const float values[] = {kInf, -kInf, std::numeric_limits<float>::quiet_NaN()};
  for (std::int64_t r = 3; r < rows; r += 2) {
    if (r % 8 != 3 && r % 8 != 5) continue;
    store(op.dtype, x.data.data(), at(r * H + (r * 37) % H), values[(r / 2) % 3]);
  }
}

void fill_weights(const ExpertsSpec& op, std::span<HostTensor> t, Rng& rng, int variant) {
  const auto ix = experts_tensors(op);
  const std::uint64_t I = static_cast<std::uint64_t>(op.intermediate), H = static_cast<std::uint64_t>(op.hidden);
  const std::uint64_t s13 = rng(), s2 = rng(), sb = rng();
  if (variant == kExact) {
    // w13 k/16 with k in [-127, 127] (exact in bf16 and fp16); w2 one-hot: w2[e][c][i] = (i == c % I).
    fill_each(t[at(ix.w13)], [&](std::uint64_t i) { return static_cast<float>(static_cast<int>(hash(s13, i) % 255) - 127) / 16.0f; });
    fill_each(t[at(ix.w2)], [&](std::uint64_t i) { return i % I == (i / I) % H % I ? 1.0f : 0.0f; });
    for (int b : {ix.b13, ix.b2}) {
      if (b >= 0) fill_each(t[at(b)], [](std::uint64_t) { return 0.0f; });
    }
    return;
  }
  // U(-1, 1) * 2 / sqrt(fan-in): each GEMM's outputs O(1).
  const float a13 = 2.0f / std::sqrt(static_cast<float>(H)), a2 = 2.0f / std::sqrt(static_cast<float>(I));
  fill_each(t[at(ix.w13)], [&](std::uint64_t i) { return symmetric(s13, i) * a13; });
  fill_each(t[at(ix.w2)], [&](std::uint64_t i) { return symmetric(s2, i) * a2; });
  if (ix.b13 >= 0) fill_each(t[at(ix.b13)], [&](std::uint64_t i) { return symmetric(sb, i) * 0.1f; });
  if (ix.b2 >= 0) fill_each(t[at(ix.b2)], [&](std::uint64_t i) { return symmetric(sb + 1, i) * 0.1f; });
}

// The expert map: a random permutation of the global ids; the first ~3/4 of it map to local
// experts 0, 1, ..., E-1, 0, ... (several global ids share an expert when E_global > 4E/3: a
// legal map, the kernels only look it up), the rest to -1. Returns the global ids in that
// order, and how many of them are mapped.
std::vector<std::int64_t> fill_map(const ExpertsSpec& op, std::span<HostTensor> t, Rng& rng, std::int64_t& mapped) {
  const auto ix = experts_tensors(op);
  std::vector<std::int64_t> order(at(op.id_range()));
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::int64_t>(i);
  mapped = op.id_range();
  if (ix.map < 0) return order;
  std::shuffle(order.begin(), order.end(), rng);
  mapped = (3 * op.global_experts + 3) / 4;
  auto* map = t[at(ix.map)].as<std::int32_t>();
  for (std::int64_t i = 0; i < op.global_experts; ++i) {
    map[order[at(i)]] = i < mapped ? static_cast<std::int32_t>(i % op.num_experts) : -1;
  }
  return order;
}

// Moves `count` distinct random entries of pool[begin, end) to pool[begin, begin + count) (a
// partial Fisher-Yates shuffle: the pool stays a permutation from token to token).
void draw(std::vector<std::int64_t>& pool, std::size_t begin, std::size_t end, std::size_t count, Rng& rng) {
  for (std::size_t j = begin; j < begin + count && j < end; ++j) {
    std::uniform_int_distribution<std::size_t> pick(j, end - 1);
    std::swap(pool[j], pool[pick(rng)]);
  }
}

void fill_routing(const ExpertsSpec& op, std::span<HostTensor> t, std::int64_t tokens, Rng& rng, int variant) {
  const auto ix = experts_tensors(op);
  const std::int64_t K = op.topk;
  std::int64_t mapped = 0;
  // Valid ids first (order[0] is the hot expert: local expert 0), then those the map drops.
  auto order = fill_map(op, t, rng, mapped);
  const bool hot = variant == kSkewedInvalid || variant == kBenchSkewed;
  // The ids the other slots are drawn from: valid ones first, then (variant 1, or when there
  // are fewer valid ids than K) the map's -1 ids.
  std::vector<std::int64_t> pool(order.begin() + (hot ? 1 : 0), order.end());
  const auto valid = static_cast<std::size_t>(mapped - (hot ? 1 : 0));
  const std::int64_t invalid_ids[] = {-1, op.id_range(), std::int64_t{1} << 30};
  std::uniform_int_distribution<int> percent(0, 99);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  auto& ids = t[at(ix.ids)];
  auto* weights = t[at(ix.weights)].as<float>();
  std::vector<std::int64_t> row(at(K));
  int next_invalid = 0;
  for (std::int64_t tok = 0; tok < tokens; ++tok) {
    const std::size_t others = at(K) - (hot ? 1 : 0);
    if (variant == kSkewedInvalid) {
      draw(pool, 0, pool.size(), others, rng);  // any id but the hot one, valid or not
    } else {
      draw(pool, 0, valid, std::min(others, valid), rng);
      // Fewer valid ids than slots (a map that drops many): the rest from the map's -1 ids.
      if (others > valid) draw(pool, valid, pool.size(), others - valid, rng);
    }
    std::size_t k = 0;
    if (hot) row[k++] = order[0];
    for (std::size_t j = 0; k < at(K); ++j) row[k++] = pool[j];
    if (variant == kSkewedInvalid) {
      // About 5% of the slots invalid, and every token t = 5 mod 8 without a valid slot.
      for (auto& id : row) {
        if (tok % 8 == 5 || percent(rng) < 5) id = invalid_ids[next_invalid++ % 3];
      }
    }
    for (std::int64_t j = 0; j < K; ++j) {
      const std::size_t s = at(tok * K + j);
      if (ids.dtype == DType::i64) {
        ids.as<std::int64_t>()[s] = row[at(j)];
      } else {
        ids.as<std::int32_t>()[s] = static_cast<std::int32_t>(row[at(j)]);
      }
      // Variant 2: weight 1 on slot 0 and 0 elsewhere, so that y is slot 0's h exactly.
      weights[s] = variant == kExact ? (j == 0 ? 1.0f : 0.0f) : 1.0f - unit(rng);  // (0, 1]
    }
  }
}

void fill_counts(const ExpertsSpec& op, std::span<HostTensor> t, std::int64_t tokens, Rng& rng, int variant) {
  auto* counts = t[at(experts_tensors(op).counts)].as<std::int32_t>();
  const auto T = static_cast<std::int32_t>(tokens);
  std::uniform_int_distribution<std::int32_t> some(0, T), beyond(1, 100);
  for (std::int32_t e = 0; e < op.num_experts; ++e) {
    if (variant == kBenchUniform) {
      counts[e] = T;
    } else if (variant == kBenchSkewed) {
      counts[e] = e == 0 ? T : T / 8;
    } else if (variant == kSkewedInvalid) {  // clamped to [0, T]
      constexpr std::int32_t kMin = std::numeric_limits<std::int32_t>::min(), kMax = std::numeric_limits<std::int32_t>::max();
      const std::int32_t pattern[] = {-beyond(rng), T + beyond(rng), kMin, kMax, some(rng)};
      counts[e] = pattern[e % 5];
    } else {
      const std::int32_t pattern[] = {0, T, T / 2, some(rng)};
      counts[e] = pattern[e % 4];
    }
  }
}

// ---- comparison ----

// The smallest k with P(X > k) < 1e-6 for X ~ Poisson(mean).
std::int64_t poisson_bound(double mean) {
  double term = std::exp(-mean), below = term;  // P(X = k), P(X <= k)
  std::int64_t k = 0;
  while (1.0 - below >= 1e-6 && k < (std::int64_t{1} << 40)) {
    ++k;
    term *= mean / static_cast<double>(k);
    below += term;
    if (term == 0 && mean > 700) return static_cast<std::int64_t>(mean + 5 * std::sqrt(mean)) + 1;  // exp(-mean) underflows
  }
  return k;
}

// Variant 2's inputs, recognized by their values (compare is not told the variant): x rows of
// three +-1 entries and zeros, expert 0's first w2 rows one-hot, and (standard) router weight 1
// on slot 0 and 0 on the others.
bool exact_inputs(const ExpertsSpec& op, std::span<const HostTensor> want, std::int64_t tokens) {
  const auto ix = experts_tensors(op);
  const std::int64_t H = op.hidden, I = op.intermediate;
  const auto& x = want[at(ix.x)];
  const auto rows = static_cast<std::int64_t>(x.elements()) / H;
  for (std::int64_t r = 0; r < rows; ++r) {
    int nonzero = 0;
    for (std::int64_t h = 0; h < H; ++h) {
      const float v = load(op.dtype, x.data.data(), at(r * H + h));
      if (v != 0.0f && v != 1.0f && v != -1.0f) return false;
      nonzero += v != 0.0f;
    }
    if (nonzero != 3) return false;
  }
  for (std::int64_t c = 0; c < std::min<std::int64_t>(H, 64); ++c) {
    for (std::int64_t i = 0; i < I; ++i) {
      if (load(op.dtype, want[at(ix.w2)].data.data(), at(c * I + i)) != (i == c % I ? 1.0f : 0.0f)) return false;
    }
  }
  if (op.masked()) return rows > 0;
  const auto* w = want[at(ix.weights)].as<float>();
  for (std::int64_t s = 0; s < tokens * op.topk; ++s) {
    if (w[s] != (s % op.topk == 0 ? 1.0f : 0.0f)) return false;
  }
  return tokens > 0;
}

// At most 8 lines: the 8th becomes "... and N more" when there are more.
class Failures {
 public:
  void add(std::string line) {
    if (lines_.size() < 8) {
      lines_.push_back(std::move(line));
    } else {
      ++hidden_;
    }
  }
  std::vector<std::string> take() {
    if (hidden_ > 0) lines_.back() = fmt::format("... and {} more", hidden_ + 1);
    return std::move(lines_);
  }

 private:
  std::vector<std::string> lines_;
  std::size_t hidden_ = 0;  // lines past the 8th
};

// What the comparison needs to know of each y row.
struct RowInfo {
  std::vector<char> written;           // the reference wrote the row
  std::vector<char> empty;             // standard: the token has no valid slot
  std::vector<std::int64_t> clamped;   // masked: each expert's clamped count
};

RowInfo row_info(const ExpertsSpec& op, std::span<const HostTensor> want, std::int64_t tokens) {
  const auto ix = experts_tensors(op);
  RowInfo info;
  if (op.masked()) {
    const auto* counts = want[at(ix.counts)].as<std::int32_t>();
    info.written.assign(at(op.num_experts * tokens), 0);
    for (std::int64_t e = 0; e < op.num_experts; ++e) {
      info.clamped.push_back(clamp_count(counts[e], tokens));
      for (std::int64_t r = 0; r < info.clamped.back(); ++r) info.written[at(e * tokens + r)] = 1;
    }
    info.empty.assign(info.written.size(), 0);
    return info;
  }
  info.written.assign(at(tokens), 1);
  info.empty.assign(at(tokens), 1);
  const auto* map = map_of(ix, want);
  for (std::int64_t s = 0; s < tokens * op.topk; ++s) {
    if (local_expert(op, id_at(want[at(ix.ids)], at(s)), map) >= 0) info.empty[at(s / op.topk)] = 0;
  }
  return info;
}

// "y[t][c] (token t, experts [3, -, 17])" or "y[e][t][c] (expert e, row t of n)".
std::string where(const ExpertsSpec& op, std::span<const HostTensor> want, const RowInfo& info, std::int64_t tokens, std::int64_t i) {
  const std::int64_t H = op.hidden, row = i / H, c = i % H;
  if (op.masked()) {
    const std::int64_t e = row / tokens, t = row % tokens;
    return fmt::format("y[{}][{}][{}] (expert {}, row {} of {})", e, t, c, e, t, info.clamped[at(e)]);
  }
  const auto ix = experts_tensors(op);
  std::vector<std::string> experts;
  for (std::int64_t k = 0; k < op.topk; ++k) {
    const int e = local_expert(op, id_at(want[at(ix.ids)], at(row * op.topk + k)), map_of(ix, want));
    experts.push_back(e >= 0 ? std::to_string(e) : "-");
  }
  return fmt::format("y[{}][{}] (token {}, slots' experts [{}])", row, c, row, fmt::join(experts, ", "));
}

}  // namespace

std::string ExpertsHarness::variant_name(int variant) const {
  switch (variant) {
    case kUniform: return "uniform routing";
    case kSkewedInvalid: return "skewed + invalid + non-finite x";
    case kExact: return "exact activation";
    case kBenchUniform: return "uniform (bench)";
    default: return "skewed (bench)";
  }
}

std::vector<OpHarness::BenchInputs> ExpertsHarness::bench_inputs(const OpSpec& spec) const {
  if (as_experts(spec).masked()) {
    return {{"uniform", kBenchUniform, "every expert holds T rows"}, {"skewed", kBenchSkewed, "expert 0 holds T rows, the others T/8"}};
  }
  return {{"uniform", kUniform, "K distinct uniform experts per token"},
          {"skewed", kBenchSkewed, "every token's slot 0 on expert 0, the others uniform"}};
}

namespace {
std::vector<std::int64_t> at_most(std::vector<std::int64_t> tokens, std::int64_t max) {
  std::erase_if(tokens, [&](std::int64_t t) { return t > max; });
  return tokens;
}
}  // namespace

std::vector<std::int64_t> ExpertsHarness::check_tokens(const OpSpec& spec) const {
  // Few and small: a DeepSeek-V3 reference at T = 64 is 22 GFLOP.
  const auto& op = as_experts(spec);
  return at_most(op.masked() ? std::vector<std::int64_t>{0, 1, 7, 64} : std::vector<std::int64_t>{0, 1, 3, 8, 64}, op.max_tokens());
}

std::vector<std::int64_t> ExpertsHarness::bench_tokens(const OpSpec& spec) const {
  const auto& op = as_experts(spec);
  return at_most(op.masked() ? std::vector<std::int64_t>{1, 8, 64, 512} : std::vector<std::int64_t>{1, 8, 32, 64, 512, 4096},
                 op.max_tokens());
}

void ExpertsHarness::fill_inputs(const OpSpec& spec, std::span<HostTensor> tensors, std::int64_t tokens, Rng& rng,
                                 int variant) const {
  const auto& op = as_experts(spec);
  const auto ix = experts_tensors(op);
  if (variant == kExact) {
    fill_sparse_x(op, tensors[at(ix.x)], rng);
  } else {
    const std::uint64_t seed = rng();
    fill_each(tensors[at(ix.x)], [&](std::uint64_t i) { return normal(seed, i); });
    if (variant == kSkewedInvalid) poison_x(op, tensors[at(ix.x)]);
  }
  fill_weights(op, tensors, rng, variant);
  if (op.masked()) {
    fill_counts(op, tensors, tokens, rng, variant);
  } else {
    fill_routing(op, tensors, tokens, rng, variant);
  }
}

void ExpertsHarness::run(const OpSpec& spec, std::span<HostTensor> tensors, std::int64_t tokens) const {
  experts_reference(as_experts(spec), tensors, tokens);
}

std::vector<std::string> ExpertsHarness::compare(const OpSpec& spec, std::span<const HostTensor> want,
                                                 std::span<const HostTensor> got, std::int64_t tokens) const {
  const auto& op = as_experts(spec);
  const auto ix = experts_tensors(op);
  const DType d = op.dtype;
  const std::int64_t H = op.hidden;
  const auto& w = want[at(ix.y)];
  const auto& g = got[at(ix.y)];
  const auto info = row_info(op, want, tokens);
  const bool exact = exact_inputs(op, want, tokens);
  Failures failures;
  auto value = [&](const HostTensor& t, std::int64_t i) { return load(d, t.data.data(), at(i)); };
  auto line = [&](std::int64_t i, std::string_view why) {
    failures.add(fmt::format("{}: got {} want {}{} (T={})", where(op, want, info, tokens, i), value(g, i), value(w, i), why, tokens));
  };
  double err2 = 0, ref2 = 0, worst = -1;
  std::int64_t worst_at = 0, elements = 0, off_by_one = 0;
  for (std::int64_t row = 0; row < static_cast<std::int64_t>(info.written.size()); ++row) {
    const std::size_t bytes = at(H) * size_of(d);
    if (!info.written[at(row)]) {  // a masked row past its expert's count: untouched
      if (std::memcmp(w.data.data() + at(row) * bytes, g.data.data() + at(row) * bytes, bytes) == 0) continue;
      std::int64_t c = 0;
      while (c < H && ulp_distance(d, w.data.data(), g.data.data(), at(row * H + c)) == 0) ++c;
      line(row * H + std::min(c, H - 1), ", a row past the count was written");
      continue;
    }
    for (std::int64_t i = row * H; i < (row + 1) * H; ++i) {
      const double wv = value(w, i), gv = value(g, i);
      if (info.empty[at(row)]) {
        if (gv != 0) line(i, ", the token has no valid slot");
        continue;
      }
      if (!std::isfinite(wv)) {  // a non-finite input's row: non-finite too, of whichever kind
        if (std::isfinite(gv)) line(i, ", where a non-finite x makes y non-finite");
        continue;
      }
      if (!std::isfinite(gv)) {
        line(i, "");
        continue;
      }
      ++elements;
      if (exact) {
        const auto dist = ulp_distance(d, w.data.data(), g.data.data(), at(i));
        if (dist == 1) ++off_by_one;
        if (dist > 1) line(i, fmt::format(" ({} ulp)", dist));
        continue;
      }
      err2 += (gv - wv) * (gv - wv);
      ref2 += wv * wv;
      if (std::fabs(gv - wv) > worst) {
        worst = std::fabs(gv - wv);
        worst_at = i;
      }
    }
  }
  // numerics.md: the activation test's rule on the exact variant (a rate of 1e-3, judged here on
  // few elements: the count a Poisson variable of that mean exceeds with odds below 1e-6); 5e-3
  // relative on the others (numerics.md allows 1e-2; the same rounding points leave far less).
  const std::int64_t allowed_off_by_one = poisson_bound(static_cast<double>(elements) * 1e-3);
  if (exact && off_by_one > allowed_off_by_one) {
    failures.add(fmt::format("y: {} elements off by 1 ulp, at most {} allowed (T={})", off_by_one, allowed_off_by_one, tokens));
  }
  if (!exact && err2 > 25e-6 * ref2) {
    const double rel = ref2 > 0 ? std::sqrt(err2 / ref2) : std::numeric_limits<double>::infinity();
    failures.add(fmt::format("y: relative error {:.3g} over {} elements (T={}), at most 5e-3; the largest difference at {}: got {} want {}", rel,
                             elements, tokens, where(op, want, info, tokens, worst_at), value(g, worst_at), value(w, worst_at)));
  }
  return failures.take();
}

namespace {
// Valid slots (masked: counted rows) and the experts they use.
struct Usage {
  std::int64_t rows = 0;
  std::int64_t experts = 0;
};

Usage usage(const ExpertsSpec& op, std::span<const HostTensor> t, std::int64_t tokens) {
  const auto ix = experts_tensors(op);
  std::vector<char> used(at(op.num_experts), 0);
  Usage u;
  if (op.masked()) {
    const auto* counts = t[at(ix.counts)].as<std::int32_t>();
    for (std::int64_t e = 0; e < op.num_experts; ++e) {
      u.rows += clamp_count(counts[e], tokens);
      used[at(e)] = clamp_count(counts[e], tokens) > 0;
    }
  } else {
    for (std::int64_t s = 0; s < tokens * op.topk; ++s) {
      const int e = local_expert(op, id_at(t[at(ix.ids)], at(s)), map_of(ix, t));
      if (e < 0) continue;
      ++u.rows;
      used[at(e)] = 1;
    }
  }
  u.experts = std::count(used.begin(), used.end(), 1);
  return u;
}
}  // namespace

double ExpertsHarness::bytes_moved(const OpSpec& spec, std::span<const HostTensor> tensors, std::int64_t tokens) const {
  const auto& op = as_experts(spec);
  const auto u = usage(op, tensors, tokens);
  const double row = static_cast<double>(op.hidden) * static_cast<double>(size_of(op.dtype));
  const double weights = static_cast<double>(u.experts) * static_cast<double>(op.expert_bytes());
  if (op.masked()) return 2 * row * static_cast<double>(u.rows) + 4.0 * op.num_experts + weights;
  const double slots = static_cast<double>(tokens * op.topk);
  return 2 * row * static_cast<double>(tokens) + slots * static_cast<double>(size_of(op.ids_dtype) + 4) + weights;
}

double ExpertsHarness::flops(const OpSpec& spec, std::span<const HostTensor> tensors, std::int64_t tokens) const {
  const auto& op = as_experts(spec);
  return 2.0 * static_cast<double>(usage(op, tensors, tokens).rows) * 3.0 * op.hidden * static_cast<double>(op.intermediate);
}

}  // namespace moejit::reference
