// The latent tail on the CPU: spec validation, every kernel compiled for tp 1/2/4/8 on sm_90a
// and sm_100a, the tp-dependent sizes (peer slots, stripes, the up projection's tiling), and the
// reference's reduce-before-norm order.
#include <moejit/error.hpp>
#include <moejit/spec.hpp>

#include "cache/warmup.hpp"
#include "compiler/ops/latent_tail.hpp"
#include "spec/ops/latent_tail.hpp"
#include "reference/latent_tail.hpp"
#include "reference/numeric.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <thread>

using namespace moejit;

namespace {

std::shared_ptr<const OpSpec> tail(const std::string& fields) {
  return parse_spec(R"({"op": "latent_tail", )" + fields + "}", "t.json").ops[0];
}
const LatentTailSpec& as(const std::shared_ptr<const OpSpec>& s) { return dynamic_cast<const LatentTailSpec&>(*s); }

void expect_error(const std::string& fields, const std::string& pointer, const std::string& words) {
  try {
    tail(fields);
    FAIL("no error for " << fields);
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(e.kind() == ErrorKind::spec);
    CHECK(e.fields().pointer == pointer);
    CHECK(std::string(e.what()).find(words) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("latent tail specs and their bad inputs", "[latent_tail][spec]") {
  const auto k3 = tail(R"("tp_size": 2, "hidden": 7168, "latent": 3584)");
  CHECK(as(k3).eps == 1e-5f);
  CHECK(as(k3).max_tokens() == 64);
  CHECK(as(k3).fused_possible());
  expect_error(R"("tp_size": 3, "hidden": 7168, "latent": 3584, "path": "fused")", "/path", "tp 2, 4 or 8");
  expect_error(R"("tp_size": 2, "hidden": 7000, "latent": 3584)", "/hidden", "not a multiple of 64");
  expect_error(R"("tp_size": 2, "hidden": 7168, "latent": 3500)", "/latent", "not a multiple of 64");
  expect_error(R"("tp_size": 8, "hidden": 448, "latent": 3584, "path": "fused")", "/hidden", "does not split into 64-row tiles over 8 ranks");
  expect_error(R"("tp_size": 1, "hidden": 7168, "latent": 3584, "base_variant": "striped")", "/base_variant", "needs tp_size > 1");
  expect_error(R"("tp_size": 16, "hidden": 7168, "latent": 3584)", "/tp_size", "[1, 8]");
  expect_error(R"("tp_size": 2, "hidden": 7168, "latent": 3584, "eps": 0)", "/eps", "must be > 0");
  expect_error(R"("tp_size": 2, "hidden": 7168, "latent": 3584, "eps": 1e-50)", "/eps", "outside the range");
  // The norm kernel keeps a token's row in 48 KB of static shared memory.
  expect_error(R"("tp_size": 1, "hidden": 64, "latent": 24512)", "/latent", "[64, 24448]");
  CHECK(as(tail(R"("tp_size": 1, "hidden": 64, "latent": 24448)")).latent == 24448);
  expect_error(R"("tp_size": 2, "hidden": 7168, "latent": 3584, "dtype": "fp16")", "/dtype", "unknown dtype");
  expect_error(R"("tp_size": 2, "hidden": 7168, "latent": 3584, "max_tokens": 0)", "/max_tokens", "out of range");
}

TEST_CASE("tp-dependent sizes are parameterized on tp: 2, 4 and 8", "[latent_tail]") {
  for (int tp : {1, 2, 4, 8}) {
    const auto s = tail(fmt::format(R"("tp_size": {}, "hidden": 7168, "latent": 3584, "max_tokens": 16)", tp));
    const auto& op = as(s);
    INFO("tp " << tp);
    // K splits so that a rank's stripe keeps ~896 warps streaming (at most 8 splits), in CTAs of 8 warps.
    const auto tiling = detail::latent_tail_tiling(op);
    CHECK(tiling.split == (tp == 1 ? 2 : tp == 2 ? 4 : 8));
    CHECK(tiling.groups * tiling.split == 8);
    CHECK(contracts(op, "sm_90a").front().get("split") == std::to_string(tiling.split));
    // Stripes tile H exactly, in rank order, in 64-row tiles.
    int next = 0;
    for (int r = 0; r < tp; ++r) {
      const auto st = reference::stripe_of(op, r);
      CHECK(st.first == next);
      CHECK(st.count % 64 == 0);
      next += st.count;
    }
    CHECK(next == 7168);
    // Peer slots: 3 phases x (tp routed partials + tp shards of the shared partial + out).
    const std::int64_t expect = tp == 1 ? 0 : 3 * (16LL * 3584 * tp + 16LL * (7168 / tp) * tp + 16LL * 7168);
    CHECK(op.peer_elements() == expect);
    CHECK(op.fused_possible() == (tp > 1));
    // Every rank's tensors are the same shape whatever tp is.
    CHECK(op.tensors()[0].shape_text() == "[T, 3584]");
    CHECK(op.tensors()[1].shape_text() == "[T, 7168]");
  }
  CHECK(as(tail(R"("tp_size": 2, "hidden": 7168, "latent": 3584, "max_tokens": 1000)")).slot_tokens() == 64);
  // Splits divide L's 32-wide blocks: 640 / 32 = 20 takes 4, not 8.
  const auto small = detail::latent_tail_tiling(as(tail(R"("tp_size": 1, "hidden": 1024, "latent": 640)")));
  CHECK(small.split == 4);
  CHECK(small.groups == 2);
}

TEST_CASE("every tail kernel compiles for tp 1, 2, 4, 8 on sm_90a and sm_100a without spills, the tensor-core up projection's wgmmas pipelined", "[latent_tail][nvrtc]") {
  auto options = Options::from_environment();
  options.disk_cache = false;
  detail::Compiler compiler(options.cuda_home);
  detail::Cache cache(options, compiler);
  std::vector<detail::WarmupJob> jobs;
  for (int tp : {1, 2, 4, 8}) {
    for (bool shared : {true, false}) {
      const auto s = tail(fmt::format(R"("tp_size": {}, "hidden": 7168, "latent": 3584, "shared_expert": {})", tp, shared));
      for (const char* arch : {"sm_90a", "sm_100a"}) jobs.push_back({"tail", contracts(*s, arch).front()});
    }
  }
  jobs.push_back({"small", contracts(*tail(R"("tp_size": 4, "hidden": 1024, "latent": 640, "max_tokens": 8)"), "sm_90a").front()});
  // tp 1 on sm_90a: 5 k blocks a warpgroup of the tensor-core up projection.
  jobs.push_back({"small tp 1", contracts(*tail(R"("tp_size": 1, "hidden": 1024, "latent": 640, "max_tokens": 128)"), "sm_90a").front()});
  // The widest latent the spec allows: the norm row fills the 48 KB of static shared memory.
  jobs.push_back({"wide", contracts(*tail(R"("tp_size": 2, "hidden": 128, "latent": 24448)"), "sm_90a").front()});
  for (const auto& o : detail::warmup(cache, jobs, std::max(2u, std::thread::hardware_concurrency()))) {
    INFO(o.contract->text() << o.error);
    REQUIRE(o.error.empty());
    // norm, 4 up projections[, 3 on the tensor cores (tp 1, sm_90a)][, the fused path's 3 (tp > 1)]
    CHECK(o.entry->manifest.kernels.size() == (o.contract->get("tp_size") == "1" ? (o.contract->arch() == "sm_90a" ? 8u : 5u) : 8u));
    for (const auto& k : o.entry->manifest.kernels) {
      INFO(k.name_expression);
      CHECK(k.resources.spill_store_bytes == 0);
      CHECK(k.resources.stack_bytes == 0);
      CHECK(k.resources.shared_bytes <= 48 * 1024);  // static shared memory: more cannot launch
      CHECK_FALSE(k.resources.wgmma_serialized);
    }
  }
}

TEST_CASE("the reference reduces before it normalizes; the other order is a different function", "[latent_tail][reference]") {
  const auto s = tail(R"("tp_size": 2, "hidden": 128, "latent": 256, "max_tokens": 4)");
  const auto& op = as(s);
  reference::Rng rng(3);
  reference::TailInputs in;
  in.tokens = 3;
  in.routed.resize(2);
  in.shared.resize(2);
  for (int r = 0; r < 2; ++r) reference::fill_tail_rank(op, in.tokens, rng, 1, in.routed[static_cast<std::size_t>(r)], in.shared[static_cast<std::size_t>(r)]);
  reference::fill_tail_weights(op, rng, in.gamma, in.w_up);
  const auto o = reference::latent_tail_reference(op, in);
  const auto wrong = reference::norm_then_sum(op, in);
  std::size_t differ = 0;
  for (std::size_t i = 0; i < wrong.size(); ++i) differ += wrong[i] != o.latent_norm[i];
  CHECK(differ > wrong.size() / 2);

  // -0.0 in the partials changes nothing: the sums see +0.0.
  auto flipped = in;
  for (auto& part : flipped.routed) {
    for (auto& v : part) v = v == 0 ? 0x8000 : v;
  }
  CHECK(reference::latent_tail_reference(op, flipped).latent_sum == o.latent_sum);
}
