// moejit_tail_bench [SPEC_FIELDS_JSON [tokens...]] [--fused-only]: times the latent tail's paths on tp GPUs of
// this machine (one thread per rank), performance.md's way: 20 calls captured in one CUDA graph
// per rank, rotating through enough buffer sets (W_up, inputs, output) that one graph's calls read
// 3x the L2 (W_up alone is about the L2's size), the ranks' replays started together, median of 7
// replays, max over ranks. Prints a
// table and, on stderr, one JSON line per (path, tokens) with the W_up bytes a rank reads (all of
// W for the full base path, 1/tp for fused and striped). bench/bench_latent_tail.py runs it and
// turns those bytes into floors over the SM copy bandwidth it measures in the same run.
// --fused-only times the fused path alone.
#include <moejit/error.hpp>
#include <moejit/latent_moe.hpp>

#include "compiler/ops/latent_tail.hpp"
#include "reference/latent_tail.hpp"
#include "runtime/device.hpp"
#include "tools/cli.hpp"
#include "tools/op_runner.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <barrier>
#include <cstdlib>

using namespace moejit;

namespace {

constexpr int kCalls = 20, kReplays = 7;

std::shared_ptr<const LatentTailSpec> spec_of(const std::string& fields) {
  return std::dynamic_pointer_cast<const LatentTailSpec>(parse_spec("{\"op\": \"latent_tail\", " + fields + "}", "bench").ops[0]);
}

// Times every token count on one group (one communicator setup per path); a rank's call reads
// `w_share` of W_up.
std::vector<double> bench_path(const std::shared_ptr<const LatentTailSpec>& spec, const std::vector<std::int64_t>& token_counts,
                               double w_share) {
  LatentMoEGroup group(spec, Options::from_environment());
  reference::Rng rng(42);
  std::vector<std::uint16_t> gamma, w;
  reference::fill_tail_weights(*spec, rng, gamma, w);
  const int n = group.size();
  std::vector<std::vector<double>> us(static_cast<std::size_t>(n));
  std::barrier sync(n);
  group.run([&](int r) {
    auto& ctx = group.context(r);
    const auto& drv = ctx.driver();
    std::vector<std::uint16_t> routed, shared;
    reference::Rng local(100 + static_cast<std::uint64_t>(r));
    reference::fill_tail_rank(*spec, spec->max_tokens(), local, 1, routed, shared);
    const std::size_t out_bytes = static_cast<std::size_t>(spec->max_tokens() * spec->hidden) * 2;
    // The bytes a call reads (its share of W_up, its inputs and output): enough sets that no call finds W in L2.
    const auto call_bytes = static_cast<std::size_t>(w_share * static_cast<double>(w.size() * 2)) +
                            (routed.size() + shared.size() + gamma.size()) * 2 + out_bytes;
    std::vector<detail::DeviceBuffer> bufs;
    std::vector<std::vector<Buffer>> sets(static_cast<std::size_t>(tools::set_count(ctx, call_bytes, kCalls)));
    for (auto& bind : sets) {
      auto add = [&](const void* data, std::size_t bytes) {
        bufs.emplace_back(drv, bytes);
        if (data) bufs.back().upload(data, bytes);
        bind.push_back({bufs.back().ptr(), bytes});
      };
      add(routed.data(), routed.size() * 2);
      if (spec->shared_expert) add(shared.data(), shared.size() * 2);
      add(gamma.data(), gamma.size() * 2);
      add(w.data(), w.size() * 2);
      add(nullptr, out_bytes);
      bind.push_back({});
      bind.push_back({});
    }
    detail::Stream stream(drv);
    for (const auto tokens : token_counts) {
    for (int i = 0; i < 3; ++i) group.tail(r).launch(sets[static_cast<std::size_t>(i) % sets.size()], tokens, stream.get());  // warm
    stream.synchronize();
    detail::Graph graph(drv, stream, [&] {
      for (int i = 0; i < kCalls; ++i) group.tail(r).launch(sets[static_cast<std::size_t>(i) % sets.size()], tokens, stream.get());
    });
    graph.launch(stream);
    stream.synchronize();
    std::vector<double> times;
    detail::Event start(drv), stop(drv);
    for (int k = 0; k < kReplays; ++k) {
      sync.arrive_and_wait();
      start.record(stream.get());
      graph.launch(stream);
      stop.record(stream.get());
      times.push_back(1000.0 * stop.since(start) / kCalls);
    }
    group.tail(r).check();
    std::sort(times.begin(), times.end());
    us[static_cast<std::size_t>(r)].push_back(times[times.size() / 2]);
    }
  });
  std::vector<double> worst;
  for (std::size_t i = 0; i < token_counts.size(); ++i) {
    double m = 0;
    for (const auto& rank : us) m = std::max(m, rank[i]);
    worst.push_back(m);
  }
  return worst;
}

}  // namespace

int main(int argc, char** argv) try {
  ::setenv("NCCL_NVLS_ENABLE", "0", 1);
  ::setenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1", 1);
  std::string shape = R"("tp_size": 2, "hidden": 7168, "latent": 3584, "max_tokens": 64)";
  std::vector<std::int64_t> tokens;
  bool fused_only = false;
  CLI::App app{"moejit_tail_bench: times the latent tail's paths on tp GPUs of this machine"};
  app.add_option("fields", shape, "the latent_tail op's fields, as JSON object members")->capture_default_str();
  app.add_option("tokens", tokens, "token counts (default: 1 4 16 64)")->check(tools::integer_in(1, tools::kMaxTokens));
  app.add_flag("--fused-only", fused_only, "time the fused path alone, not the base paths");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (tokens.empty()) tokens = {1, 4, 16, 64};

  // NOTE: this context lives as long as the program: the device's primary context is never
  // released to zero (and reset) between the groups below.
  const Context ctx(Options::from_environment(), 0);
  const auto base = spec_of(shape);
  const double w_bytes = 2.0 * base->hidden * base->latent;
  fmt::print("latent tail, {}\n", shape);
  fmt::print("{:<14} {:>6} {:>10} {:>14}\n", "path", "tokens", "us/call", "W MB a rank");
  struct Variant {
    const char* name;
    const char* fields;
    double w_share;
  };
  std::vector<Variant> variants;
  if (!fused_only) variants.push_back({"base", R"("path": "base", "base_variant": "full")", 1.0});
  if (base->striped_possible() && !fused_only) variants.push_back({"base-striped", R"("path": "base", "base_variant": "striped")", 1.0 / base->tp_size});
  if (base->fused_possible()) variants.push_back({"fused", R"("path": "fused")", 1.0 / base->tp_size});
  for (const auto& v : variants) {
    const auto spec = spec_of(shape + ", " + v.fields);
    const auto times = bench_path(spec, tokens, v.w_share);
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      const auto t = tokens[i];
      const double us = times[i];
      const double rank_w_bytes = w_bytes * v.w_share;
      fmt::print("{:<14} {:>6} {:>10.2f} {:>14.2f}\n", v.name, t, us, rank_w_bytes / 1e6);
      fmt::print(stderr, "{{\"path\": \"{}\", \"tp\": {}, \"tokens\": {}, \"us\": {:.3f}, \"w_bytes\": {:.0f}}}\n", v.name,
                 base->tp_size, t, us, rank_w_bytes);
    }
  }
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "moejit_tail_bench: {}\n", e.what());
  return 3;
}
