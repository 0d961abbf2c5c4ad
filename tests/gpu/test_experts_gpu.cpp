// The experts op on the GPU against the CPU reference: every shipped model's experts shape at
// T in {0, 1, 3, 8, 64, 300}, uniform and skewed routing with invalid ids, the exact-activation
// inputs (the activation stage at its rounding points), an expert map, biases, fp16, int64 ids,
// the router weight on the input, the masked layout; and the same bits at every run and every
// CUDA graph replay. The prefill GEMMs (sm_90a) take the same small cases through a context that
// sends every call to them, and the sizes they are for (T 512-16384) through both paths; the
// shipped shapes at those sizes compare a sample of each call's rows. Tiles a spec forces take the
// same checks, and those that leave the order of the sums alone the default's bits.
#include <moejit/error.hpp>

#include "gpu_common.hpp"
#include "runtime/device.hpp"
#include "spec/ops/experts.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>

using namespace moejit;
using moejit::test::gpu_context;

namespace {

const reference::OpHarness& harness() { return reference::harness_for("experts"); }

Options prefill_options() {
  auto o = Options::from_environment();
  o.experts_path = Options::ExpertsPath::prefill;
  return o;
}
// Experts ops loaded here take the prefill GEMMs at every T where their contract has them.
Context& prefill_context() {
  static Context context(prefill_options(), 0);  // NOTE: test scaffolding, one per process
  return context;
}

// Experts ops loaded here run one token without the GEMM2 stash (MOEJIT_EXPERTS_STASH=0).
Context& no_stash_context() {
  static Context context([] {
    auto o = Options::from_environment();
    o.experts_stash = false;
    return o;
  }(), 0);  // NOTE: test scaffolding, one per process
  return context;
}

// Checks `op` at every T of `tokens` (inputs filled once at the largest T: weights are up to tens
// of GB), at `sample_rows` rows of each call where given, and prints the whole case on failure.
void check_prefixes(const Op& op, const std::vector<std::int64_t>& tokens, int variant, std::uint64_t seed,
                    Context& ctx = gpu_context(), std::int64_t sample_rows = 0) {
  const auto results = tools::check_cases(ctx, op, variant, tokens, seed, sample_rows);
  for (std::size_t i = 0; i < results.size(); ++i) {
    if (results[i].passed()) continue;
    std::string text;
    for (const auto& f : results[i].failures) text += "  " + f + "\n";
    const auto rows = results[i].rows < tokens[i] ? fmt::format(" ({} rows compared)", results[i].rows) : std::string();
    FAIL_CHECK("op " << op.spec().canonical_json() << "\nvariant " << variant << " T=" << tokens[i] << rows << " seed " << seed << "\n" << text);
  }
}

// The shipped specs: of this source tree, or (a binary carried to another machine) of the
// repository the tests run in.
std::string specs_dir() {
  const std::string built = MOEJIT_SOURCE_DIR "/specs";
  return std::filesystem::is_directory(built) ? built : "specs";
}

std::vector<std::shared_ptr<const OpSpec>> shipped_experts(bool masked) {
  std::vector<std::shared_ptr<const OpSpec>> ops;
  for (const auto& file : spec_files(std::vector<std::string>{specs_dir()})) {
    for (const auto& op : load_spec(file).ops) {
      const auto* e = dynamic_cast<const ExpertsSpec*>(op.get());
      if (e && e->masked() == masked) ops.push_back(op);
    }
  }
  return ops;
}

std::vector<std::string> jsons_of(const std::vector<std::shared_ptr<const OpSpec>>& ops) {
  std::vector<std::string> out;
  for (const auto& op : ops) out.push_back(op->canonical_json());
  return out;
}

}  // namespace

TEST_CASE("experts of every shipped model match the reference at decode and small prefill", "[gpu][experts]") {
  const auto ops = test::warm(jsons_of(shipped_experts(false)));
  REQUIRE_FALSE(ops.empty());
  std::uint64_t seed = 1;
  for (const auto& spec : ops) {
    INFO(spec->canonical_json());
    const auto op = gpu_context().load(spec);
    check_prefixes(*op, {0, 1, 3, 8, 64, 300}, 0, seed++);  // uniform routing
    // The two largest (Kimi-K2, Kimi-K3 at tp 1: 34 and 59 GB of weights) take the uniform inputs
    // alone: their shapes' other inputs are DeepSeek-V3's and Kimi-K3 tp 8's.
    if (dynamic_cast<const ExpertsSpec&>(*spec).expert_bytes() * dynamic_cast<const ExpertsSpec&>(*spec).num_experts > (std::int64_t{25} << 30)) continue;
    check_prefixes(*op, {1, 3, 64, 300}, 1, seed++);  // slot 0 on one expert, invalid ids
    check_prefixes(*op, {1, 8, 64}, 2, seed++);       // the activation stage, exactly
  }
}

TEST_CASE("experts: expert map, biases, fp16, int64 ids, weight on input, every activation kind", "[gpu][experts]") {
  const auto ops = test::warm({
      R"({"op": "experts", "hidden": 256, "intermediate": 128, "num_experts": 12, "topk": 4, "global_experts": 40, "activation": {"kind": "silu"}})",
      R"({"op": "experts", "hidden": 320, "intermediate": 192, "num_experts": 9, "topk": 3, "bias": true, "activation": {"kind": "swiglu_oai", "interleaved": true}})",
      R"({"op": "experts", "hidden": 512, "intermediate": 256, "num_experts": 16, "topk": 2, "dtype": "fp16", "ids_dtype": "int64", "activation": {"kind": "gelu"}})",
      R"({"op": "experts", "hidden": 448, "intermediate": 64, "num_experts": 5, "topk": 1, "apply_router_weight_on_input": true, "activation": {"kind": "gelu_tanh"}})",
      R"({"op": "experts", "hidden": 1024, "intermediate": 320, "num_experts": 33, "topk": 7, "activation": {"kind": "situ", "beta": 4.0, "linear_beta": 25.0}})",
      R"({"op": "experts", "hidden": 2048, "intermediate": 768, "num_experts": 64, "topk": 6, "apply_router_weight_on_input": true, "bias": true, "dtype": "fp16", "activation": {"kind": "situ", "beta": 1.5}})",
  });
  std::uint64_t seed = 100;
  for (const auto& spec : ops) {
    INFO(spec->canonical_json());
    const auto op = gpu_context().load(spec);
    for (int variant = 0; variant < 3; ++variant) check_prefixes(*op, {0, 1, 3, 8, 64, 300, 1000}, variant, seed++);
  }
}

TEST_CASE("masked experts compute each expert's first count rows and leave the rest", "[gpu][experts]") {
  // The shipped masked ops (2.8 and 7.4 GB of weights, filled a case) take one case a variant;
  // the small ones every T and hint.
  const auto shipped = jsons_of(shipped_experts(true));
  std::vector<std::string> jsons = shipped;
  jsons.push_back(R"({"op": "experts", "layout": "masked", "hidden": 512, "intermediate": 192, "num_experts": 7, "max_tokens": 300, "bias": true, "activation": {"kind": "swiglu_oai"}})");
  jsons.push_back(R"({"op": "experts", "layout": "masked", "hidden": 256, "intermediate": 128, "num_experts": 3, "max_tokens": 64, "dtype": "fp16", "activation": {"kind": "situ", "beta": 4.0, "linear_beta": 25.0}})");
  const auto warmed = test::warm(jsons);
  std::uint64_t seed = 300;
  for (std::size_t i = 0; i < warmed.size(); ++i) {
    const auto& spec = warmed[i];
    INFO(spec->canonical_json());
    const auto op = gpu_context().load(spec);
    const auto max = spec->max_tokens();
    if (i < shipped.size()) {
      // Hints only size the launch: none, the right one, a wrong one.
      test::check(*op, {0, 7, seed++, {}});
      test::check(*op, {1, 7, seed++, {.expected_rows = 4}});
      test::check(*op, {2, 1, seed++, {.expected_rows = 4}});
      continue;
    }
    for (int variant = 0; variant < 3; ++variant) {
      for (const std::int64_t t : {std::int64_t{1}, std::int64_t{7}, std::min<std::int64_t>(max, 64)}) {
        for (const std::int64_t hint : {std::int64_t{0}, std::max<std::int64_t>(1, t / 2), 4 * t}) {
          test::check(*op, {variant, t, seed++, {.expected_rows = hint}});
        }
      }
    }
  }
}

TEST_CASE("experts through the prefill GEMMs at every T: small, awkward and masked shapes", "[gpu][experts][prefill]") {
  const auto ops = test::warm({
      R"({"op": "experts", "hidden": 256, "intermediate": 128, "num_experts": 12, "topk": 4, "global_experts": 40, "activation": {"kind": "silu"}})",
      R"({"op": "experts", "hidden": 512, "intermediate": 256, "num_experts": 16, "topk": 2, "dtype": "fp16", "ids_dtype": "int64", "activation": {"kind": "gelu"}})",
      R"({"op": "experts", "hidden": 256, "intermediate": 64, "num_experts": 5, "topk": 1, "apply_router_weight_on_input": true, "activation": {"kind": "gelu_tanh"}})",
      R"({"op": "experts", "hidden": 1024, "intermediate": 320, "num_experts": 33, "topk": 7, "activation": {"kind": "situ", "beta": 4.0, "linear_beta": 25.0}})",
      R"({"op": "experts", "hidden": 2048, "intermediate": 768, "num_experts": 64, "topk": 6, "apply_router_weight_on_input": true, "bias": true, "dtype": "fp16", "activation": {"kind": "situ", "beta": 1.5}})",
      R"({"op": "experts", "hidden": 960, "intermediate": 960, "num_experts": 9, "topk": 3, "bias": true, "activation": {"kind": "swiglu_oai", "interleaved": true}})",
  });
  std::uint64_t seed = 500;
  for (const auto& spec : ops) {
    INFO(spec->canonical_json());
    const auto op = prefill_context().load(spec);
    for (int variant = 0; variant < 3; ++variant) check_prefixes(*op, {0, 1, 3, 8, 64, 300, 1000}, variant, seed++, prefill_context());
  }
  const auto masked = test::warm({
      R"({"op": "experts", "layout": "masked", "hidden": 512, "intermediate": 192, "num_experts": 7, "max_tokens": 300, "bias": true, "activation": {"kind": "swiglu_oai"}})",
      R"({"op": "experts", "layout": "masked", "hidden": 256, "intermediate": 128, "num_experts": 3, "max_tokens": 200, "dtype": "fp16", "activation": {"kind": "situ", "beta": 4.0, "linear_beta": 25.0}})",
  });
  for (const auto& spec : masked) {
    INFO(spec->canonical_json());
    const auto op = prefill_context().load(spec);
    for (int variant = 0; variant < 3; ++variant) {
      for (const std::int64_t t : {std::int64_t{1}, std::int64_t{7}, std::int64_t{130}, spec->max_tokens()}) {
        const auto r = tools::check_case(prefill_context(), *op, {variant, t, seed++, {}});
        std::string text;
        for (const auto& f : r.failures) text += "  " + f + "\n";
        INFO("variant " << variant << " T=" << t << "\n" << text);
        CHECK(r.passed());
      }
    }
  }
}

TEST_CASE("experts at prefill sizes through both paths, uniform and skewed", "[gpu][experts][prefill]") {
  const auto ops = test::warm({
      R"({"op": "experts", "hidden": 2048, "intermediate": 768, "num_experts": 128, "topk": 8, "activation": {"kind": "silu"}})",
      R"({"op": "experts", "hidden": 3584, "intermediate": 384, "num_experts": 896, "topk": 16, "activation": {"kind": "situ", "beta": 1.0, "linear_beta": 25.0}})",
      R"({"op": "experts", "hidden": 512, "intermediate": 256, "num_experts": 16, "topk": 4, "max_tokens": 16384, "activation": {"kind": "silu"}})",
  });
  std::uint64_t seed = 700;
  for (Context* ctx : {&gpu_context(), &prefill_context()}) {
    for (const auto& spec : ops) {
      INFO(spec->canonical_json() << (ctx == &gpu_context() ? " (automatic path)" : " (prefill path)"));
      const auto op = ctx->load(spec);
      // T = 16384 on the small shape alone: the CPU reference of the others would take minutes.
      const bool small = spec->max_tokens() > 4096;
      check_prefixes(*op, small ? std::vector<std::int64_t>{512, 4096, 16384} : std::vector<std::int64_t>{512, 4096}, 0, seed++, *ctx);
      check_prefixes(*op, {512, 4096}, 1, seed++, *ctx);
    }
  }
}

TEST_CASE("experts of every shipped model at prefill sizes, rows sampled", "[gpu][experts][prefill]") {
  // Every shipped standard-layout shape of at most 25 GB of weights at T = 512, 4096 and 16384
  // (max_tokens raised to 16384), uniform and skewed routing, on the automatic path (the prefill
  // GEMMs at these sizes); 128 rows of a call compared with the reference computing those alone
  // (DeepSeek-V3 at T = 16384 in full would be 23 TFLOP on the CPU).
  std::vector<std::string> jsons;
  for (const auto& op : shipped_experts(false)) {
    const auto& e = dynamic_cast<const ExpertsSpec&>(*op);
    if (e.expert_bytes() * e.num_experts > (std::int64_t{25} << 30)) continue;
    auto json = nlohmann::json::parse(op->canonical_json());
    json["max_tokens"] = 16384;
    jsons.push_back(json.dump());
  }
  const auto ops = test::warm(jsons);
  REQUIRE_FALSE(ops.empty());
  std::uint64_t seed = 900;
  for (const auto& spec : ops) {
    INFO(spec->canonical_json());
    const auto op = gpu_context().load(spec);
    check_prefixes(*op, {512, 4096, 16384}, 0, seed++, gpu_context(), 128);
    check_prefixes(*op, {4096, 16384}, 1, seed++, gpu_context(), 128);
  }
}

TEST_CASE("experts with tiles a spec forces match the reference; row groups and rings keep the bits", "[gpu][experts]") {
  // hidden 1024 (32 k blocks), intermediate 320 (10 k blocks, 40 row groups of GEMM1): the K
  // splits set the order of the sums, so `same` and `base` share them and differ in the rest.
  const std::string shape = R"("op": "experts", "hidden": 1024, "intermediate": 320, "num_experts": 33, "topk": 7, "activation": {"kind": "situ", "beta": 4.0, "linear_beta": 25.0})";
  const auto ops = test::warm({
      "{" + shape + R"(, "tiles": {"groups1": 4, "split1": 2, "groups2": 4, "split2": 1}})",
      "{" + shape + R"(, "tiles": {"groups1": 1, "split1": 2, "groups2": 16, "split2": 1, "ring1": 7, "ring2": 3, "ring_one": 2}})",
      "{" + shape + R"(, "tiles": {"groups1": 5, "split1": 1, "groups2": 2, "split2": 5, "ring_one": 16}})",
      "{" + shape + R"(, "tiles": {"cols1": 32, "n2": 64, "band1": 1, "band2": 2}})",
  });
  std::uint64_t seed = 1100;
  for (std::size_t i = 0; i < 3; ++i) {
    INFO(ops[i]->canonical_json());
    const auto op = gpu_context().load(ops[i]);
    for (int variant = 0; variant < 3; ++variant) check_prefixes(*op, {0, 1, 3, 8, 64, 300}, variant, seed++);
  }
  {
    INFO(ops[3]->canonical_json() << " (prefill path)");
    const auto op = prefill_context().load(ops[3]);
    for (int variant = 0; variant < 3; ++variant) check_prefixes(*op, {1, 64, 300, 1000}, variant, seed++, prefill_context());
  }
  const auto base = gpu_context().load(ops[0]), same = gpu_context().load(ops[1]);
  for (const std::int64_t tokens : {std::int64_t{1}, std::int64_t{3}, std::int64_t{64}, std::int64_t{300}}) {
    INFO("T=" << tokens);
    reference::Rng rng(static_cast<std::uint64_t>(tokens));
    auto host = reference::make_tensors(*ops[0], tokens);
    harness().fill_inputs(*ops[0], host, tokens, rng, 1);
    const auto device = tools::upload(gpu_context().driver(), host);
    const std::size_t y = host.size() - 1;
    detail::Stream stream(gpu_context().driver());
    std::vector<std::byte> want(host[y].bytes()), got(host[y].bytes());
    base->launch(device.bindings, tokens, stream.get());
    stream.synchronize();
    device.buffers[y].download(want.data(), want.size());
    MOEJIT_CU(gpu_context().driver(), cuMemsetD8Async(device.buffers[y].address(), 0x5A, got.size(), stream.get()));
    same->launch(device.bindings, tokens, stream.get());
    stream.synchronize();
    device.buffers[y].download(got.data(), got.size());
    CHECK(got == want);
  }
}

TEST_CASE("experts give the same bits at every run and every CUDA graph replay", "[gpu][experts]") {
  const auto ops = test::warm({R"({"op": "experts", "hidden": 2048, "intermediate": 768, "num_experts": 128, "topk": 8, "activation": {"kind": "silu"}})"});
  for (Context* path : {&gpu_context(), &prefill_context()}) {
    auto& ctx = *path;
    const auto op = ctx.load(ops[0]);
    for (const std::int64_t tokens : {std::int64_t{5}, std::int64_t{300}, std::int64_t{2000}}) {
      reference::Rng rng(7);
      auto host = reference::make_tensors(*ops[0], tokens);
      harness().fill_inputs(*ops[0], host, tokens, rng, 1);
      const auto device = tools::upload(ctx.driver(), host);
      const std::size_t y = host.size() - 1;
      detail::Stream stream(ctx.driver());
      std::vector<std::byte> first(host[y].bytes()), again(host[y].bytes());
      for (int run = 0; run < 10; ++run) {
        op->launch(device.bindings, tokens, stream.get());
        stream.synchronize();
        device.buffers[y].download((run ? again : first).data(), first.size());
        if (run) CHECK(again == first);
      }
      const detail::Graph graph(ctx.driver(), stream, [&] {
        for (int i = 0; i < 3; ++i) op->launch(device.bindings, tokens, stream.get());
      });
      for (int replay = 0; replay < 5; ++replay) {
        MOEJIT_CU(ctx.driver(), cuMemsetD8Async(device.buffers[y].address(), 0x5A, first.size(), stream.get()));
        graph.launch(stream);
        stream.synchronize();
        device.buffers[y].download(again.data(), again.size());
        INFO("T=" << tokens << " replay " << replay);
        CHECK(again == first);
      }
    }
  }
}

TEST_CASE("experts: one token gives the four kernels' bits, with and without the GEMM2 stash", "[gpu][experts]") {
  // Token 0 of a T = 2 call (metadata, GEMM1, GEMM2, combine) against the one-token kernels on the
  // same inputs; the stash's shapes (Qwen3-30B-A3B: a region a slot; Kimi-K3 tp 8: 8 regions for 16
  // slots; 6 regions for 12 slots in two rounds of 8 warps split 2 ways, with an expert map) and a
  // shape with an expert map, biases and invalid ids.
  const auto ops = test::warm({
      R"({"op": "experts", "hidden": 2048, "intermediate": 768, "num_experts": 128, "topk": 8, "activation": {"kind": "silu"}})",
      R"({"op": "experts", "hidden": 3584, "intermediate": 384, "num_experts": 896, "topk": 16, "activation": {"kind": "situ", "beta": 4.0, "linear_beta": 25.0}})",
      R"({"op": "experts", "hidden": 512, "intermediate": 1024, "num_experts": 16, "topk": 12, "global_experts": 24, "activation": {"kind": "silu"}})",
      R"({"op": "experts", "hidden": 320, "intermediate": 192, "num_experts": 9, "topk": 3, "global_experts": 20, "bias": true, "activation": {"kind": "swiglu_oai", "interleaved": true}})",
      // DeepSeek-V3 at tp 8: a stash of 47.5 KB beside 768 bytes of static shared memory (the opt-in past 48 KB in all).
      R"({"op": "experts", "hidden": 7168, "intermediate": 256, "num_experts": 256, "topk": 8, "activation": {"kind": "silu"}})",
  });
  for (const auto& spec : ops) {
    for (int variant = 0; variant < 2; ++variant) {
      INFO(spec->canonical_json() << " variant " << variant);
      reference::Rng rng(static_cast<std::uint64_t>(11 + variant));
      auto host = reference::make_tensors(*spec, 2);
      harness().fill_inputs(*spec, host, 2, rng, variant);
      const std::size_t y = host.size() - 1;
      const std::size_t row = host[y].bytes() / 2;
      // Both contexts are the device's primary context: one upload serves them.
      const auto device = tools::upload(gpu_context().driver(), host);
      detail::Stream stream(gpu_context().driver());
      std::vector<std::byte> results[3];
      int i = 0;
      for (auto [ctx, tokens] : {std::pair{&gpu_context(), 2}, {&gpu_context(), 1}, {&no_stash_context(), 1}}) {
        const auto op = ctx->load(spec);
        MOEJIT_CU(gpu_context().driver(), cuMemsetD8Async(device.buffers[y].address(), 0x5A, host[y].bytes(), stream.get()));
        op->launch(device.bindings, tokens, stream.get());
        stream.synchronize();
        results[i].resize(row);
        device.buffers[y].download(results[i].data(), row);
        ++i;
      }
      CHECK(results[1] == results[0]);
      CHECK(results[2] == results[0]);
    }
  }
}

TEST_CASE("experts: one-token calls back to back give each call's own bits", "[gpu][experts]") {
  // Two input sets alternating on one stream with no sync between the calls give each set's bits
  // from a call of its own: no call reads the workspace (h) another wrote. The shapes: every slot
  // in a region, slots past the regions, and the register ring (the context without the stash).
  const auto ops = test::warm({
      R"({"op": "experts", "hidden": 2048, "intermediate": 768, "num_experts": 128, "topk": 8, "activation": {"kind": "silu"}})",
      R"({"op": "experts", "hidden": 3584, "intermediate": 384, "num_experts": 64, "topk": 16, "activation": {"kind": "situ", "beta": 4.0, "linear_beta": 25.0}})",
      R"({"op": "experts", "hidden": 512, "intermediate": 1024, "num_experts": 16, "topk": 12, "global_experts": 24, "activation": {"kind": "silu"}})",
  });
  for (const auto& spec : ops) {
    for (Context* ctx : {&gpu_context(), &no_stash_context()}) {
      INFO(spec->canonical_json() << (ctx == &gpu_context() ? " stash" : " no stash"));
      const auto op = ctx->load(spec);
      std::vector<tools::DeviceTensors> sets;
      std::vector<std::byte> alone[2];
      detail::Stream stream(ctx->driver());
      for (std::size_t set = 0; set < 2; ++set) {
        reference::Rng rng(21 + set);
        auto host = reference::make_tensors(*spec, 1);
        harness().fill_inputs(*spec, host, 1, rng, static_cast<int>(set));
        sets.push_back(tools::upload(ctx->driver(), host));
        op->launch(sets.back().bindings, 1, stream.get());
        stream.synchronize();
        alone[set].resize(sets.back().buffers.back().bytes());
        sets.back().buffers.back().download(alone[set].data(), alone[set].size());
      }
      REQUIRE(alone[0] != alone[1]);
      for (int round = 0; round < 10; ++round) {
        for (std::size_t set = 0; set < 2; ++set) {
          MOEJIT_CU(ctx->driver(), cuMemsetD8Async(sets[set].buffers.back().address(), 0x5A, sets[set].buffers.back().bytes(), stream.get()));
        }
        for (std::size_t set = 0; set < 2; ++set) op->launch(sets[set].bindings, 1, stream.get());
        stream.synchronize();
        for (std::size_t set = 0; set < 2; ++set) {
          std::vector<std::byte> y(alone[set].size());
          sets[set].buffers.back().download(y.data(), y.size());
          INFO("round " << round << " set " << set);
          CHECK(y == alone[set]);
        }
      }
    }
  }
}

TEST_CASE("experts launches allocate nothing", "[gpu][experts]") {
  const auto ops = test::warm({R"({"op": "experts", "hidden": 256, "intermediate": 128, "num_experts": 8, "topk": 2, "activation": {"kind": "silu"}})"});
  auto& ctx = gpu_context();
  const auto op = ctx.load(ops[0]);
  reference::Rng rng(3);
  auto host = reference::make_tensors(*ops[0], 64);
  harness().fill_inputs(*ops[0], host, 64, rng, 0);
  const auto device = tools::upload(ctx.driver(), host);
  detail::Stream stream(ctx.driver());
  op->launch(device.bindings, 64, stream.get());
  const long before = test::g_allocations.load();
  for (int i = 0; i < 5; ++i) op->launch(device.bindings, 64, stream.get());
  CHECK(test::g_allocations.load() == before);
  stream.synchronize();
}
