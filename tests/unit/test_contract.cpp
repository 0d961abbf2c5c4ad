// Contracts, generated stubs and cache keys: canonical, complete, and free of paths,
// timestamps and environment.
#include <moejit/contract.hpp>
#include <moejit/error.hpp>
#include <moejit/spec.hpp>

#include "compiler/codegen.hpp"
#include "compiler/embedded_templates.hpp"
#include "compiler/key.hpp"
#include "compiler/nvrtc.hpp"
#include "compiler/ops/activation.hpp"
#include "compiler/ops/experts.hpp"
#include "compiler/ops/latent_tail.hpp"
#include "compiler/ops/routing.hpp"
#include "runtime/kernel.hpp"
#include "spec/ops/experts.hpp"
#include "templates/latent_tail_args.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cmath>
#include <cstdlib>
#include <string>

using namespace moejit;
using namespace moejit::detail;

namespace {

Contract contract_of(const std::string& op_json, const std::string& arch = "sm_90a") {
  return contracts(*parse_spec(op_json, "t.json").ops[0], arch).front();
}

const std::string kSitu = R"({"op": "activation", "kind": "situ", "beta": 4.0, "linear_beta": 25.0, "d": 3072})";

Toolchain toolchain() { return Toolchain{"13.0", {"-std=c++17", "-default-device", "--ptxas-options=-v"}}; }

// An experts op of this shape and activation (64 experts, top-4): the key of the measured data.
std::shared_ptr<const ExpertsSpec> experts_shape(std::int64_t hidden, std::int64_t intermediate, const std::string& activation = "silu") {
  return std::dynamic_pointer_cast<const ExpertsSpec>(parse_spec(
      fmt::format(R"({{"op": "experts", "hidden": {}, "intermediate": {}, "num_experts": 64, "topk": 4, "activation": {{"kind": "{}"}}}})",
                  hidden, intermediate, activation),
      "t.json").ops[0]);
}

}  // namespace

TEST_CASE("the canonical text holds every field and nothing else", "[contract]") {
  const auto c = contract_of(kSitu);
  const auto text = c.text();
  CHECK(text.rfind("moejit-contract 1\nfamily activation\ntemplate activation.cuh\narch sm_90a\n", 0) == 0);
  for (const char* field : {"kind situ", "layout dense", "d 3072", "dtype bf16", "out_dtype bf16", "beta 4", "linear_beta 25",
                            "threads 256", "vec 8", "unroll 1"}) {
    CHECK(text.find(std::string(field) + "\n") != std::string::npos);
  }
  CHECK(text.find("t.json") == std::string::npos);  // no file names, no op names
  CHECK(text.find("activation_0") == std::string::npos);
}

TEST_CASE("equal ops give equal contracts; any code-changing field changes it", "[contract]") {
  const auto a = contract_of(kSitu);
  const auto b = contract_of(R"({"op": "activation", "name": "other", "kind": "situ", "linear_beta": 25, "beta": 4, "d": 3072, "dtype": "bf16"})");
  CHECK(a.text() == b.text());
  CHECK(a.text() != contract_of(kSitu, "sm_100a").text());
  CHECK(a.text() != contract_of(R"({"op": "activation", "kind": "situ", "beta": 4.5, "linear_beta": 25.0, "d": 3072})").text());
  CHECK(a.text() != contract_of(R"({"op": "activation", "kind": "situ", "beta": 4.0, "d": 3072})").text());
  CHECK(a.text() != contract_of(R"({"op": "activation", "kind": "situ", "beta": 4.0, "linear_beta": 25.0, "d": 3071})").text());
}

TEST_CASE("a contract text parses back", "[contract]") {
  const auto c = contract_of(kSitu);
  const auto back = parse_contract_text(c.text());
  CHECK(back.family() == "activation");
  CHECK(back.arch() == "sm_90a");
  CHECK(back.template_name() == "activation.cuh");
  CHECK(back.fields() == c.fields());
  CHECK(back.text() == c.text());
}

TEST_CASE("the generated stub is named constants plus one instantiation per kernel", "[contract]") {
  const auto c = contract_of(kSitu);
  CHECK(c.source.find("#include \"activation.cuh\"") != std::string::npos);
  CHECK(c.source.find("static constexpr long long kD = 3072;") != std::string::npos);
  CHECK(c.source.find("static constexpr float kBeta = 0x1p+2f;") != std::string::npos);
  std::size_t instantiations = 0;
  for (auto p = c.source.find("template __global__"); p != std::string::npos; p = c.source.find("template __global__", p + 1)) {
    ++instantiations;
  }
  // bf16 SituGLU also has its tables: their fill and the table kernel.
  CHECK(instantiations == 4);
  REQUIRE(c.kernels.size() == 4);
  CHECK(c.kernels[0] == Contract::Kernel{"narrow", "moejit::activation_kernel<moejit_generated::Config>"});
  CHECK(c.kernels[1] == Contract::Kernel{"wide", "moejit::activation_wide_kernel<moejit_generated::Config>"});
  CHECK(c.kernels[2] == Contract::Kernel{"table_init", "moejit::act_table_init_kernel<moejit_generated::Config>"});
  // The table kernel holds its tables in dynamic shared memory.
  CHECK(c.kernels[3] == Contract::Kernel{"table", "moejit::act_table_kernel<moejit_generated::Config>",
                                         static_cast<int>(act_table_bytes(dynamic_cast<const ActivationSpec&>(*parse_spec(kSitu, "t.json").ops[0])))});
  // So do erf gelu and masked layouts; other kinds, fp16 input and interleaved halves do not.
  for (const char* op : {R"({"op": "activation", "kind": "gelu", "d": 64})",
                         R"({"op": "activation", "kind": "situ", "beta": 4.0, "d": 64, "layout": "masked", "num_experts": 2})"}) {
    INFO(op);
    CHECK(contract_of(op).kernels.size() == 4);
  }
  for (const char* op : {R"({"op": "activation", "kind": "silu", "d": 64})",
                         R"({"op": "activation", "kind": "situ", "beta": 4.0, "d": 64, "dtype": "fp16"})",
                         R"({"op": "activation", "kind": "gelu", "d": 64, "interleaved": true})"}) {
    INFO(op);
    CHECK(contract_of(op).kernels.size() == 2);
  }
}

TEST_CASE("a routing contract with vector loads instantiates the warp kernel for aligned and unaligned inputs", "[contract][routing]") {
  const auto spec = parse_spec(R"({"op": "routing", "num_experts": 256, "topk": 8, "scoring": "sigmoid", "bias": "fp32"})", "t.json");
  const auto c = contracts(*spec.ops[0], "sm_90a").front();
  REQUIRE(c.kernels.size() == 3);
  CHECK(c.kernels[0] == Contract::Kernel{"warp_vectors", "moejit::routing_warp_kernel<moejit_generated::Config, moejit::Loads::vectors>"});
  CHECK(c.kernels[1] == Contract::Kernel{"warp_elements", "moejit::routing_warp_kernel<moejit_generated::Config, moejit::Loads::elements>"});
  CHECK(c.kernels[2] == Contract::Kernel{"block", "moejit::routing_block_kernel<moejit_generated::Config>"});
  for (const auto& k : c.kernels) {
    CHECK(c.source.find(fmt::format("template __global__ void {}(moejit::RoutingArgs);", k.expression)) != std::string::npos);
  }
  // 16 or more experts a lane, top-k <= 16, vector loads: the lazy-keys warp kernel last.
  const auto k3 = parse_spec(R"({"op": "routing", "num_experts": 896, "topk": 16, "scoring": "sigmoid", "bias": "fp32"})", "t.json");
  const auto c3 = contracts(*k3.ops[0], "sm_90a").front();
  REQUIRE(c3.kernels.size() == 4);
  CHECK(c3.kernels[0].role == "warp_vectors");
  CHECK(c3.kernels[3] == Contract::Kernel{"warp_lazy", "moejit::routing_warp_kernel<moejit_generated::Config, moejit::Loads::vectors, moejit::Refill::lazy>"});
  CHECK(c3.kernel_index("warp_lazy") == 3);
  CHECK_THROWS_AS(c3.kernel_index("fused"), Error);
  CHECK(c3.get("warp_lazy") == "true");
  const auto k3_top32 = parse_spec(R"({"op": "routing", "num_experts": 896, "topk": 32, "scoring": "sigmoid"})", "t.json");
  CHECK(contracts(*k3_top32.ops[0], "sm_90a").front().kernels.size() == 3);  // more than 16 rounds: no fast rounds
  // No vectors (160 experts: 5 per lane): the element-by-element kernel alone.
  const auto odd = parse_spec(R"({"op": "routing", "num_experts": 160, "topk": 8, "scoring": "sigmoid"})", "t.json");
  const auto c2 = contracts(*odd.ops[0], "sm_90a").front();
  REQUIRE(c2.kernels.size() == 2);
  CHECK(c2.kernels[0] == Contract::Kernel{"warp_elements", "moejit::routing_warp_kernel<moejit_generated::Config, moejit::Loads::elements>"});
  CHECK_FALSE(c2.has_kernel("warp_vectors"));
}

TEST_CASE("float spellings are exact", "[contract]") {
  for (float x : {1.702f, 0.04f, 25.0f, 1e-20f, -3.25f, 0.0f, 3.4028235e38f, 1.4e-45f}) {
    const auto lit = float_literal(x);
    CHECK(std::strtof(lit.c_str(), nullptr) == x);
    CHECK(std::strtof(canonical_float(x).c_str(), nullptr) == x);
  }
  CHECK(canonical_float(1.702f) == "1.702");
  CHECK(float_literal(-0.0f) == "-0.0f");
}

TEST_CASE("keys hash every input and nothing else", "[contract]") {
  const auto c = contract_of(kSitu);
  const auto base = key_inputs(c, toolchain());
  const auto k = make_key(base);
  CHECK(make_key(key_inputs(contract_of(kSitu), toolchain())) == k);

  auto changed = base;
  changed.nvrtc_version = "13.1";
  CHECK_FALSE(make_key(changed) == k);
  changed = base;
  changed.options.push_back("-lineinfo");
  CHECK_FALSE(make_key(changed) == k);
  changed = base;
  changed.template_hash[0] = changed.template_hash[0] == '0' ? '1' : '0';
  CHECK_FALSE(make_key(changed) == k);
  changed = base;
  changed.schema_version += 1;
  CHECK_FALSE(make_key(changed) == k);
  CHECK_FALSE(make_key(key_inputs(contract_of(kSitu, "sm_100a"), toolchain())) == k);

  // Length-prefixed: moving a boundary between parts changes the key.
  changed = base;
  changed.options = {"-std=c++17-default-device", "--ptxas-options=-v"};
  CHECK_FALSE(make_key(changed) == k);
}

TEST_CASE("the compiler's toolchain identity has no paths or environment in it", "[contract]") {
  Compiler a("/usr/local/cuda"), b("/some/other/cuda");
  CHECK(a.toolchain().options == b.toolchain().options);
  CHECK(a.toolchain().nvrtc_version == b.toolchain().nvrtc_version);
  for (const auto& o : a.toolchain().options) CHECK(o.find('/') == std::string::npos);
  CHECK(make_key(key_inputs(contract_of(kSitu), a.toolchain())) == make_key(key_inputs(contract_of(kSitu), b.toolchain())));
}

TEST_CASE("keys print as 32 hex digits and parse back", "[contract]") {
  const auto k = make_key(key_inputs(contract_of(kSitu), toolchain()));
  const auto hex = k.hex();
  CHECK(hex.size() == 32);
  CHECK(Key::from_hex(hex) == k);
  CHECK_FALSE(Key::from_hex("xyz").has_value());
  CHECK_FALSE(Key::from_hex(std::string(32, 'g')).has_value());
}

TEST_CASE("templates are embedded with closure hashes", "[contract]") {
  const auto& act = find_template("activation.cuh");
  const auto& common = find_template("common.cuh");
  CHECK(act.closure_hash.size() == 32);
  CHECK(act.closure_hash != common.closure_hash);
  CHECK(act.text.find("activation_kernel") != std::string_view::npos);
  for (const auto& t : embedded_templates()) CHECK_FALSE(t.text.empty());
}

TEST_CASE("routing tiling: exact sizes, at most a warp of idle threads", "[spec][routing]") {
  for (int e : {1, 8, 16, 33, 64, 128, 160, 256, 288, 384, 512, 513, 896, 1024, 1025, 4096, 65535}) {
    for (int k : {1, 8, 16, 64}) {
      if (k > e) continue;
      const auto spec = parse_spec(fmt::format(R"({{"op": "routing", "num_experts": {}, "topk": {}, "scoring": "sigmoid"}})", e, k), "t.json");
      const auto& op = dynamic_cast<const RoutingSpec&>(*spec.ops[0]);
      const auto t = detail::routing_tiling(op);
      CHECK(op.has_warp_kernel() == (t.warp_slots > 0));
      CHECK(op.has_block_kernel() == (t.block_warps > 0));
      INFO("E=" << e << " K=" << k);
      if (t.warp_slots > 0) {
        CHECK(t.lanes * t.warp_slots >= e);
        CHECK(t.lanes * (t.warp_slots - 1) < e);  // no slot row entirely idle
      }
      REQUIRE(t.block_warps > 0);
      const int threads = 32 * t.block_warps;
      CHECK(threads * t.block_slots * t.block_chunks >= e);
      if (t.block_chunks == 1) CHECK(threads - 32 < e);  // at most one warp's worth of idle threads
      // Up to 512 experts and top-32: the rank tree, one expert per thread.
      if (e <= 512 && k <= 32) CHECK((t.block_slots == 1 && t.block_chunks == 1 && t.block_warps == (e + 31) / 32));
    }
  }
}

TEST_CASE("routing tiling: the warp kernel's vector width divides a lane's slots and the row", "[spec][routing]") {
  auto tiling = [](int e, const char* dtype) {
    const auto spec = parse_spec(
        fmt::format(R"({{"op": "routing", "num_experts": {}, "topk": 1, "scoring": "sigmoid", "logits_dtype": "{}"}})", e, dtype), "t.json");
    return detail::routing_tiling(dynamic_cast<const RoutingSpec&>(*spec.ops[0]));
  };
  CHECK(tiling(256, "fp32").warp_vec == 4);  // 8 slots: two 16-byte loads
  CHECK(tiling(896, "fp32").warp_vec == 4);  // 28 slots
  CHECK_FALSE(tiling(896, "fp32").warp_lazy);  // top-1: no cache runs out (test_contract: top-16 has it)
  CHECK(tiling(896, "bf16").warp_vec == 4);  // 28 slots: 8-byte loads, not 16
  CHECK(tiling(384, "bf16").warp_vec == 4);  // 12 slots
  CHECK(tiling(256, "bf16").warp_vec == 8);
  CHECK(tiling(160, "fp32").warp_vec == 1);  // 5 slots
  CHECK(tiling(513, "fp32").warp_vec == 1);  // odd row
  for (int e : {1, 8, 33, 64, 160, 288, 513, 1024}) {
    for (const char* dtype : {"fp32", "bf16"}) {
      const auto t = tiling(e, dtype);
      INFO("E=" << e << " " << dtype);
      if (t.warp_slots == 0) continue;
      CHECK(t.warp_slots % t.warp_vec == 0);
      CHECK(e % t.warp_vec == 0);
    }
  }
}

TEST_CASE("grouped routing tiling: a block kernel only where the rank tree serves it", "[spec][routing]") {
  auto tiling = [](int e, int k, int g, int tg) {
    const auto spec = parse_spec(fmt::format(R"({{"op": "routing", "num_experts": {}, "topk": {}, "n_group": {}, "topk_group": {}, "scoring": "sigmoid"}})",
                                             e, k, g, tg),
                                 "t.json");
    return detail::routing_tiling(dynamic_cast<const RoutingSpec&>(*spec.ops[0]));
  };
  for (auto [e, k, g, tg] : {std::array{256, 8, 8, 4}, {160, 8, 8, 3}, {32, 4, 32, 8}, {512, 32, 32, 20}, {384, 6, 3, 1}}) {
    const auto t = tiling(e, k, g, tg);
    INFO("E=" << e << " K=" << k << " G=" << g);
    CHECK(t.warp_slots > 0);
    CHECK(t.block_warps == (e + 31) / 32);
    CHECK((t.block_slots == 1 && t.block_chunks == 1));
  }
  for (auto [e, k, g, tg] : {std::array{1024, 8, 8, 4}, {512, 64, 32, 20}, {1024, 64, 64, 40}}) {
    INFO("E=" << e << " K=" << k << " G=" << g);
    CHECK(tiling(e, k, g, tg).block_warps == 0);
    const auto spec = parse_spec(fmt::format(R"({{"op": "routing", "num_experts": {}, "topk": {}, "n_group": {}, "topk_group": {}, "scoring": "sigmoid"}})",
                                             e, k, g, tg),
                                 "t.json");
    CHECK_FALSE(dynamic_cast<const RoutingSpec&>(*spec.ops[0]).has_block_kernel());
  }
}

TEST_CASE("latent_tail: the tensor-core up projection is in the contract on sm_90a at tp 1 where L splits in 128s", "[contract][latent_tail]") {
  const auto tail = [](const std::string& fields) {
    return parse_spec(R"({"op": "latent_tail", )" + fields + "}", "t.json").ops[0];
  };
  const auto tp1 = tail(R"("tp_size": 1, "hidden": 7168, "latent": 3584)");
  for (auto role : kTailUpProjTc) {
    CHECK(contracts(*tp1, "sm_90a").front().has_kernel(role));
    CHECK_FALSE(contracts(*tp1, "sm_100a").front().has_kernel(role));  // wgmma is sm_90a's
    CHECK_FALSE(contracts(*tail(R"("tp_size": 2, "hidden": 7168, "latent": 3584)"), "sm_90a").front().has_kernel(role));
    CHECK_FALSE(contracts(*tail(R"("tp_size": 1, "hidden": 1024, "latent": 576)"), "sm_90a").front().has_kernel(role));  // 576 = 4.5 x 128
  }
  for (auto role : kTailUpProj) CHECK(contracts(*tp1, "sm_90a").front().has_kernel(role));  // 2-8 tokens: the streamer
  // Where the contract has both, one token and more than 8 take the tensor cores.
  CHECK(latent_tail_tc_call(1));
  for (int t : {0, 2, 4, 8}) CHECK_FALSE(latent_tail_tc_call(t));
  for (int t : {9, 64, 128}) CHECK(latent_tail_tc_call(t));
  // Both sides size the kernel's shared memory from one formula: under the 227 KB an SM gives a CTA.
  for (int rows : {64, 56, 48}) {
    for (int tokens : kTailUpProjTcTokens) CHECK(tail_tc_shared_bytes(tokens, rows) <= 227 * 1024);
  }
  CHECK(tail_tc_stages(64, 64) == 6);
  CHECK(tail_tc_stages(64, 56) == 6);
  CHECK(tail_tc_stages(16, 64) == 8);
  // A CTA's W rows: the fewest that cover H in one wave of 132 CTAs, the larger on a tie.
  const auto rows = [&](int hidden) {
    return latent_tail_tiling(dynamic_cast<const LatentTailSpec&>(*tail(fmt::format(R"("tp_size": 1, "hidden": {}, "latent": 3584)", hidden)))).tc_rows;
  };
  CHECK(rows(7168) == 56);  // 128 CTAs, not 112 of 64
  CHECK(rows(4096) == 64);  // 64 CTAs: one wave already
  CHECK(rows(8448) == 64);  // 132 CTAs of 64
  CHECK(rows(9216) == 48);  // 192 of 48 is two waves (96 rows an SM) against 144 of 64 (128)
  CHECK(contracts(*tp1, "sm_90a").front().get("tc_rows") == "56");
  // The contract carries each kernel's dynamic shared memory, which the launcher asks for and
  // `compile --emit report` shows.
  const auto c = contracts(*tp1, "sm_90a").front();
  for (std::size_t i = 0; i < kTailUpProjTc.size(); ++i) {
    CHECK(c.kernel(kTailUpProjTc[i]).dynamic_shared == tail_tc_shared_bytes(kTailUpProjTcTokens[i], 56));
  }
  CHECK(c.kernel(kTailNorm).dynamic_shared == 0);
}

TEST_CASE("experts: the prefill contract exists on sm_90a where a wgmma N divides the shape, with its tiling", "[contract][experts]") {
  const auto spec_of = [](const std::string& fields) {
    return parse_spec(R"({"op": "experts", )" + fields + R"(, "activation": {"kind": "silu"}})", "t.json").ops[0];
  };
  const auto dsv3 = spec_of(R"("hidden": 7168, "intermediate": 2048, "num_experts": 256, "topk": 8)");
  const auto both = contracts(*dsv3, "sm_90a");
  REQUIRE(both.size() == 2);
  CHECK(both[1].family() == "experts_prefill");
  CHECK(both[1].template_name() == "experts_prefill.cuh");
  CHECK(both[1].get("cols1") == "128");
  CHECK(both[1].get("n2") == "256");
  CHECK(both[1].get("stages1") == "4");
  CHECK(both[1].get("band1") == "9");
  CHECK(both[1].get("hidden") == "7168");  // the decode contract's fields, then the tiling
  CHECK(both[1].has_kernel("gemm1_wgmma"));
  CHECK(both[1].has_kernel("gemm2_wgmma"));
  // Each kernel's dynamic shared memory: the prefill rings as the tiling sizes them; the one-token
  // GEMM2's stash is the device's to decide, at load.
  const auto tiling = experts_prefill_tiling(dynamic_cast<const ExpertsSpec&>(*dsv3), "sm_90a");
  for (int g : {1, 2}) {
    const auto& k = both[1].kernel(g == 1 ? "gemm1_wgmma" : "gemm2_wgmma");
    CHECK(k.dynamic_shared == tiling.shared_bytes(g));
    CHECK(k.dynamic_shared > 0);
  }
  CHECK(both[0].kernel("gemm2_one").dynamic_shared == Contract::kSharedAtLoad);
  CHECK(both[0].kernel("gemm1_one").dynamic_shared == 0);
  // GEMM1's producer gathers x's rows: no x' kernel, but where the router weight scales them first.
  CHECK_FALSE(both[1].has_kernel("gather"));
  const auto on_input = spec_of(R"("hidden": 7168, "intermediate": 2048, "num_experts": 256, "topk": 8, "apply_router_weight_on_input": true)");
  CHECK(contracts(*on_input, "sm_90a")[1].has_kernel("gather"));
  // One token: GEMM1 with each slot its own tile and GEMM2 with the combine, in the decode
  // contract of the standard layout (the masked layout below has no slots).
  CHECK(both[0].has_kernel("gemm1_one"));
  CHECK(both[0].has_kernel("gemm2_one"));
  CHECK(contracts(*dsv3, "sm_100a").size() == 1);  // wgmma is sm_90a's; tcgen05 is not written
  // GPT-OSS (2880 = 64 x 45): 120 h columns a GEMM1 tile (N 240), GEMM2's N 240.
  const auto gpt = contracts(*spec_of(R"("hidden": 2880, "intermediate": 2880, "num_experts": 128, "topk": 4)"), "sm_90a");
  REQUIRE(gpt.size() == 2);
  CHECK(gpt[1].get("cols1") == "120");
  CHECK(gpt[1].get("n2") == "240");
  // No N of the wgmma shapes divides hidden 320: the decode kernels take every call.
  CHECK(contracts(*spec_of(R"("hidden": 320, "intermediate": 192, "num_experts": 9, "topk": 3)"), "sm_90a").size() == 1);
  // The masked layout has no gather (x is already one row block an expert).
  const auto masked = contracts(*parse_spec(R"({"op": "experts", "layout": "masked", "hidden": 512, "intermediate": 256, "num_experts": 4,
      "max_tokens": 64, "activation": {"kind": "silu"}})", "t.json").ops[0], "sm_90a");
  REQUIRE(masked.size() == 2);
  CHECK_FALSE(masked[1].has_kernel("gather"));
  CHECK_FALSE(masked[0].has_kernel("gemm1_one"));
  CHECK_FALSE(masked[0].has_kernel("gemm2_one"));
}

TEST_CASE("experts: every measured ring entry is well-formed and applies to its shape alone", "[contract][experts]") {
  const auto data = nlohmann::json::parse(experts_rings_json());
  for (const char* field : {"about", "command", "device"}) CHECK_FALSE(data.at(field).get<std::string>().empty());
  const auto& defaults = data.at("defaults");
  const auto in_range = [](const nlohmann::json& v) { return v.is_number_integer() && v.get<int>() >= 1 && v.get<int>() <= 16; };
  for (const char* ring : {"ring1", "ring2", "ring_one"}) CHECK(in_range(defaults.at(ring)));
  REQUIRE_FALSE(data.at("entries").empty());
  for (const auto& e : data.at("entries")) {
    INFO(e.dump());
    CHECK_FALSE(e.at("note").get<std::string>().empty());
    const auto hidden = e.at("hidden").get<std::int64_t>(), intermediate = e.at("intermediate").get<std::int64_t>();
    const auto t = experts_tiling(*experts_shape(hidden, intermediate));
    const std::pair<const char*, int> rings[] = {{"ring1", t.ring1}, {"ring2", t.ring2}, {"ring_one", t.ring_one}};
    for (const auto& [ring, got] : rings) {
      const auto& v = e.contains(ring) ? e.at(ring) : defaults.at(ring);
      CHECK(in_range(v));
      CHECK(got == v.get<int>());
    }
    // A neighbouring shape keeps the defaults.
    const auto other = experts_shape(hidden + 64, intermediate);
    CHECK(experts_tiling(*other).ring1 == defaults.at("ring1").get<int>());
    CHECK(experts_tiling(*other).ring_one == defaults.at("ring_one").get<int>());
  }
}

TEST_CASE("experts: a prefill tile override applies to its shape (and activation) alone, and one the GEMMs cannot take is refused", "[contract][experts]") {
  const auto qwen3 = experts_shape(2048, 768);
  const auto model = experts_prefill_tiling(*qwen3, "sm_90a", nlohmann::json::parse(R"({"entries": []})"));
  CHECK(model.cols1 == 128);
  CHECK(model.n2 == 256);
  CHECK(model.stages1 == 4);
  CHECK(model.stages2 == 4);
  const auto data = nlohmann::json::parse(R"({"entries": [
    {"hidden": 2048, "intermediate": 768, "n2": 128, "band1": 4},
    {"hidden": 2048, "intermediate": 768, "activation": "gelu", "cols1": 32}]})");
  const auto t = experts_prefill_tiling(*qwen3, "sm_90a", data);
  CHECK(t.ok);
  CHECK(t.cols1 == 128);  // the gelu entry is not silu's
  CHECK(t.n2 == 128);
  CHECK(t.stages2 == 6);  // the stages follow the tiles: (128 + 128) rows x 128 bytes a stage
  CHECK(t.band1 == 4);
  CHECK(t.band2 == model.band2);
  const auto gelu = experts_prefill_tiling(*experts_shape(2048, 768, "gelu"), "sm_90a", data);
  CHECK(gelu.cols1 == 32);
  CHECK(gelu.stages1 == 6);
  CHECK(experts_prefill_tiling(*experts_shape(2048, 1536), "sm_90a", data).n2 == 256);  // another shape: the model's
  for (const char* bad : {R"({"hidden": 2048, "intermediate": 768, "n2": 96})", R"({"hidden": 2048, "intermediate": 768, "cols1": 256})",
                          R"({"hidden": 2048, "intermediate": 768, "cols1": 100})", R"({"hidden": 2048, "intermediate": 768, "band2": 0})",
                          // an N that divides the shape but has no wgmma shape in templates/wgmma.cuh
                          R"({"hidden": 2048, "intermediate": 768, "n2": 8})", R"({"hidden": 2048, "intermediate": 768, "cols1": 24})"}) {
    INFO(bad);
    const auto refused = nlohmann::json{{"entries", nlohmann::json::array({nlohmann::json::parse(bad)})}};
    CHECK_THROWS_AS(experts_prefill_tiling(*qwen3, "sm_90a", refused), Error);
  }
}

TEST_CASE("experts: tiles a spec forces override the model and the measured data, in both contracts", "[contract][experts]") {
  const auto kimi = [](const std::string& tiles) {
    return parse_spec(R"({"op": "experts", "hidden": 3584, "intermediate": 384, "num_experts": 896, "topk": 16, "activation": {"kind": "situ", "beta": 4.0}, "tiles": )" +
                          tiles + "}",
                      "t.json")
        .ops[0];
  };
  const auto model = kimi("{}");
  const auto& m = dynamic_cast<const ExpertsSpec&>(*model);
  const auto forced = kimi(R"({"groups1": 1, "split1": 7, "groups2": 8, "split2": 2, "ring1": 3, "ring2": 5, "ring_one": 12, "cols1": 32, "n2": 64, "band1": 2, "band2": 9})");
  const auto& f = dynamic_cast<const ExpertsSpec&>(*forced);
  const auto t = experts_tiling(f);
  CHECK(experts_tiling(m).ring1 == 8);  // the measured entry for this shape, which the spec overrides
  CHECK(t.groups1 == 1);
  CHECK(t.split1 == 7);
  CHECK(t.groups2 == 8);
  CHECK(t.split2 == 2);
  CHECK(t.ring1 == 3);
  CHECK(t.ring2 == 5);
  CHECK(t.ring_one == 12);
  CHECK(experts_one_token_threads(f, t) == 32 * 8 * 2);  // 16 / split2 slots at a time, split2 warps each
  const auto p = experts_prefill_tiling(f, "sm_90a", nlohmann::json::parse(R"({"entries": [{"hidden": 3584, "intermediate": 384, "cols1": 64, "n2": 128, "band1": 4}]})"));
  CHECK(p.ok);
  CHECK(p.cols1 == 32);
  CHECK(p.n2 == 64);
  CHECK(p.band1 == 2);
  CHECK(p.band2 == 9);
  CHECK(p.stages1 == 6);  // the stages follow the tiles
  CHECK_FALSE(experts_prefill_tiling(f, "sm_100a").ok);  // no prefill kernels there: the prefill tiles go unused
  const auto cf = contracts(*forced, "sm_90a"), cm = contracts(*model, "sm_90a");
  REQUIRE(cf.size() == 2);
  CHECK(cf[0].get("split1") == "7");
  CHECK(cf[0].get("ring_one") == "12");
  CHECK(cf[1].get("n2") == "64");
  CHECK(cf[1].get("band2") == "9");
  CHECK(make_key(key_inputs(cf[0], toolchain())) != make_key(key_inputs(cm[0], toolchain())));
  CHECK(make_key(key_inputs(cf[1], toolchain())) != make_key(key_inputs(cm[1], toolchain())));
  // One forced field leaves the rest of the compiler's.
  const auto ring = contracts(*kimi(R"({"ring2": 5})"), "sm_90a");
  for (const char* field : {"groups1", "split1", "groups2", "split2", "ring1", "ring_one"}) CHECK(ring[0].get(field) == cm[0].get(field));
  CHECK(ring[1].get("n2") == cm[1].get("n2"));
}

TEST_CASE("experts: the wgmma N a spec's prefill tiles may take are the shapes templates/wgmma.cuh holds", "[contract][experts]") {
  const auto& wgmma = find_template("wgmma.cuh").text;
  for (const char* type : {"__nv_bfloat16", "__half"}) {
    std::vector<int> held;
    const std::string prefix = fmt::format("struct Mma<{}, ", type);
    for (auto at = wgmma.find(prefix); at != std::string_view::npos; at = wgmma.find(prefix, at + 1)) {
      held.push_back(std::stoi(std::string(wgmma.substr(at + prefix.size(), 4))));
    }
    CHECK(held == std::vector<int>(ExpertsTiles::kWgmmaN.begin(), ExpertsTiles::kWgmmaN.end()));
  }
}

TEST_CASE("experts: the shipped prefill tile overrides are documented, and each is its shape's", "[contract][experts]") {
  const auto data = nlohmann::json::parse(experts_prefill_tiles_json());
  for (const char* field : {"about", "model_note"}) CHECK_FALSE(data.at(field).get<std::string>().empty());
  for (const auto& e : data.at("entries")) {
    INFO(e.dump());
    for (const char* field : {"note", "command", "device"}) CHECK_FALSE(e.at(field).get<std::string>().empty());
    const auto t = experts_prefill_tiling(*experts_shape(e.at("hidden"), e.at("intermediate"), e.value("activation", "silu")), "sm_90a");
    for (const auto& [field, got] : {std::pair{"cols1", t.cols1}, {"n2", t.n2}, {"band1", t.band1}, {"band2", t.band2}}) {
      if (e.contains(field)) CHECK(got == e.at(field).get<int>());
    }
  }
}

TEST_CASE("experts: a one-token GEMM2 stash whose dynamic and static shared memory pass 48 KiB together asks for the opt-in", "[contract][experts]") {
  // DeepSeek-V3 at tp 8 (I 256): 448 CTAs, four an SM of an H200, five regions of 9728 bytes --
  // 48640 bytes, under 48 KiB alone but not beside the kernel's 768 static ones.
  const auto spec = std::dynamic_pointer_cast<const ExpertsSpec>(
      parse_spec(R"({"op": "experts", "hidden": 7168, "intermediate": 256, "num_experts": 256, "topk": 8, "activation": {"kind": "silu"}})", "t.json")
          .ops[0]);
  const auto t = experts_tiling(*spec);
  const int regions = experts_one_token_stash_regions(*spec, t, {132, 233472, 232448, 768});
  const auto bytes = static_cast<unsigned>(experts_one_token_stash_bytes(*spec, t, regions));
  CHECK(regions == 5);
  CHECK(bytes == 48640);
  CHECK(needs_shared_opt_in(bytes, 768));
  CHECK_FALSE(needs_shared_opt_in(bytes, 0));
  CHECK_FALSE(needs_shared_opt_in(0, 49152));
  CHECK(needs_shared_opt_in(49153, 0));
}

TEST_CASE("experts: the decode and one-token GEMMs' rings, and the one-token GEMM2 stashes the slots that fit when the SMs hold its whole grid", "[contract][experts]") {
  const auto spec_of = [](const std::string& fields) {
    return std::dynamic_pointer_cast<const ExpertsSpec>(
        parse_spec(R"({"op": "experts", )" + fields + R"(, "activation": {"kind": "silu"}})", "t.json").ops[0]);
  };
  // An H200: 132 SMs of 228 KB; the one-token GEMM2's static shared memory as compiled for sm_90a.
  const auto h200 = [](int gemm2_static) { return OneTokenResidency{132, 233472, 232448, gemm2_static}; };
  // Qwen3-30B-A3B: 128 GEMM2 CTAs, one an SM, each with all 8 slots (16 rows of 1536 bytes padded
  // to 1600, and an h row: 27136 bytes a slot).
  const auto qwen3 = spec_of(R"("hidden": 2048, "intermediate": 768, "num_experts": 128, "topk": 8)");
  // The decode GEMMs' rings (compiler/ops/experts_rings.json): GEMM1's 4 blocks, 8 where measured
  // faster (Kimi-K3 tp 8's shape); GEMM2's 8; the one-token GEMM1's 8, 4 where measured faster
  // (Kimi-K3 tp 8's shape).
  CHECK(experts_tiling(*qwen3).ring1 == 4);
  CHECK(experts_tiling(*qwen3).ring2 == 8);
  CHECK(experts_tiling(*qwen3).ring_one == 8);
  CHECK(contracts(*qwen3, "sm_90a")[0].get("ring_one") == "8");
  CHECK(contracts(*qwen3, "sm_90a")[0].get("ring1") == "4");
  CHECK(contracts(*qwen3, "sm_90a")[0].get("ring2") == "8");
  CHECK(experts_one_token_stash_regions(*qwen3, experts_tiling(*qwen3), h200(528)) == 8);
  CHECK(experts_one_token_stash_bytes(*qwen3, experts_tiling(*qwen3), 8) == 8 * (16 * 1600 + 1536));
  // Kimi-K3 tp 8: 224 CTAs, two an SM: 8 regions for 16 slots (rows of 768 bytes padded to 832).
  const auto kimi = spec_of(R"("hidden": 3584, "intermediate": 384, "num_experts": 896, "topk": 16)");
  CHECK(experts_tiling(*kimi).ring1 == 8);
  CHECK(contracts(*kimi, "sm_90a")[0].get("ring1") == "8");
  CHECK(experts_tiling(*kimi).ring_one == 4);
  CHECK(contracts(*kimi, "sm_90a")[0].get("ring_one") == "4");
  CHECK(experts_one_token_stash_regions(*kimi, experts_tiling(*kimi), h200(1408)) == 8);
  CHECK(experts_one_token_stash_bytes(*kimi, experts_tiling(*kimi), 8) == 8 * (16 * 832 + 768));
  // 32 CTAs, one an SM, K split 2 ways: 6 regions of 36 KB for 12 slots; past two slots a region
  // (16 slots in 6 would take three), the register ring.
  const auto split2 = spec_of(R"("hidden": 512, "intermediate": 1024, "num_experts": 16, "topk": 12)");
  CHECK(experts_tiling(*split2).split2 == 2);
  CHECK(experts_one_token_stash_bytes(*split2, experts_tiling(*split2), 1) == 2 * 16 * 1088 + 2048);
  CHECK(experts_one_token_stash_regions(*split2, experts_tiling(*split2), h200(2048)) == 6);
  const auto split2_k16 = spec_of(R"("hidden": 512, "intermediate": 1024, "num_experts": 16, "topk": 16)");
  CHECK(experts_one_token_stash_regions(*split2_k16, experts_tiling(*split2_k16), h200(2048)) == 0);
  // DeepSeek-V3: a slot (136 KB) does not fit the four CTAs an SM holds.
  const auto dsv3 = spec_of(R"("hidden": 7168, "intermediate": 2048, "num_experts": 256, "topk": 8)");
  CHECK(experts_one_token_stash_regions(*dsv3, experts_tiling(*dsv3), h200(4624)) == 0);
  // No SMs known, or the masked layout (no one-token kernels): nothing.
  CHECK(experts_one_token_stash_regions(*qwen3, experts_tiling(*qwen3), {}) == 0);
  const auto masked = parse_spec(R"({"op": "experts", "layout": "masked", "hidden": 512, "intermediate": 256, "num_experts": 4,
      "max_tokens": 64, "activation": {"kind": "silu"}})", "t.json").ops[0];
  const auto& m = dynamic_cast<const ExpertsSpec&>(*masked);
  CHECK(experts_one_token_stash_regions(m, experts_tiling(m), h200(528)) == 0);
}
