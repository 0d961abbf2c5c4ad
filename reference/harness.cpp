#include "harness.hpp"

#include <moejit/error.hpp>

#include "activation.hpp"
#include "experts.hpp"
#include "latent_tail.hpp"
#include "routing.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <set>
#include <thread>

namespace moejit::reference {

HostTensor HostTensor::zeros(DType dtype, std::vector<std::int64_t> shape) {
  HostTensor t;
  t.dtype = dtype;
  std::size_t n = 1;
  for (auto s : shape) n *= static_cast<std::size_t>(s);
  t.shape = std::move(shape);
  t.data.assign(n * size_of(dtype), std::byte{0});
  return t;
}

std::string OpHarness::variant_name(int variant) const { return variant == 0 ? "random" : fmt::format("variant {}", variant); }

std::vector<OpHarness::BenchInputs> OpHarness::bench_inputs(const OpSpec&) const {
  return {{"random", 0, variant_name(0)}};
}

std::vector<std::int64_t> OpHarness::check_tokens(const OpSpec&) const { return {0, 1, 7, 33, 1024}; }

std::vector<std::int64_t> OpHarness::bench_tokens(const OpSpec&) const { return {1, 16, 128, 1024, 8192, 32768}; }

double OpHarness::bytes_moved(const OpSpec& op, std::span<const HostTensor> tensors, std::int64_t) const {
  (void)op;
  double total = 0;
  for (const auto& t : tensors) total += static_cast<double>(t.bytes());
  return total;
}

double OpHarness::flops(const OpSpec&, std::span<const HostTensor>, std::int64_t) const { return 0; }

namespace {

// NOTE: harnesses are stateless and immutable, so one instance each serves every thread.
template <class H>
const OpHarness& harness_instance() {
  static const H kHarness;
  return kHarness;
}

}  // namespace

std::span<const detail::Family<HarnessOf>> reference_families() noexcept {
  static constexpr detail::Family<HarnessOf> kFamilies[] = {
      {"activation", &harness_instance<ActivationHarness>},
      {"routing", &harness_instance<RoutingHarness>},
      {"latent_tail", &harness_instance<LatentTailHarness>},
      {"experts", &harness_instance<ExpertsHarness>},
  };
  return kFamilies;
}

const OpHarness& harness_for(std::string_view family) {
  if (const auto* f = detail::find_family(reference_families(), family)) return f->entry();
  throw Error({.kind = ErrorKind::usage, .message = "no reference for op family", .found = std::string(family)});
}

void parallel_rows(std::int64_t rows, const std::function<void(std::int64_t)>& body) {
  const auto n = static_cast<std::int64_t>(std::max(1u, std::thread::hardware_concurrency()));
  const std::int64_t per = (rows + n - 1) / n;
  if (rows < 64 || n == 1) {
    for (std::int64_t r = 0; r < rows; ++r) body(r);
    return;
  }
  std::vector<std::thread> threads;
  for (std::int64_t begin = 0; begin < rows; begin += per) {
    threads.emplace_back([&, begin] {
      for (std::int64_t r = begin; r < std::min(rows, begin + per); ++r) body(r);
    });
  }
  for (auto& t : threads) t.join();
}

Rng row_rng(std::uint64_t seed, std::int64_t row) {
  // splitmix64 of the row's counter, so neighbouring rows seed unrelated streams.
  std::uint64_t z = seed + (static_cast<std::uint64_t>(row) + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return Rng(z ^ (z >> 31));
}

std::vector<HostTensor> make_tensors(const OpSpec& op, std::int64_t tokens) {
  std::vector<HostTensor> out;
  for (const auto& decl : op.tensors()) out.push_back(HostTensor::like(decl, tokens));
  return out;
}

std::vector<std::int64_t> sample_rows(std::int64_t tokens, std::int64_t count, std::uint64_t seed) {
  std::vector<std::int64_t> rows;
  if (count <= 0 || count >= tokens) {
    rows.resize(static_cast<std::size_t>(std::max<std::int64_t>(tokens, 0)));
    std::iota(rows.begin(), rows.end(), std::int64_t{0});
    return rows;
  }
  std::set<std::int64_t> chosen = {0, tokens - 1};
  Rng rng(seed);
  std::uniform_int_distribution<std::int64_t> row(1, tokens - 2);
  while (static_cast<std::int64_t>(chosen.size()) < count) chosen.insert(row(rng));
  return {chosen.begin(), chosen.end()};
}

HostTensor gather_rows(const HostTensor& from, std::span<const std::int64_t> rows) {
  if (from.shape.empty()) {
    throw Error({.kind = ErrorKind::internal, .message = "gather_rows of a tensor with no dimensions"});
  }
  auto shape = from.shape;
  shape[0] = static_cast<std::int64_t>(rows.size());
  auto out = HostTensor::zeros(from.dtype, std::move(shape));
  const std::size_t row_bytes = from.shape[0] > 0 ? from.bytes() / static_cast<std::size_t>(from.shape[0]) : 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] < 0 || rows[i] >= from.shape[0]) {
      throw Error({.kind = ErrorKind::internal, .message = "gather_rows past the tensor's rows",
                   .found = std::to_string(rows[i]), .expected = fmt::format("a row in [0, {})", from.shape[0])});
    }
    std::memcpy(out.data.data() + i * row_bytes, from.data.data() + static_cast<std::size_t>(rows[i]) * row_bytes, row_bytes);
  }
  return out;
}

}  // namespace moejit::reference
