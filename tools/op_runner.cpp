#include "op_runner.hpp"

#include <cstddef>
#include <cstring>

#include <algorithm>
#include <cmath>

namespace moejit::tools {

using reference::HostTensor;

DeviceTensors upload(const detail::Driver& driver, std::span<const HostTensor> tensors) {
  DeviceTensors d;
  for (const auto& t : tensors) {
    d.buffers.emplace_back(driver, t.bytes());
    d.buffers.back().upload(t.data.data(), t.bytes());
    d.bindings.push_back({d.buffers.back().ptr(), t.bytes()});
  }
  return d;
}

void download_outputs(const Op& op, const DeviceTensors& device, std::span<HostTensor> tensors) {
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (op.tensors()[i].role != TensorRole::output) continue;
    device.buffers[i].download(tensors[i].data.data(), tensors[i].bytes());
  }
}

namespace {

bool has_token_extent(const TensorDecl& d) {
  return std::ranges::any_of(d.shape, [](const Extent& e) { return e.tokens; });
}

// True when every tensor with the token extent has it first: the first t rows of its tensors
// are a call of t tokens, and each token's outputs depend on its own rows alone.
bool token_major(const Op& op) {
  for (const auto& t : op.tensors()) {
    for (std::size_t d = 1; d < t.shape.size(); ++d) {
      if (t.shape[d].tokens) return false;
    }
  }
  return true;
}

// The reference of a call of `tokens` compared with the call's outputs: `want` holds the call's
// inputs and its outputs as the call found them, `got` the outputs it wrote. A token-major op
// past `sample` tokens is compared at sample_rows(tokens, sample, seed) alone, the reference
// computing those rows as a call of that many tokens.
CheckResult against_reference(const Op& op, std::vector<HostTensor>& want, std::vector<HostTensor>& got, std::int64_t tokens,
                              std::int64_t sample, std::uint64_t seed) {
  const auto& harness = reference::harness_for(op.spec().family());
  const auto& decls = op.tensors();
  if (sample > 0 && sample < tokens && token_major(op)) {
    const auto rows = reference::sample_rows(tokens, sample, seed);
    for (std::size_t i = 0; i < decls.size(); ++i) {
      if (!has_token_extent(decls[i])) continue;
      want[i] = reference::gather_rows(want[i], rows);
      if (decls[i].role == TensorRole::output) got[i] = reference::gather_rows(got[i], rows);
    }
    tokens = static_cast<std::int64_t>(rows.size());
  }
  harness.run(op.spec(), want, tokens);
  return {harness.compare(op.spec(), want, got, tokens), tokens};
}

}  // namespace

CheckResult check_case(Context& context, const Op& op, CheckCase c) {
  const auto& harness = reference::harness_for(op.spec().family());
  reference::Rng rng(c.seed);
  auto want = reference::make_tensors(op.spec(), c.tokens);
  harness.fill_inputs(op.spec(), want, c.tokens, rng, c.variant);
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (op.tensors()[i].role == TensorRole::output) want[i].fill_bytes(kPoison);
  }

  detail::Stream stream(context.driver());
  const auto device = upload(context.driver(), want);
  op.launch(device.bindings, c.tokens, stream.get(), c.hints);
  stream.synchronize();
  // NOTE: `got` holds the outputs alone (compare reads nothing else of it): no copy of the inputs.
  std::vector<HostTensor> got(want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (op.tensors()[i].role == TensorRole::output) got[i] = HostTensor::zeros(want[i].dtype, want[i].shape);
  }
  download_outputs(op, device, got);
  return against_reference(op, want, got, c.tokens, c.sample_rows, c.seed);
}

namespace {

// Checks `op` at every T of `tokens` on inputs filled once at the largest T, each T on the first
// rows of the token-major tensors; the fixed tensors (weights) are lent to each case's inputs.
std::vector<CheckResult> check_prefixes(Context& context, const Op& op, int variant, std::span<const std::int64_t> tokens,
                                        std::uint64_t seed, std::int64_t sample) {
  const auto& harness = reference::harness_for(op.spec().family());
  const auto& decls = op.tensors();
  const std::int64_t largest = *std::ranges::max_element(tokens);
  reference::Rng rng(seed);
  auto master = reference::make_tensors(op.spec(), largest);
  harness.fill_inputs(op.spec(), master, largest, rng, variant);
  const auto device = upload(context.driver(), master);
  detail::Stream stream(context.driver());
  std::vector<CheckResult> results;
  for (std::size_t c = 0; c < tokens.size(); ++c) {
    const auto t = tokens[c];
    std::vector<HostTensor> want, got(decls.size());
    for (std::size_t i = 0; i < decls.size(); ++i) {
      if (!has_token_extent(decls[i])) {
        want.push_back(std::move(master[i]));
        continue;
      }
      auto prefix = HostTensor::like(decls[i], t);
      std::memcpy(prefix.data.data(), master[i].data.data(), prefix.bytes());
      if (decls[i].role == TensorRole::output) {
        prefix.fill_bytes(kPoison);
        got[i] = prefix;
        MOEJIT_CU(context.driver(), cuMemsetD8Async(device.buffers[i].address(), static_cast<unsigned char>(kPoison),
                                                    device.buffers[i].bytes(), stream.get()));
      }
      want.push_back(std::move(prefix));
    }
    op.launch(device.bindings, t, stream.get());
    stream.synchronize();
    download_outputs(op, device, got);
    results.push_back(against_reference(op, want, got, t, sample, seed + c));
    for (std::size_t i = 0; i < decls.size(); ++i) {
      if (!has_token_extent(decls[i])) master[i] = std::move(want[i]);
    }
  }
  return results;
}

}  // namespace

std::vector<CheckResult> check_cases(Context& context, const Op& op, int variant, std::span<const std::int64_t> tokens,
                                     std::uint64_t seed, std::int64_t sample_rows) {
  // NOTE: an op with large fixed tensors (an experts op's weights: up to tens of GB) is filled
  // and uploaded once a variant; the rest get fresh inputs a case.
  std::size_t fixed = 0;
  for (const auto& d : op.tensors()) {
    if (!has_token_extent(d)) fixed += d.bytes_for(0);
  }
  if (!tokens.empty() && token_major(op) && fixed >= (std::size_t{256} << 20)) {
    return check_prefixes(context, op, variant, tokens, seed, sample_rows);
  }
  std::vector<CheckResult> results;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    results.push_back(check_case(context, op, {.variant = variant, .tokens = tokens[i], .seed = seed + i, .sample_rows = sample_rows}));
  }
  return results;
}

std::int64_t mean_expert_rows(const Op& op, std::span<const reference::HostTensor> tensors, std::int64_t tokens) {
  for (std::size_t i = 0; i < op.tensors().size(); ++i) {
    if (op.tensors()[i].name != "expert_num_tokens") continue;
    const auto& counts = tensors[i];
    std::int64_t sum = 0;
    for (std::size_t e = 0; e < counts.elements(); ++e) sum += std::clamp<std::int64_t>(counts.as<std::int32_t>()[e], 0, tokens);
    return counts.elements() ? (sum + static_cast<std::int64_t>(counts.elements()) - 1) / static_cast<std::int64_t>(counts.elements()) : 0;
  }
  return 0;
}

int set_count(const Context& context, std::size_t set_bytes, int calls) {
  const auto l2 = static_cast<std::size_t>(context.device().l2_bytes);
  return static_cast<int>(std::clamp<std::size_t>((3 * l2 + set_bytes) / std::max<std::size_t>(set_bytes, 1), 1,
                                                  static_cast<std::size_t>(calls)));
}

namespace {

// Moves the first `rows` token rows of each token-extent tensor (token-major) to its end, so that
// the rows after them lead; negative `rows` moves the last -rows rows to the front.
void rotate_rows(const OpSpec& spec, std::span<HostTensor> host, std::int64_t rows) {
  const auto decls = spec.tensors();
  for (std::size_t i = 0; i < host.size(); ++i) {
    auto& data = host[i].data;
    if (!has_token_extent(decls[i]) || data.empty()) continue;
    const auto size = static_cast<std::int64_t>(data.size());
    const auto row = static_cast<std::int64_t>(decls[i].bytes_for(1) - decls[i].bytes_for(0));
    const std::int64_t offset = (rows % size * row % size + size) % size;
    std::rotate(data.begin(), data.begin() + offset, data.end());
  }
}

}  // namespace

Work mean_work(const OpSpec& spec, std::span<HostTensor> host, std::int64_t tokens, std::int64_t windows) {
  const auto& harness = reference::harness_for(spec.family());
  Work work;
  windows = std::max<std::int64_t>(windows, 1);
  for (std::int64_t w = 0; w < windows; ++w) {
    if (w > 0) rotate_rows(spec, host, tokens);
    work.bytes += harness.bytes_moved(spec, host, tokens) / static_cast<double>(windows);
    work.flops += harness.flops(spec, host, tokens) / static_cast<double>(windows);
  }
  rotate_rows(spec, host, -(windows - 1) * tokens);  // the first window's rows in front again
  return work;
}

namespace {

struct Timing {
  const detail::Stream& stream;
  const detail::Yardsticks& yardsticks;
  const BenchPlan& plan;
};

// `bindings`: the sets the calls rotate through, call c binding bindings[c % size]; `work`: a
// call's mean over them.
BenchResult timed(Context& context, const Op& op, const Timing& how, std::span<const std::vector<Buffer>> bindings,
                  std::span<const HostTensor> host, std::int64_t tokens, const Work& work) {
  BenchResult r;
  r.tokens = tokens;
  const LaunchHints hints{.expected_rows = how.plan.hint_rows ? mean_expert_rows(op, host, tokens) : 0};
  r.us_per_call = detail::time_per_call_us(context.driver(), how.stream, how.plan.calls, how.plan.replays, [&](int call) {
    op.launch(bindings[static_cast<std::size_t>(call) % bindings.size()], tokens, how.stream.get(), hints);
  });
  r.bytes = work.bytes;
  r.flops = work.flops;
  r.gb_per_s = r.bytes / (r.us_per_call * 1e-6) / 1e9;
  r.copy_fraction = r.bytes / (r.us_per_call * 1e-6) / how.yardsticks.copy_bytes_per_s;
  r.read_fraction = r.bytes / (r.us_per_call * 1e-6) / how.yardsticks.read_bytes_per_s;
  r.peak_fraction = r.bytes / (r.us_per_call * 1e-6) / how.yardsticks.hbm_peak_bytes_per_s;
  return r;
}

}  // namespace

BenchResult bench_case(Context& context, const Op& op, const detail::Stream& stream, std::int64_t tokens,
                       const detail::Yardsticks& yardsticks, const BenchPlan& plan) {
  const auto& harness = reference::harness_for(op.spec().family());
  reference::Rng rng(1234);
  auto host = reference::make_tensors(op.spec(), tokens);
  harness.fill_inputs(op.spec(), host, tokens, rng, plan.variant);
  const auto is_hot = [&](std::size_t i) { return std::ranges::find(plan.hot, op.tensors()[i].name) != plan.hot.end(); };
  std::size_t set_bytes = 0;
  for (std::size_t i = 0; i < host.size(); ++i) set_bytes += is_hot(i) ? 0 : host[i].bytes();
  const int sets = set_count(context, set_bytes, plan.calls);
  std::vector<DeviceTensors> device;
  for (int s = 0; s < sets; ++s) device.push_back(upload(context.driver(), host));
  for (std::size_t i = 0; i < host.size(); ++i) {
    if (!is_hot(i)) continue;
    for (auto& set : device) set.bindings[i] = device.front().bindings[i];
  }
  std::vector<std::vector<Buffer>> bindings;
  for (const auto& set : device) bindings.push_back(set.bindings);
  return timed(context, op, {stream, yardsticks, plan}, bindings, host, tokens, mean_work(op.spec(), host, tokens, 1));
}

std::vector<BenchResult> bench_cases(Context& context, const Op& op, const detail::Stream& stream,
                                     std::span<const std::int64_t> tokens, const detail::Yardsticks& yardsticks,
                                     const BenchPlan& plan) {
  std::vector<BenchResult> results;
  if (tokens.empty()) return results;
  // NOTE: where one tensor set a call already spans the L2 at the smallest T (an experts op's
  // weights: up to tens of GB) and the tensors are token-major, one fill serves every T: call c
  // of T tokens runs on rows [c·T, (c+1)·T) of it (wrapping), so that successive calls route to
  // different experts -- the same rows every call would find the last call's experts in L2.
  const std::int64_t smallest = *std::ranges::min_element(tokens), largest = *std::ranges::max_element(tokens);
  std::size_t smallest_bytes = 0;
  for (const auto& t : op.tensors()) smallest_bytes += t.bytes_for(smallest);
  const int calls = plan.calls;
  if (!plan.hot.empty() || !token_major(op) || set_count(context, smallest_bytes, calls) > 1) {
    for (const auto t : tokens) results.push_back(bench_case(context, op, stream, t, yardsticks, plan));
    return results;
  }
  constexpr std::int64_t kRotatedRows = 2048;  // past it, a call's rows reach every expert anyway
  const std::int64_t rows = std::max(largest, std::min(smallest * calls, kRotatedRows));
  const auto& harness = reference::harness_for(op.spec().family());
  reference::Rng rng(1234);
  auto host = reference::make_tensors(op.spec(), rows);
  harness.fill_inputs(op.spec(), host, rows, rng, plan.variant);
  const auto device = upload(context.driver(), host);
  for (const auto t : tokens) {
    const std::int64_t windows = t > 0 ? std::clamp<std::int64_t>(rows / t, 1, calls) : 1;
    std::vector<std::vector<Buffer>> bindings(static_cast<std::size_t>(windows), device.bindings);
    for (std::int64_t w = 1; w < windows; ++w) {
      for (std::size_t i = 0; i < op.tensors().size(); ++i) {
        const auto& tensor = op.tensors()[i];
        auto& b = bindings[static_cast<std::size_t>(w)][i];
        const std::size_t offset = tensor.bytes_for(w * t) - tensor.bytes_for(0);  // w·t rows; 0 for weights
        b.ptr = static_cast<std::byte*>(b.ptr) + offset;
        b.bytes -= offset;
      }
    }
    // The mean over the windows: each routes its own rows, and one window's count of experts is
    // not the mean's (DeepSeek-V3 at T = 8: 61 experts in the first, 57.4 expected).
    const auto work = mean_work(op.spec(), host, t, windows);
    results.push_back(timed(context, op, {stream, yardsticks, plan}, bindings, host, t, work));
  }
  return results;
}

}  // namespace moejit::tools
