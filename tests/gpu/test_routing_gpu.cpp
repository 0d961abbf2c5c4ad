// Routing on the GPU against the CPU reference: ids exactly (near-ties aside), weights within
// 2e-5, over expert counts, top-k, every scoring mode, logits dtypes, grouped shapes, token
// counts, and rows of ties / NaN / inf / all-invalid. Both single-group kernels, forced on the
// same inputs, must agree bit for bit.
#include <moejit/error.hpp>

#include "spec/ops/routing.hpp"
#include "gpu_common.hpp"

#include <fmt/format.h>

#include <cstring>

using namespace moejit;
using moejit::test::gpu_context;

namespace {

const char* kScorings[] = {"sigmoid", "softmax", "sqrt_softplus", "none"};
const char* kLogits[] = {"fp32", "bf16", "fp16"};
const char* kBias[] = {"fp32", "none", "bf16", "fp16"};

std::string single_group(int e, int k, int i, const char* kernel) {
  const char* scoring = kScorings[i % 4];
  const bool none = std::string(scoring) == "none";
  return fmt::format(R"({{"op": "routing", "num_experts": {}, "topk": {}, "scoring": "{}", "renormalize": {}, "routed_scaling_factor": {},
                         "bias": "{}", "logits_dtype": "{}", "ids_dtype": "{}", "single_group_kernel": "{}"}})",
                     e, k, scoring, none ? "false" : (i % 2 ? "true" : "false"), none ? 1.0 : 2.5, kBias[i % 4], kLogits[i % 3],
                     i % 2 ? "int32" : "int64", kernel);
}

// Runs `a` and `b` (the same op, different kernels) on the same inputs; both must match the
// reference, and each other bit for bit.
void check_pair(const Op& a, const Op& b, int variant, std::int64_t tokens, std::uint64_t seed) {
  auto& ctx = gpu_context();
  const auto& harness = reference::harness_for("routing");
  reference::Rng rng(seed);
  auto want = reference::make_tensors(a.spec(), tokens);
  harness.fill_inputs(a.spec(), want, tokens, rng, variant);
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (a.tensors()[i].role == TensorRole::output) want[i].fill_bytes(tools::kPoison);
  }
  auto got_a = want, got_b = want;
  detail::Stream stream(ctx.driver());
  auto da = tools::upload(ctx.driver(), got_a), db = tools::upload(ctx.driver(), got_b);
  a.launch(da.bindings, tokens, stream.get());
  b.launch(db.bindings, tokens, stream.get());
  stream.synchronize();
  tools::download_outputs(a, da, got_a);
  tools::download_outputs(b, db, got_b);
  harness.run(a.spec(), want, tokens);
  const auto failures = harness.compare(a.spec(), want, got_a, tokens);
  std::string text;
  for (const auto& f : failures) text += "  " + f + "\n";
  INFO("op " << a.spec().canonical_json() << "\nvariant " << variant << " T=" << tokens << "\n" << text);
  CHECK(failures.empty());
  for (std::size_t i = 0; i < got_a.size(); ++i) {
    INFO("tensor " << a.tensors()[i].name << ": block and warp kernels differ");
    CHECK(got_a[i].data == got_b[i].data);
  }
}

// `jsons` holds (block, warp) pairs of one op: each pair goes through check_pair over the input
// variants and token counts.
void check_pairs(const std::vector<std::string>& jsons, std::uint64_t seed) {
  const auto ops = test::warm(jsons);
  for (std::size_t p = 0; p < ops.size(); p += 2) {
    const auto block = gpu_context().load(ops[p]);
    const auto warp = gpu_context().load(ops[p + 1]);
    for (int variant = 0; variant < 3; ++variant) {
      for (std::int64_t t : {0, 1, 7, 33, 300}) check_pair(*block, *warp, variant, t, seed++);
    }
  }
}

}  // namespace

TEST_CASE("single-group routing: both kernels match the reference and each other", "[gpu][routing]") {
  std::vector<std::string> jsons;
  int i = 0;
  for (int e : {8, 16, 64, 128, 160, 256, 288, 384, 512, 513, 896, 1024}) {
    for (int k : {1, 2, 4, 6, 8, 10, 16, 22, 32}) {
      if (k > e) continue;
      for (int s = 0; s < 2; ++s, ++i) {
        jsons.push_back(single_group(e, k, i, "block"));
        jsons.push_back(single_group(e, k, i, "warp"));
      }
    }
  }
  check_pairs(jsons, 100);
}

TEST_CASE("routing beyond one warp's registers: 1025 to 65535 experts, top-64", "[gpu][routing]") {
  const auto ops = test::warm({single_group(1025, 64, 1, "auto"), single_group(4096, 16, 2, "auto"), single_group(65535, 64, 5, "auto"),
                               single_group(1024, 64, 3, "auto")});
  std::uint64_t seed = 7;
  for (const auto& spec : ops) {
    const auto op = gpu_context().load(spec);
    for (int variant = 0; variant < 3; ++variant) {
      for (std::int64_t t : {1, 5, 40}) test::check(*op, {variant, t, seed++});
    }
  }
}

TEST_CASE("grouped routing matches the reference", "[gpu][routing]") {
  std::vector<std::string> jsons;
  int i = 0;
  for (const char* g : {R"("num_experts": 256, "topk": 8, "n_group": 8, "topk_group": 4)", R"("num_experts": 160, "topk": 8, "n_group": 8, "topk_group": 3)",
                        R"("num_experts": 64, "topk": 4, "n_group": 8, "topk_group": 4)", R"("num_experts": 128, "topk": 8, "n_group": 4, "topk_group": 2)",
                        R"("num_experts": 256, "topk": 16, "n_group": 16, "topk_group": 8)", R"("num_experts": 160, "topk": 6, "n_group": 8, "topk_group": 3)",
                        R"("num_experts": 1024, "topk": 64, "n_group": 64, "topk_group": 40)"}) {
    for (const char* gs : {"top2_sum", "max"}) {
      for (int s = 0; s < 2; ++s, ++i) {
        const char* scoring = kScorings[i % 3];
        jsons.push_back(fmt::format(R"({{"op": "routing", {}, "group_score": "{}", "scoring": "{}", "renormalize": {}, "routed_scaling_factor": 2.5,
                                       "bias": "{}", "logits_dtype": "{}"}})",
                                    g, gs, scoring, i % 2 ? "true" : "false", kBias[i % 4], kLogits[i % 3]));
      }
    }
  }
  const auto ops = test::warm(jsons);
  std::uint64_t seed = 5000;
  for (const auto& spec : ops) {
    const auto op = gpu_context().load(spec);
    for (int variant = 0; variant < 3; ++variant) {
      for (std::int64_t t : {0, 1, 7, 33, 1024}) test::check(*op, {variant, t, seed++});
    }
  }
}

TEST_CASE("grouped routing: block and warp kernels match the reference and each other", "[gpu][routing]") {
  // The grouped shapes with a block kernel (<= 512 experts, top-32, 32 groups), group sizes 1
  // to 128, both group scores, every scoring mode.
  std::vector<std::string> jsons;
  int i = 0;
  for (const char* g : {R"("num_experts": 256, "topk": 8, "n_group": 8, "topk_group": 4)", R"("num_experts": 160, "topk": 8, "n_group": 8, "topk_group": 3)",
                        R"("num_experts": 64, "topk": 4, "n_group": 8, "topk_group": 4)", R"("num_experts": 128, "topk": 8, "n_group": 4, "topk_group": 2)",
                        R"("num_experts": 256, "topk": 16, "n_group": 16, "topk_group": 8)", R"("num_experts": 32, "topk": 4, "n_group": 32, "topk_group": 8)",
                        R"("num_experts": 512, "topk": 32, "n_group": 32, "topk_group": 20)", R"("num_experts": 384, "topk": 6, "n_group": 3, "topk_group": 1)"}) {
    for (const char* gs : {"top2_sum", "max"}) {
      ++i;
      const bool none = std::string(kScorings[i % 4]) == "none";
      for (const char* kernel : {"block", "warp"}) {
        jsons.push_back(fmt::format(R"({{"op": "routing", {}, "group_score": "{}", "scoring": "{}", "renormalize": {}, "routed_scaling_factor": {},
                                       "bias": "{}", "logits_dtype": "{}", "single_group_kernel": "{}"}})",
                                    g, gs, kScorings[i % 4], !none && i % 2 ? "true" : "false", none ? 1.0 : 2.5, kBias[i % 4], kLogits[i % 3],
                                    kernel));
      }
    }
  }
  check_pairs(jsons, 7000);
}

TEST_CASE("every model's router matches the reference up to 16384 tokens", "[gpu][routing]") {
  std::vector<std::string> jsons = {
      R"({"op": "routing", "num_experts": 256, "topk": 8, "n_group": 8, "topk_group": 4, "scoring": "sigmoid", "bias": "fp32", "renormalize": true, "routed_scaling_factor": 2.5})",
      R"({"op": "routing", "num_experts": 384, "topk": 8, "scoring": "sigmoid", "bias": "fp32", "renormalize": true, "routed_scaling_factor": 2.827})",
      R"({"op": "routing", "num_experts": 896, "topk": 16, "scoring": "sigmoid", "bias": "fp32", "renormalize": true})",
      R"({"op": "routing", "num_experts": 128, "topk": 8, "scoring": "softmax", "renormalize": true})",
      R"({"op": "routing", "num_experts": 160, "topk": 8, "scoring": "sigmoid", "bias": "fp32", "renormalize": true, "routed_scaling_factor": 2.5})",
      R"({"op": "routing", "num_experts": 8, "topk": 2, "scoring": "softmax", "renormalize": true})",
      R"({"op": "routing", "num_experts": 16, "topk": 1, "scoring": "none"})",
      R"({"op": "routing", "num_experts": 512, "topk": 10, "scoring": "softmax", "renormalize": true})"};
  const auto ops = test::warm(jsons);
  std::uint64_t seed = 900;
  for (const auto& spec : ops) {
    const auto op = gpu_context().load(spec);
    for (std::int64_t t : {0, 1, 16, 128, 1024, 16384}) test::check(*op, {0, t, seed++});
    for (std::int64_t t : {33, 4096}) test::check(*op, {2, t, seed++});
  }
}

TEST_CASE("the warp kernel reads logits and bias through pointers not aligned for its vector loads", "[gpu][routing]") {
  // Callers may pass views into larger tensors: inputs one element past a 16-byte boundary
  // take the warp kernel compiled for element-by-element loads (the launcher checks the
  // pointers) and give the same bits as aligned inputs.
  const auto ops = test::warm({
      R"({"op": "routing", "num_experts": 256, "topk": 8, "scoring": "sigmoid", "bias": "fp32", "renormalize": true, "single_group_kernel": "warp"})",
      R"({"op": "routing", "num_experts": 384, "topk": 8, "scoring": "sigmoid", "bias": "bf16", "logits_dtype": "bf16", "renormalize": true, "single_group_kernel": "warp"})",
      R"({"op": "routing", "num_experts": 256, "topk": 8, "n_group": 8, "topk_group": 4, "scoring": "sigmoid", "bias": "fp32", "logits_dtype": "fp16", "renormalize": true, "single_group_kernel": "warp"})",
      R"({"op": "routing", "num_experts": 896, "topk": 16, "scoring": "softmax", "renormalize": true, "single_group_kernel": "warp"})"});
  auto& ctx = gpu_context();
  const auto& harness = reference::harness_for("routing");
  std::uint64_t seed = 31000;
  for (const auto& spec : ops) {
    const auto op = ctx.load(spec);
    for (std::int64_t tokens : {1, 33, 1000}) {
      reference::Rng rng(seed++);
      auto want = reference::make_tensors(op->spec(), tokens);
      harness.fill_inputs(op->spec(), want, tokens, rng, 1);
      for (std::size_t i = 0; i < want.size(); ++i) {
        if (op->tensors()[i].role == TensorRole::output) want[i].fill_bytes(tools::kPoison);
      }
      auto aligned = want, shifted = want;
      detail::Stream stream(ctx.driver());
      auto da = tools::upload(ctx.driver(), aligned);
      auto ds = tools::upload(ctx.driver(), shifted);
      std::vector<detail::DeviceBuffer> padded;
      for (std::size_t i = 0; i < want.size(); ++i) {
        if (op->tensors()[i].role == TensorRole::output) continue;
        const std::size_t offset = size_of(want[i].dtype);  // one element: never 16-byte aligned
        std::vector<std::byte> bytes(offset + want[i].bytes());
        std::memcpy(bytes.data() + offset, want[i].data.data(), want[i].bytes());
        padded.emplace_back(ctx.driver(), bytes.size());
        padded.back().upload(bytes.data(), bytes.size());
        ds.bindings[i].ptr = static_cast<std::byte*>(padded.back().ptr()) + offset;
      }
      op->launch(da.bindings, tokens, stream.get());
      op->launch(ds.bindings, tokens, stream.get());
      stream.synchronize();
      tools::download_outputs(*op, da, aligned);
      tools::download_outputs(*op, ds, shifted);
      harness.run(op->spec(), want, tokens);
      const auto failures = harness.compare(op->spec(), want, shifted, tokens);
      std::string text;
      for (const auto& f : failures) text += "  " + f + "\n";
      INFO("op " << op->spec().canonical_json() << " T=" << tokens << "\n" << text);
      CHECK(failures.empty());
      for (std::size_t i = 0; i < want.size(); ++i) CHECK(aligned[i].data == shifted[i].data);
    }
  }
}

namespace {

// silu writes the logits a router reads, then overwrites them for a second routing: four launches
// queued on one stream, one host sync at the end. Returns the two routings' outputs.
std::vector<std::vector<std::byte>> silu_then_route(Context& ctx, const std::shared_ptr<const OpSpec>& act_spec,
                                                     const std::shared_ptr<const OpSpec>& route_spec,
                                                     const reference::HostTensor& x1, const reference::HostTensor& x2,
                                                     const reference::HostTensor& bias, std::int64_t tokens) {
  const auto act = ctx.load(act_spec);
  const auto route = ctx.load(route_spec);
  const auto& d = ctx.driver();
  const std::size_t logits = static_cast<std::size_t>(tokens) * 256 * 4, outs = static_cast<std::size_t>(tokens) * 8 * 4;
  detail::DeviceBuffer dx1(d, x1.bytes()), dx2(d, x2.bytes()), dl(d, logits), db(d, bias.bytes());
  std::vector<detail::DeviceBuffer> out;
  for (int i = 0; i < 4; ++i) out.emplace_back(d, outs);
  dx1.upload(x1.data.data(), x1.bytes());
  dx2.upload(x2.data.data(), x2.bytes());
  db.upload(bias.data.data(), bias.bytes());
  detail::Stream stream(d);
  const std::vector<Buffer> a1{{dx1.ptr(), x1.bytes()}, {dl.ptr(), logits}}, a2{{dx2.ptr(), x2.bytes()}, {dl.ptr(), logits}};
  const std::vector<Buffer> r1{{dl.ptr(), logits}, {db.ptr(), bias.bytes()}, {out[0].ptr(), outs}, {out[1].ptr(), outs}};
  const std::vector<Buffer> r2{{dl.ptr(), logits}, {db.ptr(), bias.bytes()}, {out[2].ptr(), outs}, {out[3].ptr(), outs}};
  act->launch(a1, tokens, stream.get());
  route->launch(r1, tokens, stream.get());
  act->launch(a2, tokens, stream.get());  // overwrites the logits the first routing reads
  route->launch(r2, tokens, stream.get());
  stream.synchronize();
  std::vector<std::vector<std::byte>> result;
  for (auto& b : out) {
    result.emplace_back(outs);
    b.download(result.back().data(), outs);
  }
  return result;
}

}  // namespace

TEST_CASE("programmatic dependent launch: each kernel waits on the GPU for the one before it", "[gpu][routing][activation]") {
  // With Options::programmatic_launch a kernel may be scheduled while the previous one runs;
  // reading the logits too early, or overwriting them before the router read them, would change
  // the ids and weights. The chain must give the bits of the same chain launched plainly.
  const auto specs = test::warm({R"({"op": "activation", "kind": "silu", "d": 256, "dtype": "fp32"})",
                                 R"({"op": "routing", "num_experts": 256, "topk": 8, "n_group": 8, "topk_group": 4, "scoring": "sigmoid", "bias": "fp32", "renormalize": true, "routed_scaling_factor": 2.5})"});
  Options options = Options::from_environment();
  options.programmatic_launch = true;
  Context pdl(options, 0);
  std::uint64_t seed = 52000;
  for (std::int64_t tokens : {1, 100, 4096}) {
    reference::Rng rng(seed++);
    auto act1 = reference::make_tensors(*specs[0], tokens), act2 = act1;
    reference::harness_for("activation").fill_inputs(*specs[0], act1, tokens, rng, 0);
    reference::harness_for("activation").fill_inputs(*specs[0], act2, tokens, rng, 0);
    auto route = reference::make_tensors(*specs[1], tokens);
    reference::harness_for("routing").fill_inputs(*specs[1], route, tokens, rng, 0);
    const auto want = silu_then_route(gpu_context(), specs[0], specs[1], act1[0], act2[0], route[1], tokens);
    const auto got = silu_then_route(pdl, specs[0], specs[1], act1[0], act2[0], route[1], tokens);
    INFO("T=" << tokens);
    CHECK((want[0] != want[2] || want[1] != want[3]));  // the two routings saw different logits
    for (std::size_t i = 0; i < want.size(); ++i) CHECK(got[i] == want[i]);
  }
}
