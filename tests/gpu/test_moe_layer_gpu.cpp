// MoELayer on the GPU: the layer's output equals the ops run one by one, bit for bit, eagerly
// and in CUDA graph replays; with and without a latent tail.
#include <moejit/error.hpp>
#include <moejit/moe_layer.hpp>

#include "gpu_common.hpp"
#include "runtime/device.hpp"
#include "spec/ops/experts.hpp"
#include "spec/ops/routing.hpp"

#include <cstring>

using namespace moejit;
using moejit::test::gpu_context;

namespace {

// Inputs of `op` at `tokens` from its harness (variant 0).
std::vector<reference::HostTensor> inputs_of(const OpSpec& op, std::int64_t tokens, std::uint64_t seed) {
  reference::Rng rng(seed);
  auto t = reference::make_tensors(op, tokens);
  reference::harness_for(op.family()).fill_inputs(op, t, tokens, rng, 0);
  return t;
}

const reference::HostTensor& named(const Op& op, const std::vector<reference::HostTensor>& t, std::string_view name) {
  for (std::size_t i = 0; i < op.tensors().size(); ++i) {
    if (op.tensors()[i].name == name) return t[i];
  }
  FAIL("no tensor " << name);
  return t.front();
}

void check_layer(const std::vector<std::string>& jsons, std::int64_t tokens) {
  auto& ctx = gpu_context();
  const auto ops = test::warm(jsons);
  const MoELayer layer(ctx, ops[0], ops[1], ops.size() > 2 ? ops[2] : nullptr);
  const auto router = ctx.load(ops[0]);
  const auto experts = ctx.load(ops[1]);
  const auto tail = ops.size() > 2 ? ctx.load(ops[2]) : nullptr;
  // Every input the layer takes, from the op that declares it.
  const auto r_in = inputs_of(*ops[0], tokens, 1), e_in = inputs_of(*ops[1], tokens, 2);
  const auto t_in = tail ? inputs_of(*ops[2], tokens, 3) : std::vector<reference::HostTensor>{};
  std::vector<reference::HostTensor> layer_in;
  for (const auto& d : layer.tensors()) {
    if (d.role == TensorRole::output) {
      layer_in.push_back(reference::HostTensor::like(d, tokens));
      layer_in.back().fill_bytes(tools::kPoison);
    } else if (d.name == "logits" || d.name == "bias") {
      layer_in.push_back(named(*router, r_in, d.name));
    } else if (tail && (d.name == "shared" || d.name == "gamma" || d.name == "w_up")) {
      layer_in.push_back(named(*tail, t_in, d.name));
    } else {
      layer_in.push_back(named(*experts, e_in, d.name));
    }
  }
  const auto dev = tools::upload(ctx.driver(), layer_in);
  detail::Stream stream(ctx.driver());
  const std::size_t out = layer_in.size() - 1;
  layer.launch(dev.bindings, tokens, stream.get());
  stream.synchronize();
  std::vector<std::byte> got(layer_in[out].bytes());
  dev.buffers[out].download(got.data(), got.size());

  // The ops one by one, on the same inputs.
  auto bind = [&](const Op& op, const std::vector<std::pair<std::string, Buffer>>& extra) {
    std::vector<Buffer> b;
    for (const auto& d : op.tensors()) {
      Buffer found{};
      for (const auto& [name, buf] : extra) if (name == d.name) found = buf;
      for (std::size_t i = 0; !found.ptr && i < layer.tensors().size(); ++i) {
        if (layer.tensors()[i].name == d.name && layer.tensors()[i].role == TensorRole::input) found = dev.bindings[i];
      }
      b.push_back(found);
    }
    return b;
  };
  const auto* rs = dynamic_cast<const RoutingSpec*>(ops[0].get());
  detail::DeviceBuffer ids(ctx.driver(), static_cast<std::size_t>(tokens * rs->topk) * size_of(rs->ids_dtype)),
      weights(ctx.driver(), static_cast<std::size_t>(tokens * rs->topk) * 4);
  const auto* es = dynamic_cast<const ExpertsSpec*>(ops[1].get());
  detail::DeviceBuffer y(ctx.driver(), static_cast<std::size_t>(tokens * es->hidden) * 2), final_out(ctx.driver(), got.size());
  router->launch(bind(*router, {{"ids", {ids.ptr(), ids.bytes()}}, {"weights", {weights.ptr(), weights.bytes()}}}), tokens, stream.get());
  experts->launch(bind(*experts, {{"topk_ids", {ids.ptr(), ids.bytes()}}, {"topk_weights", {weights.ptr(), weights.bytes()}},
                                  {"y", tail ? Buffer{y.ptr(), y.bytes()} : Buffer{final_out.ptr(), final_out.bytes()}}}),
                  tokens, stream.get());
  if (tail) tail->launch(bind(*tail, {{"routed", {y.ptr(), y.bytes()}}, {"out", {final_out.ptr(), final_out.bytes()}}}), tokens, stream.get());
  stream.synchronize();
  std::vector<std::byte> want(got.size());
  final_out.download(want.data(), want.size());
  INFO(layer.spec().canonical_json() << " T=" << tokens);
  CHECK(got == want);

  // And in a graph: three replays, each from a poisoned output.
  const detail::Graph graph(ctx.driver(), stream, [&] { layer.launch(dev.bindings, tokens, stream.get()); });
  for (int replay = 0; replay < 3; ++replay) {
    MOEJIT_CU(ctx.driver(), cuMemsetD8Async(dev.buffers[out].address(), 0x5A, got.size(), stream.get()));
    graph.launch(stream);
    stream.synchronize();
    dev.buffers[out].download(got.data(), got.size());
    CHECK(got == want);
  }
}

}  // namespace

TEST_CASE("a layer equals its ops run one by one, bit for bit", "[gpu][layer]") {
  for (const std::int64_t tokens : {std::int64_t{1}, std::int64_t{37}, std::int64_t{300}}) {
    check_layer({R"({"op": "routing", "num_experts": 128, "topk": 8, "scoring": "softmax", "renormalize": true})",
                 R"({"op": "experts", "hidden": 2048, "intermediate": 768, "num_experts": 128, "topk": 8, "activation": {"kind": "silu"}})"},
                tokens);
    check_layer({R"({"op": "routing", "num_experts": 64, "topk": 4, "scoring": "sigmoid", "bias": "fp32", "renormalize": true})",
                 R"({"op": "experts", "hidden": 512, "intermediate": 256, "num_experts": 64, "topk": 4, "activation": {"kind": "situ", "beta": 4.0, "linear_beta": 25.0}})",
                 R"({"op": "latent_tail", "tp_size": 1, "hidden": 1024, "latent": 512, "max_tokens": 300})"},
                tokens);
  }
}
