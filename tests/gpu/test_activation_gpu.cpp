// Activations on the GPU against the CPU reference: every kind x layout x dtype, awkward widths,
// T = 0 and 1, masked experts with no, some and all rows, special values, unaligned views,
// CUDA graph replays and allocation-free launches.
#include <moejit/error.hpp>

#include "compiler/ops/activation.hpp"
#include "gpu_common.hpp"
#include "runtime/device.hpp"

#include <fmt/format.h>

using namespace moejit;
using moejit::test::gpu_context;

namespace {

std::string op_json(const char* kind, const char* layout, int d, const char* in, const char* out) {
  std::string extra;
  if (std::string(kind) == "situ") extra += R"(, "beta": 4.0, "linear_beta": 25.0)";
  if (std::string(layout) == "masked") extra += R"(, "num_experts": 5)";
  if (std::string(kind) == "swiglu_oai") extra += R"(, "interleaved": true)";
  return fmt::format(R"({{"op": "activation", "kind": "{}", "layout": "{}", "d": {}, "dtype": "{}", "out_dtype": "{}"{}}})",
                     kind, layout, d, in, out, extra);
}

}  // namespace

TEST_CASE("activations match the reference: kinds x layouts x dtypes x shapes", "[gpu][activation]") {
  const std::vector<std::pair<const char*, const char*>> dtypes = {{"bf16", "bf16"}, {"fp16", "fp16"}, {"fp32", "fp32"}, {"bf16", "fp32"}};
  std::vector<std::string> jsons;
  for (const char* kind : {"silu", "gelu", "gelu_tanh", "swiglu_oai", "situ"}) {
    for (const char* layout : {"dense", "masked"}) {
      for (const auto& [in, out] : dtypes) {
        for (int d : {1, 7, 64, 3072}) jsons.push_back(op_json(kind, layout, d, in, out));
      }
    }
  }
  // Plus the non-interleaved swiglu_oai and a situ without linear_beta.
  jsons.push_back(R"({"op": "activation", "kind": "swiglu_oai", "d": 2880, "alpha": 1.5, "limit": 5.0})");
  jsons.push_back(R"({"op": "activation", "kind": "situ", "d": 3072, "beta": 1.5})");
  jsons.push_back(R"({"op": "activation", "kind": "silu", "d": 7168, "interleaved": true})");
  const auto ops = test::warm(jsons);
  std::uint64_t seed = 1;
  for (const auto& spec : ops) {
    const auto op = gpu_context().load(spec);
    const auto& a = dynamic_cast<const ActivationSpec&>(*spec);
    const bool masked = a.layout == ActivationLayout::masked;
    const std::vector<std::int64_t> tokens = masked ? std::vector<std::int64_t>{0, 1, 7, 64}
                                                    : std::vector<std::int64_t>{0, 1, 7, 33, a.d > 1000 ? 1024 : 300};
    for (int variant = 0; variant < reference::harness_for("activation").variants(); ++variant) {
      for (auto t : tokens) test::check(*op, {variant, t, seed++});
    }
  }
}

TEST_CASE("masked layouts: grid-strided experts, and many experts", "[gpu][activation]") {
  // 8 experts x 2048 rows x d 1024: more chunks per expert than its grid row has threads, so each
  // thread strides over its expert's rows (counts 0, all, half, random; variant 1 also counts
  // past T_max); 1024 and 1100 experts of a few rows.
  const auto ops = test::warm({
      R"({"op": "activation", "kind": "situ", "beta": 4.0, "linear_beta": 25.0, "d": 1024, "layout": "masked", "num_experts": 8})",
      R"({"op": "activation", "kind": "silu", "d": 1024, "layout": "masked", "num_experts": 8, "dtype": "fp16", "out_dtype": "fp16"})",
      R"({"op": "activation", "kind": "silu", "d": 64, "layout": "masked", "num_experts": 1100})",
      R"({"op": "activation", "kind": "situ", "beta": 4.0, "d": 1024, "layout": "masked", "num_experts": 1024})",
  });
  std::uint64_t seed = 100;
  for (const auto& spec : ops) {
    const auto op = gpu_context().load(spec);
    const auto& a = dynamic_cast<const ActivationSpec&>(*spec);
    const std::vector<std::int64_t> tokens = a.num_experts > 8 ? std::vector<std::int64_t>{1, 3, 40} : std::vector<std::int64_t>{2048};
    for (int variant = 0; variant < reference::harness_for("activation").variants(); ++variant) {
      for (auto t : tokens) {
        // The expected-rows hint only sizes the grid: none, too few, about half, all, past T.
        for (std::int64_t hint : {std::int64_t{0}, std::int64_t{1}, t / 2, t, 4 * t}) {
          test::check(*op, {variant, t, seed++, {.expected_rows = hint}});
        }
      }
    }
  }
}

TEST_CASE("dense SituGLU and erf gelu stride past their grid of 32 blocks an SM", "[gpu][activation]") {
  // The launcher holds the issue-bound kinds' dense grid to 32 blocks an SM (dense_blocks_cap):
  // enough rows for ~2.3 passes a thread, the last one partial, in an odd row count.
  const auto ops = test::warm({
      R"({"op": "activation", "kind": "situ", "beta": 4.0, "linear_beta": 25.0, "d": 3072})",
      R"({"op": "activation", "kind": "gelu", "d": 1000, "dtype": "fp16", "out_dtype": "fp32"})",
  });
  const std::int64_t threads = 32 * std::int64_t{gpu_context().device().sm_count} * detail::kActivationThreads;
  std::uint64_t seed = 200;
  for (const auto& spec : ops) {
    const auto op = gpu_context().load(spec);
    const auto& a = dynamic_cast<const ActivationSpec&>(*spec);
    const std::int64_t tokens = (threads * 23 / 10) / (a.d / detail::activation_vec(a)) | 1;
    for (int variant = 0; variant < reference::harness_for("activation").variants(); ++variant) {
      test::check(*op, {variant, tokens, seed++});
    }
  }
}

TEST_CASE("unaligned views take the scalar path and still match", "[gpu][activation]") {
  const auto ops = test::warm({R"({"op": "activation", "kind": "situ", "d": 3072, "beta": 4.0, "linear_beta": 25.0})"});
  auto& ctx = gpu_context();
  const auto op = ctx.load(ops[0]);
  const std::int64_t tokens = 5;
  reference::Rng rng(9);
  auto want = reference::make_tensors(*ops[0], tokens);
  reference::harness_for("activation").fill_inputs(*ops[0], want, tokens, rng, 0);
  want[1].fill_bytes(tools::kPoison);
  auto got = want;
  // Both buffers one element past an aligned address.
  detail::DeviceBuffer x(ctx.driver(), want[0].bytes() + 16), y(ctx.driver(), want[1].bytes() + 16);
  auto* xp = static_cast<char*>(x.ptr()) + 2;
  auto* yp = static_cast<char*>(y.ptr()) + 2;
  detail::copy_to_device(ctx.driver(), reinterpret_cast<CUdeviceptr>(xp), want[0].data.data(), want[0].bytes());
  detail::copy_to_device(ctx.driver(), reinterpret_cast<CUdeviceptr>(yp), want[1].data.data(), want[1].bytes());
  detail::Stream stream(ctx.driver());
  const Buffer bufs[] = {{xp, want[0].bytes()}, {yp, want[1].bytes()}};
  op->launch(bufs, tokens, stream.get());
  stream.synchronize();
  MOEJIT_CU(ctx.driver(), cuMemcpyDtoH(got[1].data.data(), reinterpret_cast<CUdeviceptr>(yp), got[1].bytes()));
  reference::harness_for("activation").run(*ops[0], want, tokens);
  const auto failures = reference::harness_for("activation").compare(*ops[0], want, got, tokens);
  INFO((failures.empty() ? "" : failures[0]));
  CHECK(failures.empty());
}

TEST_CASE("inputs of 2^31 elements and more take 64-bit offsets, vector and scalar paths", "[gpu][activation]") {
  // silu, d = 2, bf16: 2^29 + 3 rows of [g0, g1, u0, u1] are 2^31 + 12 input elements (4 GiB),
  // past what the 32-bit offsets of smaller calls hold. Rows repeat a two-value pattern (an
  // aligned view: the vector path) or one value (a view one element in: the scalar path); every
  // output element must be the reference's for its column, none left poisoned.
  const auto ops = test::warm({R"({"op": "activation", "kind": "silu", "d": 2})"});
  auto& ctx = gpu_context();
  const auto op = ctx.load(ops[0]);
  const auto& harness = reference::harness_for("activation");
  const std::int64_t tokens = (std::int64_t{1} << 29) + 3;
  const std::size_t in_bytes = static_cast<std::size_t>(tokens) * 4 * 2, out_bytes = static_cast<std::size_t>(tokens) * 2 * 2;
  const std::uint16_t a = 0x3fc0, b = 0xc040;  // bf16 1.5 and -3.0
  for (const bool aligned : {true, false}) {
    // The reference for one row of this pattern.
    auto row = reference::make_tensors(*ops[0], 1);
    auto* x = row[0].as<std::uint16_t>();
    x[0] = x[2] = a;
    x[1] = x[3] = aligned ? b : a;
    harness.run(*ops[0], row, 1);
    const std::uint16_t want0 = row[1].as<std::uint16_t>()[0], want1 = row[1].as<std::uint16_t>()[1];

    detail::DeviceBuffer in(ctx.driver(), in_bytes + 16), out(ctx.driver(), out_bytes + 16);
    const std::size_t shift = aligned ? 0 : 2;
    const auto in_at = in.address() + shift, out_at = out.address() + shift;
    detail::Stream stream(ctx.driver());
    if (aligned) {
      MOEJIT_CU(ctx.driver(), cuMemsetD32Async(in_at, static_cast<unsigned>(a) | static_cast<unsigned>(b) << 16, in_bytes / 4,
                                               stream.get()));
    } else {
      MOEJIT_CU(ctx.driver(), cuMemsetD16Async(in_at, a, in_bytes / 2, stream.get()));
    }
    MOEJIT_CU(ctx.driver(), cuMemsetD8Async(out.address(), 0xEE, out_bytes + 16, stream.get()));
    const Buffer bufs[] = {{reinterpret_cast<void*>(in_at), in_bytes}, {reinterpret_cast<void*>(out_at), out_bytes}};
    op->launch(bufs, tokens, stream.get());
    stream.synchronize();
    std::vector<std::uint16_t> got(out_bytes / 2);
    MOEJIT_CU(ctx.driver(), cuMemcpyDtoH(got.data(), out_at, out_bytes));
    std::size_t bad = 0, first_bad = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      if (got[i] != (i % 2 ? want1 : want0) && bad++ == 0) first_bad = i;
    }
    INFO((aligned ? "vector path" : "scalar path") << ": " << bad << " wrong outputs, the first at " << first_bad);
    CHECK(bad == 0);
  }
}

TEST_CASE("masked experts of 2^31 input elements and more take 64-bit offsets and keep their counts", "[gpu][activation]") {
  // silu, d = 2, bf16, 2 experts of T_max = 2^29 + 3 rows (4 GiB of input each): expert 1
  // starts past 2^31 elements, and each expert's last rows lie past what 32-bit offsets hold.
  // Expert 0's count ends 2 rows before T_max, expert 1's at 2^29 - 4. Rows below the count hold
  // the reference's pattern, every row past it keeps the poison.
  const auto ops = test::warm({R"({"op": "activation", "kind": "silu", "d": 2, "layout": "masked", "num_experts": 2})"});
  auto& ctx = gpu_context();
  const auto op = ctx.load(ops[0]);
  const std::int64_t tokens = (std::int64_t{1} << 29) + 3;
  const std::int32_t counts[2] = {static_cast<std::int32_t>(tokens - 2), static_cast<std::int32_t>((std::int64_t{1} << 29) - 4)};
  const std::size_t rows = static_cast<std::size_t>(tokens);
  const std::size_t in_bytes = 2 * rows * 4 * 2, out_bytes = 2 * rows * 2 * 2;
  const std::uint16_t a = 0x3fc0, b = 0xc040, poison = 0xEEEE;  // bf16 1.5 and -3.0
  auto row = reference::make_tensors(*ops[0], 1);
  auto* x = row[0].as<std::uint16_t>();
  x[0] = x[2] = a;
  x[1] = x[3] = b;
  row[1].as<std::int32_t>()[0] = 1;
  row[1].as<std::int32_t>()[1] = 0;
  reference::harness_for("activation").run(*ops[0], row, 1);
  const std::uint16_t want0 = row[2].as<std::uint16_t>()[0], want1 = row[2].as<std::uint16_t>()[1];

  detail::DeviceBuffer in(ctx.driver(), in_bytes), out(ctx.driver(), out_bytes), count(ctx.driver(), sizeof counts);
  detail::Stream stream(ctx.driver());
  MOEJIT_CU(ctx.driver(), cuMemsetD32Async(in.address(), static_cast<unsigned>(a) | static_cast<unsigned>(b) << 16, in_bytes / 4,
                                           stream.get()));
  MOEJIT_CU(ctx.driver(), cuMemsetD16Async(out.address(), poison, out_bytes / 2, stream.get()));
  count.upload(counts, sizeof counts);
  const Buffer bufs[] = {{reinterpret_cast<void*>(in.address()), in_bytes},
                         {reinterpret_cast<void*>(count.address()), sizeof counts},
                         {reinterpret_cast<void*>(out.address()), out_bytes}};
  op->launch(bufs, tokens, stream.get());
  stream.synchronize();
  std::vector<std::uint16_t> got(out_bytes / 2);
  MOEJIT_CU(ctx.driver(), cuMemcpyDtoH(got.data(), out.address(), out_bytes));
  for (std::size_t e = 0; e < 2; ++e) {
    std::size_t bad = 0, first_bad = 0;
    for (std::size_t t = 0; t < rows; ++t) {
      for (std::size_t j = 0; j < 2; ++j) {
        const std::size_t i = (e * rows + t) * 2 + j;
        const std::uint16_t want = t < static_cast<std::size_t>(counts[e]) ? (j ? want1 : want0) : poison;
        if (got[i] != want && bad++ == 0) first_bad = t;
      }
    }
    INFO("expert " << e << " (count " << counts[e] << "): " << bad << " wrong outputs, the first in row " << first_bad);
    CHECK(bad == 0);
  }
}

TEST_CASE("launches replay inside a CUDA graph, see in-place input changes, and allocate nothing", "[gpu][activation]") {
  const auto ops = test::warm({R"({"op": "activation", "kind": "silu", "d": 2048, "layout": "masked", "num_experts": 4})"});
  auto& ctx = gpu_context();
  const auto op = ctx.load(ops[0]);
  const auto& harness = reference::harness_for("activation");
  const std::int64_t tokens = 40;
  reference::Rng rng(11);
  auto want = reference::make_tensors(*ops[0], tokens);
  harness.fill_inputs(*ops[0], want, tokens, rng, 0);
  want[2].fill_bytes(tools::kPoison);
  auto device = tools::upload(ctx.driver(), want);
  detail::Stream stream(ctx.driver());

  const long before = moejit::test::g_allocations.load();
  detail::Graph graph(ctx.driver(), stream, [&] { op->launch(device.bindings, tokens, stream.get()); });
  const long after_capture = moejit::test::g_allocations.load();
  for (int replay = 0; replay < 3; ++replay) {
    // Change the inputs in place between replays, as an engine does.
    harness.fill_inputs(*ops[0], want, tokens, rng, replay % 2);
    device.buffers[0].upload(want[0].data.data(), want[0].bytes());
    device.buffers[1].upload(want[1].data.data(), want[1].bytes());
    graph.launch(stream);
    stream.synchronize();
    auto got = want;
    tools::download_outputs(*op, device, got);
    auto ref = want;
    harness.run(*ops[0], ref, tokens);
    const auto failures = harness.compare(*ops[0], ref, got, tokens);
    INFO("replay " << replay << ": " << (failures.empty() ? "" : failures[0]));
    CHECK(failures.empty());
    want = ref;  // the output buffer keeps this replay's results; the next reference starts there
  }
  // The launch itself (captured once) allocated nothing on the host beyond graph machinery.
  const long launch_allocs = [&] {
    const long b = moejit::test::g_allocations.load();
    op->launch(device.bindings, tokens, stream.get());
    return moejit::test::g_allocations.load() - b;
  }();
  stream.synchronize();
  CHECK(launch_allocs == 0);
  (void)before;
  (void)after_capture;
}

TEST_CASE("a token count beyond the caller's buffers is an error, not a write past the end", "[gpu][activation]") {
  const auto ops = test::warm({R"({"op": "activation", "kind": "silu", "d": 64})"});
  auto& ctx = gpu_context();
  const auto op = ctx.load(ops[0]);
  auto tensors = reference::make_tensors(*ops[0], 8);
  auto device = tools::upload(ctx.driver(), tensors);
  detail::Stream stream(ctx.driver());
  try {
    op->launch(device.bindings, 9, stream.get());
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::input);
    CHECK(std::string(e.what()).find("too small") != std::string::npos);
  }
  const Buffer missing[] = {device.bindings[0], {}};
  CHECK_THROWS_AS(op->launch(missing, 8, stream.get()), Error);
  CHECK_NOTHROW(op->launch(device.bindings, 8, stream.get()));
  stream.synchronize();
}

TEST_CASE("activations by tables give the computed path's bits for every bf16 gate and up value", "[gpu][activation]") {
  // d 4096 x 2048 rows (8M outputs) takes the table kernel when aligned; the same input one
  // element in takes the scalar path, which computes. Gates run through all 65536 bf16 bit
  // patterns (zeros, subnormals, +-inf, NaN and |x| >= 128 outside the tables' window), the up
  // values through them in another order. Masked: 3 experts of 2048 rows, with the expected-rows
  // hint that picks the tables.
  const auto ops = test::warm({R"({"op": "activation", "kind": "situ", "d": 4096, "beta": 4.0, "linear_beta": 25.0})",
                               R"({"op": "activation", "kind": "situ", "d": 4096, "beta": 1.5})",
                               R"({"op": "activation", "kind": "situ", "d": 4096, "beta": 0.01, "linear_beta": 1000.0, "out_dtype": "fp32"})",
                               R"({"op": "activation", "kind": "gelu", "d": 4096})",
                               R"({"op": "activation", "kind": "gelu", "d": 4096, "out_dtype": "fp16"})",
                               R"({"op": "activation", "kind": "situ", "d": 4096, "beta": 4.0, "linear_beta": 25.0, "layout": "masked", "num_experts": 3})",
                               R"({"op": "activation", "kind": "gelu", "d": 4096, "layout": "masked", "num_experts": 3})"});
  auto& ctx = gpu_context();
  const std::int64_t tokens = 2048, d = 4096;
  for (const auto& spec : ops) {
    const auto op = ctx.load(spec);
    const auto& a = dynamic_cast<const ActivationSpec&>(*spec);
    const bool masked = a.layout == ActivationLayout::masked;
    const std::int64_t experts = masked ? a.num_experts : 1;
    std::vector<std::uint16_t> x(static_cast<std::size_t>(experts * tokens * 2 * d));
    for (std::size_t i = 0; i < x.size(); ++i) {
      const std::size_t row = i / (2 * d), col = i % (2 * d), n = row * d + col % d;
      x[i] = static_cast<std::uint16_t>(col < static_cast<std::size_t>(d) ? n : n * 40503u + 7u);
    }
    const std::int32_t counts[3] = {static_cast<std::int32_t>(tokens), static_cast<std::int32_t>(tokens / 2 + 3), 0};
    const std::size_t element = size_of(a.out_dtype);
    const std::size_t out_bytes = static_cast<std::size_t>(experts * tokens * d) * element;
    std::vector<std::vector<std::byte>> got;
    // Aligned for vectors, then one element in (input and output): the scalar path.
    for (const bool aligned : {true, false}) {
      const std::size_t in_shift = aligned ? 0 : 2, out_shift = aligned ? 0 : element;
      detail::DeviceBuffer in(ctx.driver(), x.size() * 2 + 16), out(ctx.driver(), out_bytes + 16), count(ctx.driver(), sizeof counts);
      detail::Stream stream(ctx.driver());
      detail::copy_to_device(ctx.driver(), in.address() + in_shift, x.data(), x.size() * 2);
      MOEJIT_CU(ctx.driver(), cuMemsetD8Async(out.address(), 0x5A, out_bytes + 16, stream.get()));
      count.upload(counts, sizeof counts);
      std::vector<Buffer> bufs = {{reinterpret_cast<void*>(in.address() + in_shift), x.size() * 2}};
      if (masked) bufs.push_back({count.ptr(), sizeof counts});
      bufs.push_back({reinterpret_cast<void*>(out.address() + out_shift), out_bytes});
      op->launch(bufs, tokens, stream.get(), {.expected_rows = masked ? tokens / 2 : 0});
      stream.synchronize();
      got.emplace_back(out_bytes);
      MOEJIT_CU(ctx.driver(), cuMemcpyDtoH(got.back().data(), out.address() + out_shift, out_bytes));
    }
    std::size_t differ = 0, first = 0;
    for (std::size_t i = 0; i < out_bytes; i += element) {
      if (std::memcmp(&got[0][i], &got[1][i], element) != 0 && differ++ == 0) first = i / element;
    }
    INFO(spec->canonical_json() << ": " << differ << " outputs differ, the first at " << first);
    CHECK(differ == 0);
  }
}
