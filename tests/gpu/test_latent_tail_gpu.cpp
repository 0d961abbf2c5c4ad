// The latent tail on the GPU. One GPU: tp 1 against the reference. Two or more NVLinked GPUs
// (tp 2, or 4 / 8 where the machine has them):
// the fused, base and striped base paths against the reference and each other (integer
// partials, so the reduced sums are exact and compared bitwise; z within 2 ulp; out within 1e-2
// and bitwise equal across paths), inputs with -0.0, token counts that change between calls,
// 100 CUDA-graph replays with inputs changed in place, calls back to back with no sync, the path
// each call takes, mismatched communicators, and a peer that never arrives. On one GPU, tp 1
// shapes with the streamer's tilings of the tp 2 and tp 8 stripes.
#include <moejit/error.hpp>
#include <moejit/latent_moe.hpp>

#include "spec/ops/latent_tail.hpp"
#include "gpu_common.hpp"
#include "reference/latent_tail.hpp"
#include "reference/numeric.hpp"
#include "runtime/device.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <map>

using namespace moejit;
using moejit::test::gpu_context;

namespace {

int device_count() {
  int n = 0;
  gpu_context().driver().cuDeviceGetCount(&n);
  return n;
}

// The ranks the multi-GPU cases use: the largest fused-path size (2, 4, 8) this machine holds,
// so the same binary checks tp 2 on two GPUs and tp 4 / 8 where there are four or eight.
int test_tp() {
  const int n = device_count();
  return n >= 8 ? 8 : n >= 4 ? 4 : n >= 2 ? 2 : 1;
}

std::shared_ptr<const LatentTailSpec> tail_spec(const std::string& fields) {
  const auto s = parse_spec(R"({"op": "latent_tail", )" + fields + "}", "gpu-test.json").ops[0];
  return std::dynamic_pointer_cast<const LatentTailSpec>(s);
}

// One rank's device tensors, in declaration order: routed, shared, gamma, w_up, out, latent_sum, latent_norm.
struct RankBuffers {
  std::vector<detail::DeviceBuffer> buffers;
  std::vector<Buffer> bindings;
};

RankBuffers upload_rank(const detail::Driver& drv, const LatentTailSpec& op, const reference::TailInputs& in, int rank) {
  RankBuffers b;
  auto add = [&](const void* data, std::size_t bytes) {
    b.buffers.emplace_back(drv, bytes);
    if (data) b.buffers.back().upload(data, bytes);
    b.bindings.push_back({b.buffers.back().ptr(), bytes});
  };
  const auto t = static_cast<std::size_t>(in.tokens);
  const auto r = static_cast<std::size_t>(rank);
  add(in.routed[r].data(), in.routed[r].size() * 2);
  if (op.shared_expert) add(in.shared[r].data(), in.shared[r].size() * 2);
  add(in.gamma.data(), in.gamma.size() * 2);
  add(in.w_up.data(), in.w_up.size() * 2);
  add(nullptr, t * static_cast<std::size_t>(op.hidden) * 2);
  add(nullptr, t * static_cast<std::size_t>(op.latent) * 2);
  add(nullptr, t * static_cast<std::size_t>(op.latent) * 2);
  return b;
}

std::vector<std::uint16_t> download(const detail::DeviceBuffer& b) {
  std::vector<std::uint16_t> v(b.bytes() / 2);
  b.download(v.data(), b.bytes());
  return v;
}

reference::TailInputs make_inputs(const LatentTailSpec& op, std::int64_t tokens, int variant, std::uint64_t seed) {
  reference::Rng rng(seed);
  reference::TailInputs in;
  in.tokens = tokens;
  in.routed.resize(static_cast<std::size_t>(op.tp_size));
  in.shared.resize(op.shared_expert ? static_cast<std::size_t>(op.tp_size) : 0);
  std::vector<std::uint16_t> none;
  for (int r = 0; r < op.tp_size; ++r) {
    reference::fill_tail_rank(op, tokens, rng, variant, in.routed[static_cast<std::size_t>(r)],
                              op.shared_expert ? in.shared[static_cast<std::size_t>(r)] : none);
  }
  reference::fill_tail_weights(op, rng, in.gamma, in.w_up);
  return in;
}

struct Outputs {
  std::vector<std::uint16_t> out, sum, norm;
};

// Checks one rank's outputs against the reference (R bitwise, z <= 2 ulp, out <= 1e-2).
void check_against(const reference::TailOutputs& ref, const Outputs& got, const std::string& what) {
  INFO(what);
  std::size_t sum_bad = 0, norm_bad = 0;
  for (std::size_t i = 0; i < ref.latent_sum.size(); ++i) {
    sum_bad += got.sum[i] != ref.latent_sum[i];
    norm_bad += reference::ulp_distance(DType::bf16, got.norm.data(), ref.latent_norm.data(), i) > 2;
  }
  CHECK(sum_bad == 0);
  CHECK(norm_bad == 0);
  double err = 0, norm = 0;
  for (std::size_t i = 0; i < ref.out.size(); ++i) {
    const double a = reference::bf16_to_float(got.out[i]), b = reference::bf16_to_float(ref.out[i]);
    err += (a - b) * (a - b);
    norm += b * b;
  }
  CHECK(std::sqrt(err) <= 1e-2 * std::sqrt(norm));
}

// Runs one call of a group on `in` and returns every rank's outputs.
std::vector<Outputs> run_group(LatentMoEGroup& group, const LatentTailSpec& op, const reference::TailInputs& in) {
  std::vector<Outputs> outs(static_cast<std::size_t>(group.size()));
  group.run([&](int r) {
    auto& ctx = group.context(r);
    auto b = upload_rank(ctx.driver(), op, in, r);
    detail::Stream stream(ctx.driver());
    group.tail(r).launch(b.bindings, in.tokens, stream.get());
    stream.synchronize();
    group.tail(r).check();
    const std::size_t first = op.shared_expert ? 4 : 3;
    auto& o = outs[static_cast<std::size_t>(r)];
    o.out = download(b.buffers[first]);
    o.sum = download(b.buffers[first + 1]);
    o.norm = download(b.buffers[first + 2]);
  });
  return outs;
}

}  // namespace

TEST_CASE("latent tail, tp 1, matches the reference", "[gpu][latent_tail]") {
  const auto ops = test::warm({R"({"op": "latent_tail", "tp_size": 1, "hidden": 7168, "latent": 3584, "max_tokens": 128})",
                               R"({"op": "latent_tail", "tp_size": 1, "hidden": 1024, "latent": 640, "shared_expert": false})",
                               // The tensor-core kernel's CTAs of 56 W rows (7168), 64 (1024) and 48 (9216).
                               R"({"op": "latent_tail", "tp_size": 1, "hidden": 9216, "latent": 512, "max_tokens": 64})",
                               // The streamer's tilings of a rank's stripe at tp 8 and tp 2 (7168 / tp rows:
                               // K split 8 ways, one row group; 4 ways, two), on one GPU.
                               R"({"op": "latent_tail", "tp_size": 1, "hidden": 896, "latent": 3584, "max_tokens": 8})",
                               R"({"op": "latent_tail", "tp_size": 1, "hidden": 3584, "latent": 3584, "max_tokens": 8})"});
  std::uint64_t seed = 1;
  for (const auto& spec : ops) {
    const auto op = gpu_context().load(spec);
    // Every token tile of the up projection (8, 16, 32, 64; on the tensor cores 16, 32, 64, one
    // token there too), partly filled, and past 64 tokens the tiles of 64 side by side.
    for (int variant = 0; variant < 2; ++variant) {
      for (std::int64_t t : {0, 1, 4, 9, 16, 33, 48, 64, 100, 128}) {
        if (t <= spec->max_tokens()) test::check(*op, {variant, t, seed++});
      }
    }
  }
  // More tokens than max_tokens is an error, not a write past the workspaces.
  const auto op = gpu_context().load(ops[0]);
  auto tensors = reference::make_tensors(*ops[0], 129);
  auto device = tools::upload(gpu_context().driver(), tensors);
  detail::Stream stream(gpu_context().driver());
  CHECK_THROWS_AS(op->launch(device.bindings, 129, stream.get()), Error);
}

TEST_CASE("latent tail, tp 1: a shared partial off 16-byte alignment gives the same bits", "[gpu][latent_tail]") {
  // S is loaded 16 bytes at a time where it is 16-byte aligned and element by element where not
  // (load8), on the streamer (T = 4) and the tensor cores (1, 33, 64).
  const auto ops = test::warm({R"({"op": "latent_tail", "tp_size": 1, "hidden": 7168, "latent": 3584, "max_tokens": 64})"});
  const auto& spec = dynamic_cast<const LatentTailSpec&>(*ops[0]);
  const auto op = gpu_context().load(ops[0]);
  const auto& drv = gpu_context().driver();
  detail::Stream stream(drv);
  for (std::int64_t t : {1, 4, 33, 64}) {
    INFO("T=" << t);
    const auto in = make_inputs(spec, t, 0, 77 + static_cast<std::uint64_t>(t));
    auto b = upload_rank(drv, spec, in, 0);
    op->launch(b.bindings, t, stream.get());
    stream.synchronize();
    constexpr std::size_t kOut = 4;  // routed, shared, gamma, w_up, out
    const auto aligned = download(b.buffers[kOut]);
    // The shared partial one element past an aligned address.
    detail::DeviceBuffer shifted(drv, b.bindings[1].bytes + 16);
    auto* p = static_cast<char*>(shifted.ptr()) + 2;
    detail::copy_to_device(drv, reinterpret_cast<CUdeviceptr>(p), in.shared[0].data(), b.bindings[1].bytes);
    auto bindings = b.bindings;
    bindings[1] = {p, b.bindings[1].bytes};
    b.buffers[kOut].upload(std::vector<std::uint16_t>(aligned.size(), 0x7fc0).data(), aligned.size() * 2);
    op->launch(bindings, t, stream.get());
    stream.synchronize();
    CHECK(download(b.buffers[kOut]) == aligned);
  }
}

TEST_CASE("latent tail, tp 1: chained calls back to back give each call's own bits", "[gpu][latent_tail]") {
  // Chained (LaunchHints::chained), the norm is a PDL launch that waits on the GPU for the kernel
  // before it: the last call's up projection, which reads the z the norm overwrites. Two input
  // sets alternating on one stream with no sync between the calls give each set's bits (every
  // buffer: the output, R and z) from a call of its own, on the streamer and the tensor cores.
  const auto ops = test::warm({R"({"op": "latent_tail", "tp_size": 1, "hidden": 7168, "latent": 3584, "max_tokens": 64})"});
  const auto op = gpu_context().load(ops[0]);
  const auto& harness = reference::harness_for("latent_tail");
  LaunchHints chained;
  chained.chained = true;
  detail::Stream stream(gpu_context().driver());
  for (std::int64_t t : {1, 4, 64}) {
    std::vector<tools::DeviceTensors> sets;
    std::vector<std::vector<std::vector<std::byte>>> alone;
    const auto download_all = [](const tools::DeviceTensors& set) {
      std::vector<std::vector<std::byte>> out;
      for (const auto& buffer : set.buffers) {
        out.emplace_back(buffer.bytes());
        buffer.download(out.back().data(), out.back().size());
      }
      return out;
    };
    for (int set = 0; set < 2; ++set) {
      reference::Rng rng(static_cast<std::uint64_t>(31 + set));
      auto host = reference::make_tensors(*ops[0], t);
      harness.fill_inputs(*ops[0], host, t, rng, 0);
      sets.push_back(tools::upload(gpu_context().driver(), host));
      op->launch(sets.back().bindings, t, stream.get(), chained);
      stream.synchronize();
      alone.push_back(download_all(sets.back()));
    }
    REQUIRE(alone[0] != alone[1]);
    for (int round = 0; round < 10; ++round) {
      for (const auto& set : sets) op->launch(set.bindings, t, stream.get(), chained);
      stream.synchronize();
      for (std::size_t set = 0; set < 2; ++set) {
        INFO("T=" << t << " round " << round << " set " << set);
        CHECK(download_all(sets[set]) == alone[set]);
      }
    }
  }
}

TEST_CASE("latent tail, tp 2/4/8: fused, base and striped paths agree with the reference and each other", "[gpu][latent_tail][tp2]") {
  const int tp = test_tp();
  if (tp < 2) {
    WARN("SKIPPED: one GPU here; the multi-GPU cases need two or more");
    return;
  }
  WARN("tp " << tp);
  const std::string shape = fmt::format(R"("tp_size": {}, "hidden": 7168, "latent": 3584, "eps": 1e-5, "max_tokens": 128)", tp);
  std::map<std::uint64_t, std::vector<std::uint16_t>> first_out;  // by input seed
  using P = LatentMoE::Path;
  for (const auto& [path, expected] : {std::pair{R"("path": "base", "base_variant": "full")", P::base_full},
                                       {R"("path": "base", "base_variant": "striped")", P::base_striped}, {R"("path": "fused")", P::fused}}) {
    const auto spec = tail_spec(shape + ", " + path);
    test::warm({R"({"op": "latent_tail", )" + shape + ", " + path + "}"});
    LatentMoEGroup group(spec, Options::from_environment());
    std::uint64_t seed = 77;
    // Token counts change from call to call (and the phase rotates with them): every token tile
    // of the up projection (8, 16, 32, 64), and past the fused path's 64-token slots a base path
    // (tiles of 64 side by side).
    for (std::int64_t t : {1, 16, 4, 64, 1, 33, 24, 100}) {
      const auto taken = group.tail(0).path_for(t);
      INFO("path " << to_string(taken) << " T=" << t);
      if (t <= 64) CHECK(taken == expected);
      else CHECK(taken != P::fused);
      for (int variant = 0; variant < 2; ++variant) {
        const std::uint64_t this_seed = seed++;
        const auto in = make_inputs(*spec, t, variant, this_seed);
        const auto ref = reference::latent_tail_reference(*spec, in);
        const auto outs = run_group(group, *spec, in);
        INFO("variant " << variant);
        for (int r = 0; r < tp; ++r) {
          CHECK(outs[0].out == outs[static_cast<std::size_t>(r)].out);  // every rank assembles the same output
          check_against(ref, outs[static_cast<std::size_t>(r)], fmt::format("rank {}", r));
        }
        auto [it, fresh] = first_out.emplace(this_seed, outs[0].out);
        if (!fresh) CHECK(it->second == outs[0].out);  // bitwise across paths
      }
    }
  }
}

TEST_CASE("latent tail, tp 2/4/8, fused: 100 CUDA-graph replays with inputs changed in place", "[gpu][latent_tail][tp2]") {
  const int tp = test_tp();
  if (tp < 2) {
    WARN("SKIPPED: one GPU here; the multi-GPU cases need two or more");
    return;
  }
  const std::string fields = fmt::format(R"("tp_size": {}, "hidden": 1024, "latent": 512, "max_tokens": 16, "path": "fused")", tp);
  test::warm({R"({"op": "latent_tail", )" + fields + "}"});
  const auto spec = tail_spec(fields);
  LatentMoEGroup group(spec, Options::from_environment());
  const std::int64_t tokens = 16;
  auto in = make_inputs(*spec, tokens, 0, 5);
  const auto ranks = static_cast<std::size_t>(tp);
  std::vector<RankBuffers> bufs(ranks);
  std::vector<std::unique_ptr<detail::Stream>> streams(ranks);
  std::vector<std::unique_ptr<detail::Graph>> graphs(ranks);
  group.run([&](int r) {
    auto& ctx = group.context(r);
    bufs[static_cast<std::size_t>(r)] = upload_rank(ctx.driver(), *spec, in, r);
    streams[static_cast<std::size_t>(r)] = std::make_unique<detail::Stream>(ctx.driver());
    auto& s = *streams[static_cast<std::size_t>(r)];
    graphs[static_cast<std::size_t>(r)] = std::make_unique<detail::Graph>(
        ctx.driver(), s, [&] { group.tail(r).launch(bufs[static_cast<std::size_t>(r)].bindings, tokens, s.get()); });
  });
  reference::Rng rng(9);
  int checked = 0;
  for (int replay = 0; replay < 100; ++replay) {
    for (int r = 0; r < tp; ++r) reference::fill_tail_rank(*spec, tokens, rng, replay % 2, in.routed[static_cast<std::size_t>(r)], in.shared[static_cast<std::size_t>(r)]);
    std::vector<Outputs> outs(ranks);
    group.run([&](int r) {
      auto& b = bufs[static_cast<std::size_t>(r)];
      b.buffers[0].upload(in.routed[static_cast<std::size_t>(r)].data(), b.buffers[0].bytes());
      b.buffers[1].upload(in.shared[static_cast<std::size_t>(r)].data(), b.buffers[1].bytes());
      graphs[static_cast<std::size_t>(r)]->launch(*streams[static_cast<std::size_t>(r)]);
      streams[static_cast<std::size_t>(r)]->synchronize();
      group.tail(r).check();
      outs[static_cast<std::size_t>(r)] = {download(b.buffers[4]), download(b.buffers[5]), download(b.buffers[6])};
    });
    const auto ref = reference::latent_tail_reference(*spec, in);
    INFO("replay " << replay);
    for (std::size_t r = 1; r < ranks; ++r) CHECK(outs[0].out == outs[r].out);
    check_against(ref, outs[0], "rank 0");
    ++checked;
  }
  CHECK(checked == 100);
}

TEST_CASE("latent tail, tp 2/4/8: calls back to back with no sync give each call's own bits, on every path", "[gpu][latent_tail][tp2]") {
  // Two input sets alternating on each rank's stream with no sync between the calls: the fused
  // path's phases and slots, and the base paths' all-gathers and side stream, carry each call's
  // data to its own outputs while the next call is already queued; also with the two sets' token
  // counts different, with no shared expert on the automatic path, and on a fused tail whose
  // second set is past its slots (fused and base calls interleaved).
  const int tp = test_tp();
  if (tp < 2) {
    WARN("SKIPPED: one GPU here; the multi-GPU cases need two or more");
    return;
  }
  const auto ranks = static_cast<std::size_t>(tp);
  struct Case {
    const char* fields;
    std::int64_t tokens[2];
  };
  const Case cases[] = {{R"("max_tokens": 16, "path": "fused")", {3, 3}},
                        {R"("max_tokens": 16, "path": "fused")", {16, 16}},
                        {R"("max_tokens": 16, "path": "base", "base_variant": "striped")", {3, 16}},
                        {R"("max_tokens": 16, "path": "base", "base_variant": "full")", {16, 3}},
                        {R"("max_tokens": 16, "shared_expert": false)", {5, 12}},
                        {R"("max_tokens": 100, "path": "fused")", {16, 100}}};
  for (const auto& c : cases) {
    const std::string fields = fmt::format(R"("tp_size": {}, "hidden": 1024, "latent": 512, {})", tp, c.fields);
    INFO(fields << " T " << c.tokens[0] << " and " << c.tokens[1]);
    test::warm({R"({"op": "latent_tail", )" + fields + "}"});
    const auto spec = tail_spec(fields);
    LatentMoEGroup group(spec, Options::from_environment());
    const std::vector<reference::TailInputs> inputs = {make_inputs(*spec, c.tokens[0], 0, 41), make_inputs(*spec, c.tokens[1], 1, 42)};
    std::vector<std::vector<RankBuffers>> bufs(2);
    for (auto& set : bufs) set.resize(ranks);
    std::vector<std::vector<Outputs>> alone(2, std::vector<Outputs>(ranks)), got = alone;
    std::vector<std::unique_ptr<detail::Stream>> streams(ranks);
    const auto outputs = [&](std::size_t set, int r) {
      const auto& b = bufs[set][static_cast<std::size_t>(r)].buffers;
      const std::size_t first = spec->shared_expert ? 4 : 3;
      return Outputs{download(b[first]), download(b[first + 1]), download(b[first + 2])};
    };
    const auto launch = [&](std::size_t set, int r) {
      const auto i = static_cast<std::size_t>(r);
      group.tail(r).launch(bufs[set][i].bindings, inputs[set].tokens, streams[i]->get());
    };
    group.run([&](int r) {
      const auto i = static_cast<std::size_t>(r);
      streams[i] = std::make_unique<detail::Stream>(group.context(r).driver());
      for (std::size_t set = 0; set < 2; ++set) bufs[set][i] = upload_rank(group.context(r).driver(), *spec, inputs[set], r);
    });
    for (std::size_t set = 0; set < 2; ++set) {  // each set alone, synchronized
      group.run([&](int r) {
        launch(set, r);
        streams[static_cast<std::size_t>(r)]->synchronize();
        group.tail(r).check();
        alone[set][static_cast<std::size_t>(r)] = outputs(set, r);
      });
    }
    REQUIRE(alone[0][0].out != alone[1][0].out);
    for (int round = 0; round < 5; ++round) {
      group.run([&](int r) {
        for (int call = 0; call < 4; ++call) launch(static_cast<std::size_t>(call % 2), r);
        streams[static_cast<std::size_t>(r)]->synchronize();
        group.tail(r).check();
        for (std::size_t set = 0; set < 2; ++set) got[set][static_cast<std::size_t>(r)] = outputs(set, r);
      });
      for (std::size_t set = 0; set < 2; ++set) {
        for (std::size_t r = 0; r < ranks; ++r) {
          INFO("round " << round << " set " << set << " rank " << r);
          CHECK(got[set][r].out == alone[set][r].out);
          CHECK(got[set][r].sum == alone[set][r].sum);
          CHECK(got[set][r].norm == alone[set][r].norm);
        }
      }
    }
  }
}

TEST_CASE("latent tail: a communicator that does not fit is a clear error", "[gpu][latent_tail][tp2]") {
  if (device_count() < 2) {
    WARN("SKIPPED: one GPU here; the multi-GPU cases need two or more");
    return;
  }
  const auto spec4 = tail_spec(R"("tp_size": 4, "hidden": 7168, "latent": 3584, "path": "base")");
  const auto spec2 = tail_spec(R"("tp_size": 2, "hidden": 7168, "latent": 3584, "path": "base")");
  test::warm({R"({"op": "latent_tail", "tp_size": 4, "hidden": 7168, "latent": 3584, "path": "base"})",
              R"({"op": "latent_tail", "tp_size": 2, "hidden": 7168, "latent": 3584, "path": "base"})"});
  Context c0(Options::from_environment(), 0), c1(Options::from_environment(), 1);
  Context* ctxs[] = {&c0, &c1};
  auto comms = Communicator::create_all(ctxs);
  try {
    LatentMoE bad(c0, spec4, &comms[0]);
    FAIL("a tp 4 tail accepted a communicator of 2 ranks");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("tp_size does not match the communicator") != std::string::npos);
  }
  try {
    LatentMoE bad(c1, spec2, &comms[0]);
    FAIL("a communicator of device 0 was accepted on device 1");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("on another device") != std::string::npos);
  }
  try {
    LatentMoE bad(c0, spec2, nullptr);
    FAIL("a tp 2 tail was created without a communicator");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("needs a communicator") != std::string::npos);
  }
}

TEST_CASE("latent tail, tp 2/4/8, fused: a peer that never arrives gives an error, not a hung GPU", "[gpu][latent_tail][tp2]") {
  const int tp = test_tp();
  if (tp < 2) {
    WARN("SKIPPED: one GPU here; the multi-GPU cases need two or more");
    return;
  }
  const std::string fields =
      fmt::format(R"("tp_size": {}, "hidden": 1024, "latent": 512, "max_tokens": 8, "path": "fused", "peer_timeout_ms": 200)", tp);
  test::warm({R"({"op": "latent_tail", )" + fields + "}"});
  const auto spec = tail_spec(fields);
  LatentMoEGroup group(spec, Options::from_environment());
  const auto in = make_inputs(*spec, 4, 0, 3);
  bool raised = false;
  group.run([&](int r) {
    if (r != 0) return;  // the other ranks never call
    auto& ctx = group.context(0);
    auto b = upload_rank(ctx.driver(), *spec, in, 0);
    detail::Stream stream(ctx.driver());
    group.tail(0).launch(b.bindings, 4, stream.get());
    stream.synchronize();  // returns: the spins are bounded
    try {
      group.tail(0).check();
    } catch (const Error& e) {
      raised = std::string(e.what()).find("did not arrive within 200 ms") != std::string::npos;
    }
  });
  CHECK(raised);
}
