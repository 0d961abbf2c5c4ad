// NVRTC: every template compiles for sm_90a and sm_100a, for the shipped specs' contracts and over
// a sweep, with no spills and no local memory; compile errors carry the log, options and source.
#include <moejit/error.hpp>
#include <moejit/options.hpp>
#include <moejit/spec.hpp>

#include "cache/warmup.hpp"
#include "compiler/nvrtc.hpp"
#include "compiler/yardstick.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <vector>

using namespace moejit;
using namespace moejit::detail;

namespace {

Options memory_only() {
  auto o = Options::from_environment();
  o.disk_cache = false;
  return o;
}

// Every op of the given family in the shipped specs (specs/).
std::vector<std::shared_ptr<const OpSpec>> shipped_ops(std::string_view family) {
  std::vector<std::shared_ptr<const OpSpec>> ops;
  for (const auto& file : spec_files(std::vector<std::string>{MOEJIT_SOURCE_DIR "/specs"})) {
    for (const auto& op : load_spec(file).ops) {
      if (op->family() == family) ops.push_back(op);
    }
  }
  return ops;
}

// Every contract of the ops (both archs) as warmup jobs.
std::vector<WarmupJob> jobs_of(const std::vector<std::shared_ptr<const OpSpec>>& ops) {
  std::vector<WarmupJob> jobs;
  for (const auto& op : ops) {
    for (const char* arch : {"sm_90a", "sm_100a"}) {
      for (auto& c : contracts(*op, arch)) jobs.push_back({op->name, std::move(c)});
    }
  }
  return jobs;
}

// The shipped ops of the family, and the ops of the sweep (one op's JSON each).
std::vector<std::shared_ptr<const OpSpec>> shipped_and(std::string_view family, const std::vector<std::string>& op_jsons) {
  auto ops = shipped_ops(family);
  for (const auto& json : op_jsons) ops.push_back(parse_spec(json, "sweep.json").ops[0]);
  return ops;
}

// Compiles the jobs on a thread pool and checks each kernel's resource report (with
// `spills_allowed`, only that it compiled: tiles a spec forces may spill, and the report says so).
void compile_all(std::vector<WarmupJob> jobs, bool spills_allowed = false) {
  const auto options = memory_only();
  Compiler compiler(options.cuda_home);
  Cache cache(options, compiler);
  const auto outcomes = warmup(cache, jobs, std::max(2u, std::thread::hardware_concurrency()));
  for (const auto& o : outcomes) {
    INFO("contract:\n" << o.contract->text() << "error: " << o.error);
    REQUIRE(o.error.empty());
    REQUIRE(o.entry);
    CHECK_FALSE(o.entry->cubin.empty());
    for (const auto& k : o.entry->manifest.kernels) {
      INFO("kernel " << k.name_expression);
      CHECK(k.resources.registers > 0);
      if (spills_allowed) continue;
      CHECK(k.resources.spill_store_bytes == 0);
      CHECK(k.resources.spill_load_bytes == 0);
      CHECK(k.resources.stack_bytes == 0);
      CHECK_FALSE(k.resources.wgmma_serialized);
      CHECK_FALSE(k.lowered_name.empty());
    }
  }
}

}  // namespace

TEST_CASE("every activation contract compiles for sm_90a and sm_100a without spills: the shipped ones and a sweep", "[nvrtc]") {
  std::vector<std::string> ops;
  const std::vector<std::pair<std::string, std::string>> dtypes = {{"bf16", "bf16"}, {"fp16", "fp16"}, {"fp32", "fp32"}, {"bf16", "fp32"}};
  for (const char* kind : {"silu", "gelu", "gelu_tanh", "swiglu_oai", "situ"}) {
    for (const char* layout : {"dense", "masked"}) {
      for (const auto& [in, out] : dtypes) {
        for (int d : {7, 3072}) {
          std::string extra = std::string(kind) == "situ" ? R"(, "beta": 4.0, "linear_beta": 25.0)" : "";
          if (std::string(layout) == "masked") extra += R"(, "num_experts": 5)";
          if (std::string(kind) == "swiglu_oai" || d == 7) extra += R"(, "interleaved": true)";
          ops.push_back(fmt::format(R"({{"op": "activation", "kind": "{}", "layout": "{}", "d": {}, "dtype": "{}", "out_dtype": "{}"{}}})",
                                    kind, layout, d, in, out, extra));
        }
      }
    }
  }
  compile_all(jobs_of(shipped_and("activation", ops)));
}

TEST_CASE("the ptxas report is parsed per kernel", "[nvrtc]") {
  const std::string log =
      "ptxas info    : 59 bytes gmem\n"
      "ptxas info    : Compiling entry function '_Z1av' for 'sm_90a'\n"
      "ptxas info    : Function properties for _Z1av\n"
      "ptxas         .     16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n"
      "ptxas info    : Used 40 registers, used 1 barriers, 2048 bytes smem, 400 bytes cmem[0]\n"
      "ptxas info    : Compiling entry function '_Z1bv' for 'sm_90a'\n"
      "ptxas info    : Function properties for _Z1bv\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 12 registers, used 0 barriers\n"
      "ptxas info    : (C7518) Potential Performance Loss: wgmma.mma_async instructions are serialized due to program "
      "dependence on compiler-inserted WG.DP in divergent path in the function '_Z1bv'\n";
  const auto r = parse_ptxas_report(log);
  REQUIRE(r.size() == 2);
  CHECK(r[0].first == "_Z1av");
  CHECK(r[0].second == KernelResources{40, 2048, 16, 8, 4, 1, false});
  CHECK(r[1].second == KernelResources{12, 0, 0, 0, 0, 0, true});
}

TEST_CASE("a compile error carries the log, the options and the generated source", "[nvrtc]") {
  Compiler compiler(Options::from_environment().cuda_home);
  Contract c("activation", "sm_90a", "activation.cuh");
  c.source = "#include \"activation.cuh\"\nthis is not C++;\n";
  c.kernels = {{"narrow", "moejit::activation_kernel<int>"}};
  try {
    compiler.compile(c);
    FAIL("no compile error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::compile);
    CHECK(e.fields().log.find("error") != std::string::npos);
    CHECK(e.fields().options.find("--gpu-architecture=sm_90a") != std::string::npos);
    CHECK(e.fields().source == c.source);
    CHECK(std::string(e.what()).find("--- generated source ---") != std::string::npos);
  }
}

TEST_CASE("a missing CUDA toolkit is a clear error at the first compile", "[nvrtc]") {
  Compiler compiler("/nonexistent/cuda");
  const auto spec = parse_spec(R"({"op": "activation", "kind": "silu", "d": 8})", "t.json");
  try {
    compiler.compile(contracts(*spec.ops[0], "sm_90a").front());
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("CUDA_HOME") != std::string::npos);
    CHECK(e.fields().found == "/nonexistent/cuda/include");
  }
}

TEST_CASE("PTX is emitted for the virtual arch", "[nvrtc]") {
  Compiler compiler(Options::from_environment().cuda_home);
  const auto spec = parse_spec(R"({"op": "activation", "kind": "silu", "d": 8})", "t.json");
  const auto out = compiler.compile(contracts(*spec.ops[0], "sm_90a").front(), Emit::ptx);
  CHECK(out.binary.find(".target sm_90a") != std::string::npos);
  CHECK(out.binary.find(".entry") != std::string::npos);
}

TEST_CASE("routing contracts compile for sm_90a and sm_100a without spills: the shipped ones, and a sweep of single-group and grouped", "[nvrtc][routing]") {
  std::vector<std::string> ops;
  const char* scorings[] = {"sigmoid", "softmax", "sqrt_softplus", "none"};
  int i = 0;
  for (int e : {8, 16, 64, 128, 160, 256, 384, 513, 896, 1024, 1025, 65535}) {
    for (int k : {1, 8, 16, 64}) {
      if (k > e) continue;
      const char* scoring = scorings[i++ % 4];
      const bool none = std::string(scoring) == "none";
      ops.push_back(fmt::format(R"({{"op": "routing", "num_experts": {}, "topk": {}, "scoring": "{}", "renormalize": {}, "bias": "{}", "logits_dtype": "{}", "ids_dtype": "{}"}})",
                                e, k, scoring, none ? "false" : "true", i % 3 == 0 ? "none" : (i % 3 == 1 ? "fp32" : "bf16"),
                                i % 2 ? "fp32" : "bf16", i % 2 ? "int32" : "int64"));
    }
  }
  for (const char* g : {R"("num_experts": 256, "topk": 8, "n_group": 8, "topk_group": 4, "bias": "fp32")",
                        R"("num_experts": 160, "topk": 6, "n_group": 8, "topk_group": 3, "group_score": "max")",
                        R"("num_experts": 64, "topk": 4, "n_group": 8, "topk_group": 4)",
                        R"("num_experts": 128, "topk": 8, "n_group": 4, "topk_group": 2, "bias": "fp16")",
                        R"("num_experts": 256, "topk": 16, "n_group": 16, "topk_group": 8, "bias": "fp32")",
                        R"("num_experts": 1024, "topk": 64, "n_group": 64, "topk_group": 40)",
                        // The warp kernel's group paths by logits width (16-byte vectors of 4 or 8):
                        // shuffle scores over 4 or 8 lanes, over a whole warp (groups of 128), one
                        // expert per group, and the shared-memory path (groups of 20).
                        R"("num_experts": 256, "topk": 8, "n_group": 8, "topk_group": 4, "bias": "fp32", "logits_dtype": "bf16")",
                        R"("num_experts": 256, "topk": 8, "n_group": 8, "topk_group": 4, "logits_dtype": "fp16", "group_score": "max")",
                        R"("num_experts": 384, "topk": 6, "n_group": 3, "topk_group": 1, "logits_dtype": "bf16")",
                        R"("num_experts": 32, "topk": 4, "n_group": 32, "topk_group": 8)",
                        R"("num_experts": 512, "topk": 32, "n_group": 32, "topk_group": 20, "logits_dtype": "fp16")",
                        R"("num_experts": 160, "topk": 8, "n_group": 8, "topk_group": 3, "logits_dtype": "bf16")"}) {
    ops.push_back(fmt::format(R"({{"op": "routing", "scoring": "sigmoid", "renormalize": true, {}}})", g));
  }
  compile_all(jobs_of(shipped_and("routing", ops)));
}

TEST_CASE("every experts contract compiles for sm_90a and sm_100a without spills, the prefill wgmmas pipelined", "[nvrtc][experts]") {
  // Every shipped model's experts op, and the options each changes the kernels by (dtype, layout,
  // ids, expert map, weight on input, biases, each activation; GPT-OSS's N of 240 is shipped).
  const std::string base = R"({"op": "experts", "hidden": 1024, "intermediate": 384, "num_experts": 16)";
  std::vector<std::string> sweep;
  for (const char* extra : {R"(, "topk": 4, "dtype": "fp16", "activation": {"kind": "gelu_tanh"}})",
                            R"(, "topk": 4, "activation": {"kind": "gelu"}})",
                            R"(, "topk": 4, "ids_dtype": "int64", "global_experts": 64, "activation": {"kind": "silu"}})",
                            R"(, "apply_router_weight_on_input": true, "topk": 1, "activation": {"kind": "silu"}})",
                            R"(, "topk": 4, "bias": true, "activation": {"kind": "swiglu_oai", "interleaved": true, "alpha": 1.702, "limit": 7.0}})",
                            R"(, "layout": "masked", "activation": {"kind": "situ", "beta": 2.0, "linear_beta": 10.0}})"}) {
    sweep.push_back(base + extra);
  }
  auto jobs = jobs_of(shipped_and("experts", sweep));
  const auto prefill = std::count_if(jobs.begin(), jobs.end(), [](const auto& j) { return j.contract.family() == "experts_prefill"; });
  compile_all(std::move(jobs));  // and no wgmmas serialized (ptxas's C7518)
  CHECK(prefill >= 10);
}

TEST_CASE("experts tiles a spec forces compile at the ends of their ranges, every wgmma N of the prefill tiles", "[nvrtc][experts]") {
  // hidden and intermediate 3840 divide by every wgmma N and split 15 ways into k blocks of 32.
  const std::string base = R"({"op": "experts", "hidden": 3840, "intermediate": 3840, "num_experts": 8, "topk": 2, "activation": {"kind": "silu"}, "tiles": )";
  const std::vector<std::string> ops = {
      base + R"({"groups1": 16, "split1": 1, "groups2": 1, "split2": 15, "ring1": 1, "ring2": 16, "ring_one": 1, "cols1": 8, "n2": 256, "band1": 1, "band2": 65536}})",
      base + R"({"groups1": 1, "split1": 15, "groups2": 16, "split2": 1, "ring1": 16, "ring2": 1, "ring_one": 16, "cols1": 16, "n2": 240}})",
      base + R"({"groups1": 3, "split1": 5, "groups2": 5, "split2": 3, "cols1": 32, "n2": 192}})",
      base + R"({"cols1": 96, "n2": 64}})",
      base + R"({"cols1": 120, "n2": 32}})",
      base + R"({"cols1": 128, "n2": 16}})"};
  std::vector<std::shared_ptr<const OpSpec>> specs;
  for (const auto& json : ops) specs.push_back(parse_spec(json, "tiles.json").ops[0]);
  std::vector<WarmupJob> jobs;
  for (const auto& op : specs) {
    for (auto& c : contracts(*op, "sm_90a")) jobs.push_back({op->name, std::move(c)});
  }
  for (auto& c : contracts(*specs[0], "sm_100a")) jobs.push_back({"sm_100a", std::move(c)});
  for (auto& c : contracts(*specs[1], "sm_100a")) jobs.push_back({"sm_100a", std::move(c)});
  compile_all(std::move(jobs), true);
}

TEST_CASE("the one experts contract that spills: fp16 GELU (erf)'s prefill GEMM1, in its epilogue, a bounded amount", "[nvrtc][experts]") {
  // compiler/ops/experts.cpp's tiling gives GELU 64 columns a GEMM1 tile, which ends bf16's spill
  // but not fp16's (56 bytes: its erfcs overlapped beside the accumulators within the consumers'
  // setmaxnreg budget).
  const auto op = parse_spec(R"({"op": "experts", "hidden": 1024, "intermediate": 384, "num_experts": 16, "topk": 4, "dtype": "fp16", "activation": {"kind": "gelu"}})",
                             "sweep.json")
                      .ops[0];
  const auto options = memory_only();
  Compiler compiler(options.cuda_home);
  for (const auto& c : contracts(*op, "sm_90a")) {
    for (const auto& k : compiler.compile(c).kernels) {
      INFO("kernel " << k.name_expression);
      const int spilled = k.resources.spill_store_bytes + k.resources.spill_load_bytes;
      if (c.family() == "experts_prefill" && k.name_expression.find(", 1>") != std::string::npos) {
        CHECK(spilled <= 128);
      } else {
        CHECK(spilled == 0);
      }
    }
  }
}

TEST_CASE("the yardstick contract compiles for sm_90a and sm_100a without spills", "[nvrtc]") {
  compile_all({{"yardstick", yardstick_contract("sm_90a")}, {"yardstick", yardstick_contract("sm_100a")}});
}

TEST_CASE("a contract compiles to the same cubin bytes every time, in one process too", "[nvrtc]") {
  // The cache's checksums, export/import and reproducible warmups rely on it. A namespace-scope
  // constant that device code took by reference once came out under an internal symbol that
  // NVRTC salts per compile (different bytes on every compile in a process).
  const auto options = memory_only();
  Compiler compiler(options.cuda_home);
  const auto spec = load_spec(MOEJIT_SOURCE_DIR "/specs/kimi-k3.json");
  for (const auto& op : spec.ops) {
    for (const char* arch : {"sm_90a", "sm_100a"}) {
      for (const auto& c : contracts(*op, arch)) {
        INFO("op " << op->name << " " << arch);
        const auto a = compiler.compile(c);
        const auto b = compiler.compile(c);
        CHECK(a.binary == b.binary);
        CHECK(a.binary.find("_INTERNAL_") == std::string::npos);
      }
    }
  }
}
