// Op::launch's checks, before any GPU work: the token count (negative, 2^31 and above -- the
// kernels index tokens in 32 bits), unbound, too-small and misaligned buffers (to the element, or to
// 16 bytes where the kernels access 16 bytes at a time), bad hints. A test op records whether its
// kernel launch was reached; no GPU is needed.
#include <moejit/error.hpp>
#include <moejit/op.hpp>
#include <moejit/spec.hpp>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <vector>

using namespace moejit;

namespace {

class RecordingOp final : public Op {
 public:
  explicit RecordingOp(std::shared_ptr<const OpSpec> spec) : Op(std::move(spec)) {}
  mutable int launches = 0;
  mutable std::int64_t last_tokens = -1;

 private:
  void do_launch(std::span<const Buffer>, std::int64_t tokens, CUstream, const LaunchHints&) const override {
    ++launches;
    last_tokens = tokens;
  }
};

std::shared_ptr<const OpSpec> routing() {
  return parse_spec(R"({"op": "routing", "num_experts": 256, "topk": 8, "n_group": 8, "topk_group": 4,
                        "scoring": "sigmoid", "bias": "fp32"})",
                    "t.json")
      .ops[0];
}

// Buffers that hold `tokens` tokens of every tensor (never dereferenced: the pointers only need
// to be non-null).
std::vector<Buffer> buffers_for(const Op& op, std::int64_t tokens) {
  alignas(16) static char storage[16];
  std::vector<Buffer> b;
  for (const auto& t : op.tensors()) b.push_back({storage, t.bytes_for(tokens)});
  return b;
}

ErrorKind kind_of(const Op& op, std::span<const Buffer> b, std::int64_t tokens) {
  try {
    op.launch(b, tokens, nullptr);
  } catch (const Error& e) {
    return e.kind();
  }
  return ErrorKind::internal;  // no error: the callers expect one
}

}  // namespace

TEST_CASE("launch passes a valid call through to the kernel", "[op]") {
  RecordingOp op(routing());
  const auto b = buffers_for(op, 16);
  op.launch(b, 16, nullptr);
  op.launch(b, 0, nullptr);
  CHECK(op.launches == 2);
  CHECK(op.last_tokens == 0);
}

TEST_CASE("launch refuses token counts outside 0 .. 2^31 - 1 before any launch", "[op]") {
  RecordingOp op(routing());
  const auto small = buffers_for(op, 1);
  CHECK(kind_of(op, small, -1) == ErrorKind::input);
  // 2^31 tokens: refused for the count itself, whatever the buffers (these claim enough bytes).
  constexpr std::int64_t kLimit = std::int64_t{1} << 31;
  std::vector<Buffer> huge = small;
  for (auto& b : huge) b.bytes = static_cast<std::size_t>(-1);
  CHECK(kind_of(op, huge, kLimit) == ErrorKind::input);
  CHECK(kind_of(op, huge, kLimit + 5) == ErrorKind::input);
  CHECK(op.launches == 0);
  try {
    op.launch(huge, kLimit, nullptr);
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("token count out of range") && Catch::Contains("2147483648"));
  }
  op.launch(huge, kLimit - 1, nullptr);  // the largest count the kernels index
  CHECK(op.launches == 1);
}

TEST_CASE("launch refuses unbound and too-small buffers, naming the tensor", "[op]") {
  RecordingOp op(routing());
  auto b = buffers_for(op, 33);
  b[0].bytes -= 1;  // logits one byte short of 33 tokens
  try {
    op.launch(b, 33, nullptr);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::input);
    CHECK_THAT(e.what(), Catch::Contains("too small for 33 tokens") && Catch::Contains(op.tensors()[0].name));
  }
  CHECK(kind_of(op, b, 32) == ErrorKind::internal);  // 32 tokens fit: launched
  b[0].bytes += 1;
  b[1].ptr = nullptr;  // the bias is not optional here
  CHECK(kind_of(op, b, 33) == ErrorKind::input);
  CHECK(kind_of(op, std::span<const Buffer>(b).first(2), 1) == ErrorKind::usage);  // one buffer per tensor
  CHECK(op.launches == 1);
}

TEST_CASE("launch refuses a buffer the kernels access 16 bytes at a time off 16-byte alignment", "[op]") {
  const auto experts = parse_spec(R"({"op": "experts", "hidden": 256, "intermediate": 128, "num_experts": 8, "topk": 2, "activation": {"kind": "silu"}})",
                                  "t.json")
                           .ops[0];
  RecordingOp op(experts);
  std::vector<std::string> vector_tensors;
  for (const auto& t : op.tensors()) {
    if (t.align == kVectorAlign) vector_tensors.push_back(t.name);
  }
  CHECK(vector_tensors == std::vector<std::string>{"x", "w13", "w2", "y"});
  for (std::size_t i = 0; i < op.tensors().size(); ++i) {
    auto b = buffers_for(op, 4);
    b[i].ptr = static_cast<char*>(b[i].ptr) + 4;  // a whole element (and float) in, 16-byte alignment lost
    const auto& t = op.tensors()[i];
    INFO(t.name);
    if (t.align != kVectorAlign) {
      CHECK(kind_of(op, b, 4) == ErrorKind::internal);  // launched
      continue;
    }
    try {
      op.launch(b, 4, nullptr);
      FAIL("launched");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::input);
      CHECK(e.fields().pointer == t.name);
      CHECK_THAT(e.what(), Catch::Contains("is not aligned for the kernels' vector accesses") && Catch::Contains("a multiple of 16 bytes"));
    }
  }
  // The latent tail at tp 1 takes S and out at any element address (its up projection reads them
  // element by element there); its multi-GPU paths do not.
  const auto tail = [](int tp) {
    return parse_spec(fmt::format(R"({{"op": "latent_tail", "tp_size": {}, "hidden": 1024, "latent": 512}})", tp), "t.json").ops[0];
  };
  for (const auto& t : tail(1)->tensors()) {
    INFO(t.name);
    CHECK(t.align == (t.name == "shared" || t.name == "out" ? 0 : kVectorAlign));
  }
  for (const auto& t : tail(2)->tensors()) CHECK(t.align == kVectorAlign);
  RecordingOp tp1(tail(1));
  auto b = buffers_for(tp1, 4);
  b[1].ptr = static_cast<char*>(b[1].ptr) + 2;  // shared
  b[4].ptr = static_cast<char*>(b[4].ptr) + 2;  // out
  CHECK(kind_of(tp1, b, 4) == ErrorKind::internal);  // launched
  b[0].ptr = static_cast<char*>(b[0].ptr) + 2;  // routed
  CHECK(kind_of(tp1, b, 4) == ErrorKind::input);
}

TEST_CASE("launch refuses a buffer not aligned to its element and a negative hint", "[op]") {
  RecordingOp op(routing());
  auto b = buffers_for(op, 4);
  b[0].ptr = static_cast<char*>(b[0].ptr) + 2;  // fp32 logits two bytes in
  CHECK(kind_of(op, b, 4) == ErrorKind::input);
  try {
    op.launch(b, 4, nullptr);
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("not aligned to its element") && Catch::Contains("a multiple of 4 bytes"));
  }
  const auto good = buffers_for(op, 4);
  CHECK_THROWS_AS(op.launch(good, 4, nullptr, {.expected_rows = -1}), Error);
  CHECK(op.launches == 0);
}
