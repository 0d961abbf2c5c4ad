// The CLI's option values (tools/cli.cpp): integer and list validators with CLI11's messages,
// token limits, op selection, arch names and byte counts. (Sizes are in test_cache.cpp, beside
// `cache prune`.)
#include <moejit/error.hpp>
#include <moejit/spec.hpp>

#include "tools/cli.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace moejit;
using namespace moejit::tools;

namespace {

// What a validator says of `text`: empty when it accepts it.
std::string problem(const CLI::Validator& v, std::string text) { return v(text); }

const Spec& spec() {
  static const Spec kSpec = parse_spec(R"({"model": "m", "ops": [
    {"name": "router", "op": "routing", "num_experts": 64, "topk": 4, "scoring": "softmax"},
    {"name": "act", "op": "activation", "kind": "silu", "d": 128},
    {"name": "tail", "op": "latent_tail", "tp_size": 1, "hidden": 256, "latent": 128, "max_tokens": 32}]})", "m.json");
  return kSpec;
}

}  // namespace

TEST_CASE("integer options take decimal integers in range and nothing else", "[cli]") {
  const auto v = integer_in(-2, 1000);
  for (const char* ok : {"0", "-2", "1000", "17"}) CHECK(problem(v, ok).empty());
  CHECK(problem(v, "1001") == "Value 1001 not in range -2 to 1000");
  CHECK(problem(v, "99999999999999999999") == "Value 99999999999999999999 not in range -2 to 1000");
  for (const char* bad : {"", " 1", "1 ", "+1", "0x10", "1e3", "1.0", "--1", "one"}) {
    INFO(bad);
    CHECK(problem(v, bad).find("is not a decimal integer") != std::string::npos);
  }
  CHECK(problem(unsigned_integer(), "18446744073709551615").empty());
  CHECK_FALSE(problem(unsigned_integer(), "18446744073709551616").empty());
  CHECK_FALSE(problem(unsigned_integer(), "-1").empty());
}

TEST_CASE("integer lists are comma-separated, none empty, each in range", "[cli]") {
  const auto v = integer_list_in(0, 100);
  CHECK(problem(v, "1,16,100").empty());
  CHECK(problem(v, "7").empty());
  CHECK(problem(v, "1,101") == "Value 101 not in range 0 to 100 (in '1,101')");
  CHECK(problem(v, "1,,2").find("is not a decimal integer") != std::string::npos);
  CHECK_FALSE(problem(v, "1,").empty());
  CHECK(integer_list({"1,16", "1024"}) == std::vector<std::int64_t>{1, 16, 1024});
  CHECK_THROWS_AS(integer_list({"x"}), Error);  // a value the validator never saw
}

TEST_CASE("token counts are checked against every chosen op's max_tokens", "[cli]") {
  CHECK(token_list(spec().ops, {"1,32"}) == std::vector<std::int64_t>{1, 32});
  try {
    (void)token_list(spec().ops, {"1,33"});
    FAIL("accepted 33 tokens for an op of max_tokens 32");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::usage);
    CHECK(e.fields().pointer == "--tokens");
    CHECK(e.fields().found == "33");
    CHECK(e.fields().expected == "0 to 32");
  }
  CHECK_NOTHROW(check_token_limit(*spec().ops[0], kMaxTokens, "--tokens"));  // no limit of its own
}

TEST_CASE("--op selects by name or index, in the order given; empty selects all", "[cli]") {
  CHECK(select_ops(spec(), "").size() == 3);
  const auto chosen = select_ops(spec(), "tail,0");
  REQUIRE(chosen.size() == 2);
  CHECK(chosen[0]->name == "tail");
  CHECK(chosen[1]->name == "router");
  CHECK_THROWS_AS(select_ops(spec(), "nope"), Error);
  CHECK_THROWS_AS(select_ops(spec(), "act,"), Error);
}

TEST_CASE("archs are those moejit compiles for", "[cli]") {
  for (const auto arch : supported_archs()) CHECK(problem(supported_arch(), std::string(arch)).empty());
  const auto said = problem(supported_arch(), "sm_80");
  CHECK(said.find("unsupported arch") != std::string::npos);
  CHECK(said.find("sm_90a") != std::string::npos);
}

TEST_CASE("byte counts print in decimal units", "[cli]") {
  CHECK(human_bytes(0) == "0 B");
  CHECK(human_bytes(999) == "999 B");
  CHECK(human_bytes(1000) == "1.0 KB");
  CHECK(human_bytes(12.3e6) == "12.3 MB");
  CHECK(human_bytes(2e15) == "2000.0 TB");
}
