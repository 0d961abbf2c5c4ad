#include "op_runner.hpp"

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

  harness.run(op.spec(), want, c.tokens);
  return {harness.compare(op.spec(), want, got, c.tokens)};
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

BenchResult bench_case(Context& context, const Op& op, const detail::Stream& stream, std::int64_t tokens,
                       const detail::Yardsticks& yardsticks, int variant, int calls, int replays,
                       std::span<const std::string> hot, bool hint_rows) {
  const auto& harness = reference::harness_for(op.spec().family());
  reference::Rng rng(1234);
  auto host = reference::make_tensors(op.spec(), tokens);
  harness.fill_inputs(op.spec(), host, tokens, rng, variant);

  // NOTE: enough tensor sets that `calls` successive launches span at least 3x the L2; the hot
  // tensors are one buffer bound in every set, so they stay in L2 from call to call.
  const auto is_hot = [&](std::size_t i) { return std::ranges::find(hot, op.tensors()[i].name) != hot.end(); };
  std::size_t set_bytes = 0;
  for (std::size_t i = 0; i < host.size(); ++i) set_bytes += is_hot(i) ? 0 : host[i].bytes();
  const auto l2 = static_cast<std::size_t>(context.device().l2_bytes);
  const int sets = static_cast<int>(std::clamp<std::size_t>((3 * l2 + set_bytes) / std::max<std::size_t>(set_bytes, 1), 1,
                                                            static_cast<std::size_t>(calls)));
  std::vector<DeviceTensors> device;
  for (int s = 0; s < sets; ++s) device.push_back(upload(context.driver(), host));
  for (std::size_t i = 0; i < host.size(); ++i) {
    if (!is_hot(i)) continue;
    for (auto& set : device) set.bindings[i] = device.front().bindings[i];
  }

  BenchResult r;
  r.tokens = tokens;
  const LaunchHints hints{.expected_rows = hint_rows ? mean_expert_rows(op, host, tokens) : 0};
  r.us_per_call = detail::time_per_call_us(context.driver(), stream, calls, replays, [&](int call) {
    op.launch(device[static_cast<std::size_t>(call % sets)].bindings, tokens, stream.get(), hints);
  });
  r.bytes = harness.bytes_moved(op.spec(), host, tokens);
  r.flops = harness.flops(op.spec(), host, tokens);
  r.gb_per_s = r.bytes / (r.us_per_call * 1e-6) / 1e9;
  r.copy_fraction = r.bytes / (r.us_per_call * 1e-6) / yardsticks.copy_bytes_per_s;
  r.peak_fraction = r.bytes / (r.us_per_call * 1e-6) / yardsticks.hbm_peak_bytes_per_s;
  return r;
}

}  // namespace moejit::tools
