// MoELayer's composition, before any GPU work: the layer's tensors (the router's inputs, the
// experts' but the ids and weights routing writes, the tail's but the routed latent), where each
// op's tensor comes from at launch, and a usage error for ops that do not fit together.
#include <moejit/error.hpp>
#include <moejit/spec.hpp>

#include "runtime/moe_layer.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace moejit;

namespace {

std::shared_ptr<const OpSpec> op(const std::string& json) { return parse_spec(json, "layer.json").ops[0]; }

const char* kRouter = R"({"op": "routing", "num_experts": 256, "topk": 8, "n_group": 8, "topk_group": 4, "scoring": "sigmoid", "bias": "fp32", "renormalize": true})";
const char* kExperts = R"({"op": "experts", "hidden": 7168, "intermediate": 2048, "num_experts": 256, "topk": 8, "max_tokens": 512, "activation": {"kind": "silu"}})";

std::vector<std::string> names(const detail::LayerSpec& s) {
  std::vector<std::string> out;
  for (const auto& d : s.decls) out.push_back(d.name);
  return out;
}

std::string usage_error(const std::shared_ptr<const OpSpec>& r, const std::shared_ptr<const OpSpec>& e,
                        const std::shared_ptr<const OpSpec>& t = nullptr) {
  try {
    (void)detail::layer_spec(r, e, t);
  } catch (const Error& err) {
    CHECK(err.kind() == ErrorKind::usage);
    return err.what();
  }
  FAIL("no error");
  return {};
}

}  // namespace

TEST_CASE("a layer's tensors: the router's inputs, the experts' weights, one output", "[layer]") {
  const auto s = detail::layer_spec(op(kRouter), op(kExperts), nullptr);
  CHECK(names(*s) == std::vector<std::string>{"logits", "bias", "x", "w13", "w2", "out"});
  CHECK(s->max_tokens() == 512);
  CHECK(s->decls.back().role == TensorRole::output);
  // routing writes the workspace's weights and ids; the experts read them.
  const auto& r = s->sources[0];
  REQUIRE(r.size() == 4);
  CHECK((r[2].layer == -1 && r[2].workspace == detail::Workspace::weights));
  CHECK((r[3].layer == -1 && r[3].workspace == detail::Workspace::ids));
  const auto& e = s->sources[1];
  REQUIRE(e.size() == 6);
  CHECK(e[0].layer == 2);
  CHECK(e[1].workspace == detail::Workspace::ids);
  CHECK(e[2].workspace == detail::Workspace::weights);
  CHECK(e[5].layer == 5);
  CHECK(s->canonical_json().find(R"("op":"moe_layer")") != std::string::npos);
}

TEST_CASE("a latent layer: the experts' output goes to the tail through the workspace", "[layer]") {
  const auto router = op(R"({"op": "routing", "num_experts": 896, "topk": 16, "scoring": "sigmoid", "bias": "fp32", "renormalize": true})");
  const auto experts = op(R"({"op": "experts", "hidden": 3584, "intermediate": 384, "num_experts": 896, "topk": 16, "activation": {"kind": "situ", "beta": 4.0, "linear_beta": 25.0}})");
  const auto tail = op(R"({"op": "latent_tail", "tp_size": 1, "hidden": 7168, "latent": 3584, "max_tokens": 64})");
  const auto s = detail::layer_spec(router, experts, tail);
  CHECK(names(*s) == std::vector<std::string>{"logits", "bias", "x", "w13", "w2", "shared", "gamma", "w_up", "out"});
  CHECK(s->max_tokens() == 64);
  CHECK(s->sources[1].back().workspace == detail::Workspace::routed);  // the experts' y
  CHECK(s->sources[2].front().workspace == detail::Workspace::routed);  // the tail's routed
  CHECK(s->decls.back().shape.back().value == 7168);
}

TEST_CASE("ops that do not fit together are a usage error naming the op and the field", "[layer]") {
  const auto router = op(kRouter);
  CHECK_THAT(usage_error(router, op(R"({"op": "experts", "hidden": 7168, "intermediate": 2048, "num_experts": 256, "topk": 6, "activation": {"kind": "silu"}})")),
             Catch::Contains("top-k differs") && Catch::Contains("found 6"));
  CHECK_THAT(usage_error(router, op(R"({"op": "experts", "hidden": 7168, "intermediate": 2048, "num_experts": 128, "topk": 8, "activation": {"kind": "silu"}})")),
             Catch::Contains("ids range differs"));
  CHECK_THAT(usage_error(router, op(R"({"op": "experts", "hidden": 7168, "intermediate": 2048, "num_experts": 256, "topk": 8, "ids_dtype": "int64", "activation": {"kind": "silu"}})")),
             Catch::Contains("ids dtype differs"));
  CHECK_THAT(usage_error(router, op(R"({"op": "experts", "layout": "masked", "hidden": 7168, "intermediate": 2048, "num_experts": 256, "activation": {"kind": "silu"}})")),
             Catch::Contains("layout masked"));
  CHECK_THAT(usage_error(op(kExperts), op(kExperts)), Catch::Contains("cannot be its router"));
  CHECK_THAT(usage_error(router, op(kExperts), op(R"({"op": "latent_tail", "tp_size": 1, "hidden": 7168, "latent": 3584})")),
             Catch::Contains("latent width"));
  // An expert map widens the ids to the router's experts.
  CHECK_NOTHROW(detail::layer_spec(router, op(R"({"op": "experts", "hidden": 7168, "intermediate": 2048, "num_experts": 32, "global_experts": 256, "topk": 8, "activation": {"kind": "silu"}})"), nullptr));
}
