// Spec parsing and validation: every bad input gives one error naming file, pointer, found and
// expected; defaults are filled in and the canonical form is stable.
#include <moejit/error.hpp>
#include <moejit/spec.hpp>

#include "spec/ops/activation.hpp"
#include "spec/ops/experts.hpp"
#include "spec/ops/routing.hpp"

#include <fmt/format.h>

#include <catch2/catch.hpp>

#include <array>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>

using namespace moejit;

namespace {

// Parses `text` expecting a spec error at `pointer` whose message contains `words`.
void expect_error(const std::string& text, const std::string& pointer, const std::string& words) {
  INFO("spec: " << text);
  try {
    parse_spec(text, "t.json");
    FAIL("no error for a bad spec");
  } catch (const Error& e) {
    INFO("error: " << e.what());
    CHECK(e.kind() == ErrorKind::spec);
    CHECK(e.is_bad_input());
    CHECK(e.fields().file == "t.json");
    CHECK(e.fields().pointer == pointer);
    CHECK(std::string(e.what()).find(words) != std::string::npos);
  }
}

std::string situ(const std::string& extra) {
  return R"({"model": "m", "ops": [{"op": "activation", "kind": "situ", "d": 3072)" + extra + "}]}";
}

}  // namespace

TEST_CASE("a model spec parses with defaults filled in", "[spec]") {
  const auto spec = parse_spec(situ(R"(, "beta": 4.0, "linear_beta": 25.0)"), "k3.json");
  REQUIRE(spec.ops.size() == 1);
  CHECK(spec.model == "m");
  CHECK(spec.archs == std::vector<std::string>{"sm_90a", "sm_100a"});
  const auto& a = dynamic_cast<const ActivationSpec&>(*spec.ops[0]);
  CHECK(a.name == "activation_0");
  CHECK(a.kind == ActivationKind::situ);
  CHECK(a.layout == ActivationLayout::dense);
  CHECK(a.dtype == DType::bf16);
  CHECK(a.out_dtype == DType::bf16);
  CHECK(a.beta == 4.0f);
  CHECK(a.linear_beta == 25.0f);
  CHECK(spec.op("activation_0")->name == "activation_0");
  CHECK(spec.op("0") == spec.ops[0]);
}

TEST_CASE("a single-op file is a spec of one op", "[spec]") {
  const auto spec = parse_spec(R"({"op": "activation", "kind": "silu", "d": 7, "archs": ["sm_90a"]})", "one.json");
  REQUIRE(spec.ops.size() == 1);
  CHECK(spec.ops[0]->name == "activation");
  CHECK(spec.archs == std::vector<std::string>{"sm_90a"});
}

TEST_CASE("the canonical form fills defaults and does not depend on spelling", "[spec]") {
  const auto a = parse_spec(situ(R"(, "beta": 4, "linear_beta": -1, "layout": "dense")"), "a.json");
  const auto b = parse_spec(R"({"model": "m", "ops": [{"d": 3072, "beta": 4.0, "kind": "situ", "op": "activation", "dtype": "bf16"}]})", "b.json");
  CHECK(a.canonical_json() == b.canonical_json());
  CHECK(a.canonical_json().find("linear_beta") == std::string::npos);  // <= 0 means unset
  const auto alpha = parse_spec(R"({"op": "activation", "kind": "swiglu_oai", "d": 8})", "c.json");
  CHECK(alpha.ops[0]->canonical_json().find("\"alpha\":1.702") != std::string::npos);
}

TEST_CASE("malformed JSON is one clear error", "[spec]") {
  expect_error(R"({"model": "m", "ops": [)", "", "malformed JSON");
  expect_error(R"({"op": "activation", "kind": "situ", "d": 8, "beta": NaN})", "", "malformed JSON");
  expect_error(R"({"op": "activation", "kind": "situ", "d": 8, "beta": 1e999})", "/beta", "out of range at line 1, column 54");
  expect_error(R"({"op": "activation", "kind": "situ", "d": 8, "beta": 1, "beta": 2})", "/beta", "appears twice");
  expect_error(R"([1, 2])", "/", "expected a JSON object");
  expect_error(R"({"a": 1} x)", "", "line 1, column 10");                       // where, without nlohmann's tag
  expect_error(std::string("{\"op\"\0: 1}", 10), "", "a NUL byte at offset 5");  // not a text file
  try {
    parse_spec(R"({"model": "m", "ops": [)", "t.json");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("json.exception") == std::string::npos);
  }
}

TEST_CASE("JSON errors say where: a repeated key its pointer, an overflow its line and column, bytes escaped", "[spec]") {
  const std::string two = R"({"model": "m", "ops": [{"op": "activation", "kind": "silu", "d": 8},)";
  expect_error(two + "\n" + R"({"op": "activation", "kind": "situ", "d": 8, "beta": 1, "beta": 2}]})", "/ops/1/beta", "appears twice");
  expect_error(two + "\n\n" + R"({"op": "activation", "kind": "situ", "d": 8, "beta": -1e309}]})", "/ops/1/beta",
               "number out of range at line 3, column 54; found -1e309");
  expect_error(R"({"model": "m", "ops": [1, 2, 1e400]})", "/ops/2", "found 1e400");
  expect_error(R"({"model": "m", "x/~y": {"a": 1, "a": 1}})", "/x~1~0y/a", "appears twice");
  expect_error("{\"model\": \"m\xff\x1b\"", "", "last read: '\"m\\xff'");
  std::string deepest;
  for (int i = 0; i < 64; ++i) deepest += "/0";
  expect_error(std::string(100, '[') + std::string(100, ']'), deepest, "nested deeper than 64 levels");
}

TEST_CASE("parsing takes time linear in the spec's size", "[spec]") {
  auto seconds = [](const std::string& text) {
    const auto start = std::chrono::steady_clock::now();
    try {
      (void)parse_spec(text, "t.json");
    } catch (const Error&) {
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  std::string empties = R"({"model": "m", "ops": [)";
  for (int i = 0; i < 200000; ++i) empties += i ? ",{}" : "{}";
  std::string keys = "{";
  for (int i = 0; i < 100000; ++i) keys += fmt::format("{}\"k{}\": {}", i ? "," : "", i, i);
  std::string ops = R"({"model": "m", "ops": [)";
  for (int i = 0; ops.size() < 5'000'000; ++i) {
    ops += fmt::format(R"({}{{"name": "a{}", "op": "activation", "kind": "silu", "d": {}}})", i ? "," : "", i, 8 + 8 * (i % 100));
  }
  ops += "]}";
  // NOTE: quadratic parsing took 15, 13 and 23 s here; linear takes 0.1-0.8 s. The bound leaves
  // room for a slow machine and still fails a quadratic one.
  CHECK(seconds(empties + "]}") < 5);
  CHECK(seconds(keys + "}") < 5);
  CHECK(seconds(ops) < 5);
  CHECK(parse_spec(ops, "t.json").ops.size() > 60000);
}

TEST_CASE("unknown ops and fields are rejected with their pointer", "[spec]") {
  expect_error(R"({"model": "m", "ops": [{"op": "softmax_everything"}]})", "/ops/0/op", "unknown op");
  expect_error(situ(R"(, "beta": 4, "betta": 1)"), "/ops/0/betta", "unknown field 'betta'");
  expect_error(R"({"model": "m", "ops": [], "x": 1})", "/ops", "non-empty");
  expect_error(R"({"model": "m", "ops": [{"op": "activation", "kind": "silu", "d": 8}], "extra": 1})", "/extra", "unknown field");
  expect_error(R"({"ops": [{"op": "activation", "kind": "silu", "d": 8}]})", "/model", "missing required field");
}

TEST_CASE("situ needs a positive finite beta", "[spec]") {
  expect_error(situ(""), "/ops/0/beta", "situ needs 'beta'");
  expect_error(situ(R"(, "beta": 0)"), "/ops/0/beta", "must be > 0");
  expect_error(situ(R"(, "beta": -1.5)"), "/ops/0/beta", "found -1.5");
  expect_error(situ(R"(, "beta": "4")"), "/ops/0/beta", "must be a number");
  expect_error(R"({"op": "activation", "kind": "silu", "d": 8, "beta": 1})", "/beta", "applies only to kind situ");
  expect_error(R"({"op": "activation", "kind": "silu", "d": 8, "alpha": 1})", "/alpha", "applies only to kind swiglu_oai");
  expect_error(R"({"op": "activation", "kind": "swiglu_oai", "d": 8, "limit": 0})", "/limit", "must be > 0");
}

TEST_CASE("fp32 parameters stay normal fp32 numbers, and so do the reciprocals the kernels take", "[spec]") {
  // Values fp32 would round to 0, a subnormal or infinity are rejected, not silently changed.
  expect_error(situ(R"(, "beta": 1e-50)"), "/ops/0/beta", "outside the range");
  expect_error(situ(R"(, "beta": 1e-40)"), "/ops/0/beta", "found 1e-40");
  expect_error(situ(R"(, "beta": 1e300)"), "/ops/0/beta", "expected a finite number > 0, in [1.17549e-38, 8.50706e+37]");
  expect_error(situ(R"(, "beta": 1e38)"), "/ops/0/beta", "outside the range");  // 1/beta would be subnormal
  expect_error(situ(R"(, "beta": 4, "linear_beta": 1e-300)"), "/ops/0/linear_beta", "outside the range");
  expect_error(situ(R"(, "beta": 4, "linear_beta": 1e39)"), "/ops/0/linear_beta", "outside the range");
  expect_error(R"({"op": "activation", "kind": "swiglu_oai", "d": 8, "alpha": 1e39})", "/alpha", "outside the range");
  expect_error(R"({"op": "routing", "num_experts": 8, "topk": 2, "scoring": "softmax", "routed_scaling_factor": 1e-39})",
               "/routed_scaling_factor", "outside the range");
  // The edges themselves are fine.
  const auto edge = parse_spec(situ(R"(, "beta": 1.1754943508222875e-38, "linear_beta": 8.5e37)"), "e.json");
  const auto& a = dynamic_cast<const ActivationSpec&>(*edge.ops[0]);
  CHECK(a.beta == std::numeric_limits<float>::min());
  CHECK(std::isnormal(1.0f / a.linear_beta));
  CHECK(dynamic_cast<const ActivationSpec&>(*parse_spec(situ(R"(, "beta": 4, "linear_beta": 0)"), "z.json").ops[0]).linear_beta == 0.0f);
}

TEST_CASE("sizes must be positive integers in range", "[spec]") {
  expect_error(R"({"model": "m", "ops": [{"op": "activation", "kind": "silu", "d": 0}]})", "/ops/0/d", "out of range");
  expect_error(R"({"op": "activation", "kind": "silu", "d": -4})", "/d", "out of range");
  expect_error(R"({"op": "activation", "kind": "silu", "d": 3.5})", "/d", "must be an integer");
  expect_error(R"({"op": "activation", "kind": "silu", "d": 18446744073709551615})", "/d", "out of range");
  expect_error(R"({"op": "activation", "kind": "silu", "d": 1e30})", "/d", "out of range");
  expect_error(R"({"op": "activation", "kind": "silu", "d": 0.0})", "/d", "out of range");
  // JSON has one number type: 8.0 is the integer 8, as JSON Schema (and so specs/schema.json) says.
  const auto whole = parse_spec(R"({"op": "activation", "kind": "silu", "d": 8.0})", "w.json");
  CHECK(dynamic_cast<const ActivationSpec&>(*whole.ops[0]).d == 8);
  CHECK(whole.canonical_json() == parse_spec(R"({"op": "activation", "kind": "silu", "d": 8})", "i.json").canonical_json());
  // A missing field says what it may be.
  expect_error(R"({"op": "activation", "kind": "silu", "d": 8, "layout": "masked"})", "/num_experts", "expected an integer in [1,");
  expect_error(R"({"op": "activation", "kind": "silu", "d": 8, "layout": "masked"})", "/num_experts", "missing required field");
  expect_error(R"({"op": "activation", "kind": "silu", "d": 8, "layout": "masked", "num_experts": 0})", "/num_experts", "out of range");
  expect_error(R"({"op": "activation", "kind": "silu", "d": 8, "num_experts": 4})", "/num_experts", "applies only to layout masked");
}

TEST_CASE("dtypes, archs, kinds and names are checked", "[spec]") {
  expect_error(R"({"op": "activation", "kind": "silu", "d": 8, "dtype": "fp8"})", "/dtype", "one of bf16, fp16, fp32");
  expect_error(R"({"op": "activation", "kind": "silu", "d": 8, "out_dtype": "int32"})", "/out_dtype", "unsupported dtype");
  expect_error(R"({"op": "activation", "kind": "relu", "d": 8})", "/kind", "unknown kind 'relu'");
  expect_error(R"({"op": "activation", "kind": "silu", "d": 8, "archs": ["sm_75"]})", "/archs/0", "unsupported arch");
  expect_error(R"({"op": "activation", "kind": "silu", "d": 8, "archs": []})", "/archs", "non-empty");
  expect_error(R"({"op": "activation", "kind": "silu", "d": 8, "archs": ["sm_90a", "sm_100a", "sm_90a"]})", "/archs/2", "arch listed twice");
  expect_error(R"({"op": "activation", "kind": "silu", "d": 8, "interleaved": 1})", "/interleaved", "true or false");
  expect_error(R"({"model": "m", "ops": [{"op": "activation", "kind": "silu", "d": 8, "name": "a"},
                                         {"op": "activation", "kind": "gelu", "d": 8, "name": "a"}]})", "/ops/1/name", "duplicate op name; found \"a\"");
  expect_error(R"({"op": "activation", "kind": "silu", "d": 8, "name": "12"})", "/name", "invalid op name");
}

TEST_CASE("an unknown op name or index is a usage error", "[spec]") {
  const auto spec = parse_spec(R"({"op": "activation", "kind": "silu", "d": 8})", "t.json");
  CHECK_THROWS_AS(spec.op("nope"), Error);
  CHECK_THROWS_AS(spec.op("1"), Error);
  try {
    spec.op("nope");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::usage);
  }
}

TEST_CASE("a missing spec file is a spec error that says why", "[spec]") {
  CHECK_THROWS_AS(load_spec("/nonexistent/spec.json"), Error);
  try {
    load_spec("/nonexistent/spec.json");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::spec);
    CHECK(std::string(e.what()).find("No such file or directory") != std::string::npos);
  }
  try {
    load_spec(MOEJIT_SOURCE_DIR "/specs");
    FAIL("a directory read as a spec");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::spec);
    CHECK(std::string(e.what()).find("it is a directory") != std::string::npos);
  }
  // Never opened for reading: a read would never end (or never start).
  for (const char* file : {"/dev/zero", "/dev/urandom"}) {
    try {
      load_spec(file);
      FAIL("a device read as a spec");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::spec);
      CHECK(std::string(e.what()).find("found a character device") != std::string::npos);
    }
  }
}

TEST_CASE("activation tensors are declared with their shapes", "[spec]") {
  const auto dense = parse_spec(R"({"op": "activation", "kind": "silu", "d": 7})", "t.json");
  const auto t = dense.ops[0]->tensors();
  REQUIRE(t.size() == 2);
  CHECK(t[0].name == "x");
  CHECK(t[0].shape_text() == "[T, 14]");
  CHECK(t[1].shape_text() == "[T, 7]");
  CHECK(t[1].bytes_for(3) == 3 * 7 * 2);
  const auto masked = parse_spec(R"({"op": "activation", "kind": "silu", "d": 8, "layout": "masked", "num_experts": 4, "out_dtype": "fp32"})", "t.json");
  const auto m = masked.ops[0]->tensors();
  REQUIRE(m.size() == 3);
  CHECK(m[0].shape_text() == "[4, T, 16]");
  CHECK(m[1].name == "expert_num_tokens");
  CHECK(m[1].dtype == DType::i32);
  CHECK(m[2].keeps_unwritten);
  CHECK(m[2].bytes_for(5) == 4 * 5 * 8 * 4);
}

TEST_CASE("routing specs: defaults, grouping and every bad input", "[spec][routing]") {
  const auto ok = parse_spec(R"({"op": "routing", "num_experts": 256, "topk": 8, "n_group": 8, "topk_group": 4,
                                 "scoring": "sigmoid", "bias": "fp32", "renormalize": true, "routed_scaling_factor": 2.5})", "t.json");
  CHECK(ok.ops[0]->canonical_json().find("\"group_score\":\"top2_sum\"") != std::string::npos);  // default with a bias
  const auto v2 = parse_spec(R"({"op": "routing", "num_experts": 160, "topk": 6, "n_group": 8, "topk_group": 3, "scoring": "softmax"})", "t.json");
  CHECK(v2.ops[0]->canonical_json().find("\"group_score\":\"max\"") != std::string::npos);  // default without
  const auto t = ok.ops[0]->tensors();
  REQUIRE(t.size() == 4);
  CHECK(t[0].shape_text() == "[T, 256]");
  CHECK(t[1].name == "bias");
  CHECK(t[3].dtype == DType::i32);

  auto r = [](const std::string& extra) { return R"({"op": "routing", "num_experts": 64, "topk": 4, "scoring": "sigmoid")" + extra + "}"; };
  expect_error(R"({"op": "routing", "num_experts": 8, "topk": 9, "scoring": "softmax"})", "/topk", "exceeds num_experts 8");
  expect_error(R"({"op": "routing", "num_experts": 256, "topk": 65, "scoring": "sigmoid"})", "/topk", "expected an integer in [1, 64]");
  expect_error(R"({"op": "routing", "num_experts": 70000, "topk": 4, "scoring": "softmax"})", "/num_experts", "[1, 65535]");
  expect_error(r(R"(, "n_group": 5, "topk_group": 1)"), "/n_group", "does not divide num_experts 64");
  expect_error(r(R"(, "n_group": 8)"), "/topk_group", "needs 'topk_group'");
  expect_error(r(R"(, "n_group": 8, "topk_group": 9)"), "/topk_group", "out of range");
  expect_error(r(R"(, "n_group": 8, "topk_group": 0)"), "/topk_group", "out of range");
  expect_error(R"({"op": "routing", "num_experts": 64, "topk": 9, "n_group": 8, "topk_group": 1, "scoring": "sigmoid"})", "/topk",
               "exceeds topk_group x experts per group = 1 x 8");
  expect_error(r(R"(, "group_score": "max")"), "/group_score", "applies only to grouped routing");
  expect_error(r(R"(, "bias": "int8")"), "/bias", "unknown bias");
  expect_error(r(R"(, "logits_dtype": "int32")"), "/logits_dtype", "unsupported dtype");
  expect_error(r(R"(, "ids_dtype": "fp32")"), "/ids_dtype", "unsupported dtype");
  expect_error(R"({"op": "routing", "num_experts": 64, "topk": 4, "scoring": "relu"})", "/scoring", "unknown scoring");
  expect_error(R"({"op": "routing", "num_experts": 16, "topk": 1, "scoring": "none", "renormalize": true})", "/renormalize", "no renormalize");
  expect_error(R"({"op": "routing", "num_experts": 16, "topk": 1, "scoring": "none", "routed_scaling_factor": 2})", "/routed_scaling_factor", "no renormalize");
  expect_error(r(R"(, "routed_scaling_factor": 0)"), "/routed_scaling_factor", "must be > 0");
  expect_error(R"({"op": "routing", "num_experts": 2048, "topk": 8, "n_group": 8, "topk_group": 4, "scoring": "sigmoid"})", "/num_experts",
               "grouped routing supports at most 1024 experts");
  expect_error(R"({"op": "routing", "num_experts": 1024, "topk": 8, "n_group": 8, "topk_group": 4, "scoring": "sigmoid", "single_group_kernel": "block"})",
               "/single_group_kernel", "a block-per-token kernel only up to 512 experts, top-32 and 32 groups");
  expect_error(R"({"op": "routing", "num_experts": 2048, "topk": 8, "scoring": "sigmoid", "single_group_kernel": "warp"})", "/single_group_kernel",
               "at most 1024 experts");
}


TEST_CASE("experts specs: defaults, tensors and every bad input", "[spec][experts]") {
  const auto ok = parse_spec(R"({"op": "experts", "hidden": 7168, "intermediate": 2048, "num_experts": 256, "topk": 8, "activation": {"kind": "silu"}})", "t.json");
  const auto& e = dynamic_cast<const ExpertsSpec&>(*ok.ops[0]);
  CHECK(e.layout == ExpertsLayout::standard);
  CHECK(e.dtype == DType::bf16);
  CHECK(e.ids_dtype == DType::i32);
  CHECK(e.max_tokens() == 4096);
  CHECK(e.id_range() == 256);
  CHECK(e.expert_bytes() == 2 * 3 * 7168 * 2048);
  CHECK(e.canonical_json() ==
        R"({"activation":{"interleaved":false,"kind":"silu"},"apply_router_weight_on_input":false,"bias":false,"dtype":"bf16","hidden":7168,)"
        R"("ids_dtype":"int32","intermediate":2048,"layout":"standard","max_tokens":4096,"num_experts":256,"op":"experts","topk":8})");

  const auto full = parse_spec(R"({"op": "experts", "hidden": 64, "intermediate": 128, "num_experts": 4, "topk": 2, "global_experts": 16, "bias": true,
                                   "ids_dtype": "int64", "activation": {"kind": "swiglu_oai", "interleaved": true}})", "t.json");
  const auto t = full.ops[0]->tensors();
  std::vector<std::string> names;
  for (const auto& d : t) names.push_back(d.name + " " + d.shape_text());
  CHECK(names == std::vector<std::string>{"x [T, 64]", "topk_ids [T, 2]", "topk_weights [T, 2]", "w13 [4, 256, 64]", "w2 [4, 64, 128]",
                                          "b13 [4, 256]", "b2 [4, 64]", "expert_map [16]", "y [T, 64]"});
  CHECK(t[1].dtype == DType::i64);
  CHECK(t[7].dtype == DType::i32);
  CHECK(full.ops[0]->canonical_json().find(R"("activation":{"alpha":1.702,"interleaved":true,"kind":"swiglu_oai","limit":7.0})") != std::string::npos);

  const auto masked = parse_spec(R"({"op": "experts", "layout": "masked", "hidden": 64, "intermediate": 64, "num_experts": 3, "max_tokens": 256,
                                     "activation": {"kind": "situ", "beta": 4.0}})", "t.json");
  const auto m = masked.ops[0]->tensors();
  REQUIRE(m.size() == 5);
  CHECK(m[0].shape_text() == "[3, T, 64]");
  CHECK(m[1].name == "expert_num_tokens");
  CHECK(m[4].shape_text() == "[3, T, 64]");
  CHECK(m[4].keeps_unwritten);
  CHECK(masked.ops[0]->canonical_json().find("topk") == std::string::npos);

  auto x = [](const std::string& fields) {
    return R"({"op": "experts", "hidden": 2048, "intermediate": 768, "num_experts": 128, "topk": 8, )" + fields + "}";
  };
  const std::string silu = R"("activation": {"kind": "silu"})";
  expect_error(R"({"op": "experts", "hidden": 7000, "intermediate": 2048, "num_experts": 256, "topk": 8, "activation": {"kind": "silu"}})", "/hidden",
               "hidden 7000 is not a multiple of 64 (the GEMM tiles); found 7000; expected a multiple of 64 in [64, 65536]");
  expect_error(R"({"op": "experts", "hidden": 64, "intermediate": 32, "num_experts": 2, "topk": 1, "activation": {"kind": "silu"}})", "/intermediate",
               "out of range");
  expect_error(R"({"op": "experts", "hidden": 2048, "intermediate": 768, "num_experts": 4, "topk": 8, "activation": {"kind": "silu"}})", "/topk",
               "topk 8 exceeds num_experts 4; found 8; expected an integer in [1, 4]");
  expect_error(R"({"op": "experts", "hidden": 7168, "intermediate": 2048, "num_experts": 256, "topk": 8, "global_experts": 64, "activation": {"kind": "silu"}})",
               "/global_experts", "global_experts 64 is below num_experts 256; found 64; expected an integer in [256, 65536]");
  expect_error(R"({"op": "experts", "hidden": 64, "intermediate": 64, "num_experts": 4, "topk": 8, "global_experts": 6, "activation": {"kind": "silu"}})",
               "/topk", "topk 8 exceeds global_experts 6");
  expect_error(R"({"op": "experts", "layout": "masked", "hidden": 7168, "intermediate": 2048, "num_experts": 256, "topk": 8, "activation": {"kind": "silu"}})",
               "/topk", "'topk' applies only to layout standard");
  expect_error(R"({"op": "experts", "hidden": 64, "intermediate": 64, "num_experts": 4, "activation": {"kind": "silu"}})", "/topk", "missing required field 'topk'");
  expect_error(R"({"op": "experts", "hidden": 7168, "intermediate": 2048, "num_experts": 256, "topk": 8})", "/activation",
               "missing required field 'activation'; expected an object with the activation's fields");
  expect_error(x(R"("activation": "silu")"), "/activation", "expected a JSON object");
  expect_error(x(R"("activation": {"kind": "relu"})"), "/activation/kind", "unknown kind 'relu'");
  expect_error(x(R"("activation": {"kind": "silu", "colour": 1})"), "/activation/colour", "unknown field 'colour'");
  expect_error(x(R"("activation": {"kind": "silu", "beta": 4.0})"), "/activation/beta", "applies only to kind situ");
  expect_error(R"({"model": "m", "ops": [{"op": "experts", "hidden": 3584, "intermediate": 3072, "num_experts": 896, "topk": 16,
                                          "activation": {"kind": "situ", "linear_beta": 25.0}}]})",
               "/ops/0/activation/beta", "situ needs 'beta' (it is never defaulted)");
  expect_error(x(R"("dtype": "fp32", )" + silu), "/dtype", "unsupported dtype for 'dtype'; found \"fp32\"; expected one of bf16, fp16");
  expect_error(x(R"("ids_dtype": "int16", )" + silu), "/ids_dtype", "unsupported dtype");
  expect_error(R"({"op": "experts", "hidden": 2048, "intermediate": 768, "num_experts": 128, "topk": 64, "max_tokens": 1048576, "activation": {"kind": "silu"}})",
               "/max_tokens", "max_tokens x topk = 67108864 rows exceed what the kernels index; found 1048576; expected at most 16777216 rows");
  expect_error(R"({"op": "experts", "layout": "masked", "hidden": 64, "intermediate": 64, "num_experts": 4096, "max_tokens": 4097, "activation": {"kind": "silu"}})",
               "/max_tokens", "max_tokens x num_experts = 16781312 rows exceed");
  expect_error(x(R"("layout": "dense", )" + silu), "/layout", "unknown layout 'dense'");
  expect_error(x(R"("bias": 1, )" + silu), "/bias", "true or false");
}

TEST_CASE("experts specs: forced tiles are read, canonical, and held to what the templates take", "[spec][experts]") {
  const auto with = [](const std::string& tiles, const std::string& extra = "") {
    return R"({"op": "experts", "hidden": 2048, "intermediate": 768, "num_experts": 128, "topk": 8, "activation": {"kind": "silu"}, )" + extra +
           R"("tiles": )" + tiles + "}";
  };
  const auto none = parse_spec(with("{}"), "t.json");
  CHECK_FALSE(dynamic_cast<const ExpertsSpec&>(*none.ops[0]).tiles.any());
  CHECK(none.ops[0]->canonical_json().find("tiles") == std::string::npos);

  const auto spec = parse_spec(with(R"({"groups1": 2, "split1": 4, "groups2": 1, "split2": 12, "ring1": 6, "ring_one": 16, "cols1": 32, "n2": 16, "band2": 3})"), "t.json");
  const auto& t = dynamic_cast<const ExpertsSpec&>(*spec.ops[0]).tiles;
  CHECK(t.groups1 == 2);
  CHECK(t.split1 == 4);
  CHECK(t.groups2 == 1);
  CHECK(t.split2 == 12);
  CHECK(t.ring1 == 6);
  CHECK(t.ring2 == 0);  // the compiler's
  CHECK(t.ring_one == 16);
  CHECK(t.cols1 == 32);
  CHECK(t.n2 == 16);
  CHECK(t.band1 == 0);
  CHECK(t.band2 == 3);
  CHECK(spec.ops[0]->canonical_json().find(R"("tiles":{"band2":3,"cols1":32,"groups1":2,"groups2":1,"n2":16,"ring1":6,"ring_one":16,"split1":4,"split2":12})") !=
        std::string::npos);

  expect_error(with(R"("g4")"), "/tiles", "expected a JSON object");
  expect_error(with(R"({"groups": 2})"), "/tiles/groups", "unknown field 'groups'");
  expect_error(with(R"({"groups1": 2})"), "/tiles/split1", "groups1 and split1 are set together (the warps of a CTA); expected an integer in [1, 16]");
  expect_error(with(R"({"split2": 2})"), "/tiles/groups2", "groups2 and split2 are set together");
  expect_error(with(R"({"groups1": 0, "split1": 1})"), "/tiles/groups1", "out of range; found 0; expected an integer in [1, 16]");
  expect_error(with(R"({"groups1": 5, "split1": 1})"), "/tiles/groups1",
               "groups1 5 does not split intermediate 768 into CTAs of 8 x groups1 h columns; found 5; expected one of 1, 2, 3, 4, 6, 8, 12, 16 "
               "(intermediate / 8 divisible by it)");
  expect_error(with(R"({"groups1": 1, "split1": 3})"), "/tiles/split1",
               "split1 3 does not split hidden 2048's 64 k blocks of 32 evenly; found 3; expected one of 1, 2, 4, 8, 16");
  expect_error(with(R"({"groups1": 4, "split1": 8})"), "/tiles/split1", "groups1 x split1 = 4 x 8 warps exceed a CTA's 16; found 8; expected at most 16 / groups1 = 4");
  expect_error(with(R"({"groups2": 3, "split2": 1})"), "/tiles/groups2", "groups2 3 does not split hidden 2048 into CTAs of 16 x groups2 output columns");
  expect_error(with(R"({"groups2": 1, "split2": 5})"), "/tiles/split2", "split2 5 does not split intermediate 768's 24 k blocks of 32 evenly; found 5; "
                                                                        "expected one of 1, 2, 3, 4, 6, 8, 12");
  expect_error(with(R"({"ring2": 17})"), "/tiles/ring2", "out of range; found 17; expected an integer in [1, 16]");
  expect_error(with(R"({"ring1": 2.5})"), "/tiles/ring1", "must be an integer");
  expect_error(with(R"({"cols1": 120})"), "/tiles/cols1",
               "cols1 120 is not a wgmma N / 2 dividing intermediate 768; found 120; expected one of 8, 16, 32, 64, 96, 128 (2 cols1 a wgmma N, dividing intermediate)");
  expect_error(with(R"({"cols1": 256})"), "/tiles/cols1", "out of range; found 256; expected an integer in [8, 128]");
  expect_error(with(R"({"n2": 96})"), "/tiles/n2", "n2 96 is not a wgmma N dividing hidden 2048; found 96; expected one of 16, 32, 64, 128, 256 (a wgmma N dividing hidden)");
  expect_error(with(R"({"band1": 0})"), "/tiles/band1", "out of range");
  expect_error(R"({"op": "experts", "layout": "masked", "hidden": 64, "intermediate": 64, "num_experts": 4, "activation": {"kind": "silu"}, "tiles": {"ring_one": 4}})",
               "/tiles/ring_one", "applies only to layout standard (the one-token kernels)");
}
