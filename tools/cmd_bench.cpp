// moejit bench SPEC [--op NAME] [--tokens T,...] [--calls N] [--replays N] [--hot NAME,...] [--inputs NAME]
//              [--json FILE] [--device N] [--pdl]
// Per-call time of each op (performance.md's method: N calls per CUDA graph, median of replays,
// inputs rotated past L2), against the SM copy and streaming read bandwidths of moejit's own
// yardstick kernels and the HBM peak, all of the same run and device. An op that reads far more
// than it writes (the experts' weights) can pass 100% of the copy, which counts a written byte for
// each byte read; the read is its ceiling.
#include <moejit/context.hpp>
#include <moejit/error.hpp>
#include <moejit/op.hpp>

#include "cache/fs.hpp"
#include "cli.hpp"
#include "op_runner.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <limits>

namespace moejit::tools {

namespace {

// Each --hot name is an input of at least one chosen op (ops without it rotate everything).
void check_hot(const Spec& spec, const std::vector<std::shared_ptr<const OpSpec>>& ops, const std::vector<std::string>& hot) {
  std::vector<std::string> inputs;
  for (const auto& op : ops) {
    for (const auto& t : op->tensors()) {
      if (t.role == TensorRole::input && std::ranges::find(inputs, t.name) == inputs.end()) inputs.push_back(t.name);
    }
  }
  for (const auto& name : hot) {
    if (std::ranges::find(inputs, name) != inputs.end()) continue;
    throw Error({.kind = ErrorKind::usage, .message = "no input of the chosen ops has this name", .file = spec.file,
                 .pointer = "--hot", .found = name, .expected = fmt::format("one of {}", fmt::join(inputs, ", "))});
  }
}

// The harness inputs each chosen op is timed on: its first (typical) ones, or those named `name`,
// which every chosen op must offer.
std::vector<reference::OpHarness::BenchInputs> pick_inputs(const Spec& spec,
                                                            const std::vector<std::shared_ptr<const OpSpec>>& ops,
                                                            const std::string& name) {
  std::vector<reference::OpHarness::BenchInputs> picked;
  for (const auto& op : ops) {
    const auto offered = reference::harness_for(op->family()).bench_inputs(*op);
    const auto it = name.empty() ? offered.begin()
                                 : std::ranges::find(offered, name, &reference::OpHarness::BenchInputs::name);
    if (it == offered.end()) {
      std::vector<std::string> names;
      for (const auto& i : offered) names.push_back(i.name);
      throw Error({.kind = ErrorKind::usage, .message = fmt::format("op {} has no such bench inputs", op->name),
                   .file = spec.file, .pointer = "--inputs", .found = name,
                   .expected = fmt::format("one of {}", fmt::join(names, ", "))});
    }
    picked.push_back(*it);
  }
  return picked;
}

}  // namespace

Action add_bench(CLI::App& app) {
  struct Opts {
    std::string spec, op, json, inputs;
    std::vector<std::string> tokens;
    std::vector<std::string> hot;
    int calls = 20, replays = 7, device = 0;
    bool pdl = false;
    bool expected_rows = false;
  };
  auto o = std::make_shared<Opts>();
  auto* sub = app.add_subcommand("bench", "Time each op of a spec on the GPU against the SM copy and read bandwidths measured in the same run");
  sub->add_option("spec", o->spec, "spec file")->required();
  sub->add_option("--op", o->op, "only these ops (names or indices, comma-separated)");
  sub->add_option("--tokens", o->tokens,
                  fmt::format("token counts, comma-separated, 1 to {} (default: the op's list)", kMaxTokens))
      ->check(integer_list_in(1, kMaxTokens));
  sub->add_option("--calls", o->calls, "calls captured per CUDA graph, 1 to 1000")->check(integer_in(1, 1000));
  sub->add_option("--replays", o->replays, "graph replays, 1 to 1000; the median is reported")->check(integer_in(1, 1000));
  sub->add_option("--hot", o->hot,
                  "inputs kept in L2 instead of rotated (comma-separated names): data the kernel before the op has "
                  "just written or read, as a masked activation's expert_num_tokens")
      ->delimiter(',');
  sub->add_option("--inputs", o->inputs,
                  "the input distribution to time (default: the op's typical one); for masked activations "
                  "half-full, few (0-12 rows an expert), one-full (expert 0 full, the others empty) or full");
  sub->add_option("--json", o->json, "also write the results as JSON to this file");
  sub->add_option("--device", o->device, "GPU ordinal")->check(integer_in(0, std::numeric_limits<int>::max()));
  sub->add_flag("--expected-rows", o->expected_rows,
                "give each launch the mean rows an expert holds in the timed inputs (LaunchHints::expected_rows, "
                "masked layouts): the hint a caller who knows its data passes; it only sizes the grid");
  sub->add_flag("--pdl", o->pdl, "launch with programmatic dependent launch (as MOEJIT_PDL=1): each call may start while the one before it finishes");
  return [o] {
    const Spec spec = load_spec(o->spec);
    const auto ops = select_ops(spec, o->op);
    check_hot(spec, ops, o->hot);
    const auto inputs = pick_inputs(spec, ops, o->inputs);
    const auto tokens = token_list(ops, o->tokens);
    if (!o->json.empty()) detail::check_output_file(o->json, "--json");
    Options options = Options::from_environment();
    options.programmatic_launch = options.programmatic_launch || o->pdl;
    Context context(options, o->device);
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::unique_ptr<Op>> loaded;
    std::vector<reference::OpHarness::BenchInputs> loaded_inputs;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      if (ops[i]->ranks() > 1) {
        fmt::print("SKIP {}: spans {} GPUs; moejit_tail_bench (bench/latent_tail_bench.cpp) times it\n", ops[i]->name,
                   ops[i]->ranks());
        continue;
      }
      loaded.push_back(context.load(ops[i]));
      loaded_inputs.push_back(inputs[i]);
    }
    const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

    detail::Stream stream(context.driver());
    const auto yard = detail::measure_yardsticks(context, stream);
    fmt::print("device: {} ({}, {} SMs); copy (SM) {:.0f} GB/s, read {:.0f} GB/s, HBM peak {:.0f} GB/s; ops loaded in {:.1f} ms\n",
               context.device().name, context.device().arch, context.device().sm_count, yard.copy_bytes_per_s / 1e9,
               yard.read_bytes_per_s / 1e9, yard.hbm_peak_bytes_per_s / 1e9, load_ms);
    fmt::print("{:<24} {:>7} {:>10} {:>11} {:>9} {:>7} {:>7} {:>7}\n", "op", "T", "us/call", "bytes", "GB/s", "%copy", "%read", "%peak");
    nlohmann::json results = nlohmann::json::array();
    for (std::size_t i = 0; i < loaded.size(); ++i) {
      const auto& op = loaded[i];
      const auto& in = loaded_inputs[i];
      const auto& harness = reference::harness_for(op->spec().family());
      if (!o->inputs.empty()) fmt::print("{}: inputs {} ({})\n", op->spec().name, in.name, in.about);
      std::vector<std::string> hot;  // the --hot names that are this op's inputs
      for (const auto& t : op->tensors()) {
        if (t.role == TensorRole::input && std::ranges::find(o->hot, t.name) != o->hot.end()) hot.push_back(t.name);
      }
      if (!hot.empty()) fmt::print("{}: {} kept in L2 (--hot)\n", op->spec().name, fmt::join(hot, ", "));
      const auto op_tokens = tokens.empty() ? harness.bench_tokens(op->spec()) : tokens;
      const BenchPlan plan{.variant = in.variant, .calls = o->calls, .replays = o->replays, .hot = hot, .hint_rows = o->expected_rows};
      for (const auto& r : bench_cases(context, *op, stream, op_tokens, yard, plan)) {
        const auto t = r.tokens;
        fmt::print("{:<24} {:>7} {:>10.2f} {:>11} {:>9.0f} {:>6.1f}% {:>6.1f}% {:>6.1f}%\n", op->spec().name, t, r.us_per_call,
                   human_bytes(r.bytes), r.gb_per_s, 100 * r.copy_fraction, 100 * r.read_fraction, 100 * r.peak_fraction);
        results.push_back({{"op", op->spec().name}, {"family", op->spec().family()},
                           {"op_spec", nlohmann::json::parse(op->spec().canonical_json())}, {"tokens", t},
                           {"us_per_call", r.us_per_call}, {"bytes", r.bytes}, {"flops", r.flops}, {"GBps", r.gb_per_s},
                           {"copy_fraction", r.copy_fraction}, {"read_fraction", r.read_fraction}, {"peak_fraction", r.peak_fraction},
                           {"hot", hot}, {"expected_rows", o->expected_rows}, {"inputs", in.name}});
      }
    }
    if (!o->json.empty()) {
      nlohmann::json j{{"spec", spec.file}, {"device", context.device().name}, {"arch", context.device().arch},
                       {"copy_GBps", yard.copy_bytes_per_s / 1e9}, {"read_GBps", yard.read_bytes_per_s / 1e9},
                       {"hbm_peak_GBps", yard.hbm_peak_bytes_per_s / 1e9}, {"load_ms", load_ms}, {"calls", o->calls}, {"replays", o->replays},
                       {"results", results}};
      detail::write_output_file(o->json, j.dump(2) + "\n", "--json");
    }
    return kOk;
  };
}

}  // namespace moejit::tools
