// Launcher of the activation op (templates/activation.cuh).
#include <moejit/error.hpp>

#include "compiler/ops/activation.hpp"
#include "device.hpp"
#include "kernel.hpp"
#include "op_loader.hpp"
#include "templates/activation_args.h"

#include <algorithm>

namespace moejit::detail {

namespace {

// Up to this many output elements per SM and thread, latency (not bytes) sets the time: scalar
// is 15-20% faster there.
constexpr std::int64_t kScalarFill = 6;

// The table kernel from 64 outputs a byte of tables (4M for SituGLU's 64 KB): below that,
// copying the tables into every block's shared memory costs more than the lookups save.
constexpr std::int64_t kTableMinElementsPerByte = 64;
// Blocks an SM of the table kernel (its launch bounds: 64 KB of tables fit three times).
constexpr int kTableBlocksPerSm = 3;

// Issue-bound kinds stride at 32 blocks an SM, paying a block's fixed work less often (~4%);
// memory-bound ones lose by it.
std::int64_t dense_blocks_cap(ActivationKind kind, int sm_count) {
  const bool issue_bound = kind == ActivationKind::situ || kind == ActivationKind::gelu;
  return issue_bound ? std::int64_t{32} * sm_count : std::int64_t{0x7fffffff};
}

class ActivationOp final : public Op {
 public:
  ActivationOp(Context& context, std::shared_ptr<const ActivationSpec> spec)
      : Op(spec),
        spec_(*spec),
        sm_count_(context.device().sm_count),
        vec_(activation_vec(*spec)),
        pdl_(context.options().programmatic_launch),
        dense_cap_(dense_blocks_cap(spec->kind, sm_count_)) {
    const auto contract = contracts(*spec, context.device().arch).front();
    auto load = [&](std::string_view role) {
      auto kernel = context.kernel(contract, role);
      kernel->set_block({kActivationThreads, 1, 1});
      return kernel;
    };
    narrow_ = load(kActivationNarrow);
    wide_ = load(kActivationWide);
    if (contract.has_kernel(kActTable)) load_tables(context, contract);
  }

 private:
  void do_launch(std::span<const Buffer> buffers, std::int64_t tokens, CUstream stream, const LaunchHints& hints) const override {
    if (tokens == 0) return;
    const bool masked = spec_.layout == ActivationLayout::masked;
    const Buffer& in = buffers[0];
    const Buffer& out = buffers[masked ? 2 : 1];
    const std::int64_t rows = tokens * (masked ? spec_.num_experts : 1);
    const std::int64_t threads = kActivationThreads, unroll = kActivationUnroll;
    const std::int64_t fill = kScalarFill * std::int64_t{sm_count_} * threads;
    // Vectors unless the pointers are not aligned for them or the output is too small to fill
    // the GPU with one element per thread (then per-thread latency, not bytes, sets the time).
    const std::size_t vec = static_cast<std::size_t>(vec_);
    const bool aligned = reinterpret_cast<std::uintptr_t>(in.ptr) % (vec * size_of(spec_.dtype)) == 0 &&
                         reinterpret_cast<std::uintptr_t>(out.ptr) % (vec * size_of(spec_.out_dtype)) == 0;
    const bool vectorized = aligned && rows * spec_.d > fill;
    const std::int64_t chunks = tokens * (spec_.d / (vectorized ? vec_ : 1));  // per expert when masked
    // kUnroll chunks per thread where that still fills the GPU twice, else one chunk per thread.
    const std::int64_t unrolled = (chunks + threads * unroll - 1) / (threads * unroll);
    const std::int64_t single = (chunks + threads - 1) / threads;
    // The kernel of 32-bit element offsets where they all fit (the largest is below rows * 2d).
    const bool narrow = rows * 2 * spec_.d < (std::int64_t{1} << 31);
    ActivationArgs args{in.ptr, out.ptr, masked ? static_cast<const int*>(buffers[1].ptr) : nullptr, tokens,
                        vectorized ? 1 : 0};
    // By tables where they pay: dense at enough outputs; masked where the caller's expected rows
    // say there are enough (without a hint the counts are unknown and the computed path runs).
    const std::int64_t expected = masked && hints.expected_rows > 0 ? std::min(hints.expected_rows, tokens) : 0;
    const std::int64_t table_min = kTableMinElementsPerByte * static_cast<std::int64_t>(tables_.bytes());
    if (table_ && vectorized && narrow && (masked ? expected * spec_.num_experts : rows) * spec_.d >= table_min) {
      args.table = tables_.ptr();
      const std::int64_t resident = std::int64_t{kTableBlocksPerSm} * sm_count_;
      Dim3 grid{static_cast<unsigned>(std::min(single, resident)), 1, 1};
      if (masked) {
        const std::int64_t per_expert = std::max<std::int64_t>(1, resident / spec_.num_experts);
        grid = {static_cast<unsigned>(std::clamp<std::int64_t>(expected * (spec_.d / vec_) / threads, 1, per_expert)),
                static_cast<unsigned>(spec_.num_experts), 1};
      }
      table_->launch(grid, args, stream, pdl_ || hints.chained);
      return;
    }
    Dim3 grid;
    if (masked) {
      // Counts live on the device: stride over each expert's rows, 32 blocks an SM in all, at most
      // a half-full expert's need.
      const std::int64_t target = std::max<std::int64_t>(1, (32 * sm_count_ + spec_.num_experts - 1) / spec_.num_experts);
      const std::int64_t half_full = (single + 1) / 2;
      // With the caller's expected rows an expert: one pass a thread over an expert that holds them.
      const std::int64_t blocks = expected > 0 ? (expected * (spec_.d / (vectorized ? vec_ : 1)) + threads - 1) / threads
                                               : std::min(half_full, target);
      grid = {static_cast<unsigned>(std::max<std::int64_t>(blocks, 1)), static_cast<unsigned>(spec_.num_experts), 1};
    } else {
      const std::int64_t blocks = std::max(unrolled, std::min(single, fill / threads));
      grid = {static_cast<unsigned>(std::min<std::int64_t>(blocks, dense_cap_)), 1, 1};
    }
    (narrow ? narrow_ : wide_)->launch(grid, args, stream, pdl_ || hints.chained);
  }

  // Computes the tables once, with the kernels' own device code (the same bits as computing).
  void load_tables(Context& context, const Contract& contract) {
    const auto& driver = context.driver();
    auto init = context.kernel(contract, kActTableInit);
    init->set_block({256, 1, 1});
    const unsigned bytes = act_table_bytes(spec_);
    tables_ = DeviceBuffer(driver, bytes);
    ActivationArgs args{};
    args.out = tables_.ptr();
    Stream stream(driver);
    init->launch({64, 1, 1}, args, stream.get());
    stream.synchronize();
    auto table = context.kernel(contract, kActTable);
    table->set_block({kActivationThreads, 1, 1});
    table_ = std::move(table);
  }

  const ActivationSpec& spec_;
  int sm_count_;
  int vec_;
  bool pdl_;  ///< programmatic dependent launch (Options::programmatic_launch)
  std::int64_t dense_cap_;  ///< the dense layout's most blocks (dense_blocks_cap)
  std::shared_ptr<const Kernel> narrow_, wide_;  ///< 32-bit element offsets, 64-bit ones
  std::shared_ptr<const Kernel> table_;          ///< by tables, where the contract has the kernel
  DeviceBuffer tables_;
};

}  // namespace

std::unique_ptr<Op> load_activation(Context& context, std::shared_ptr<const OpSpec> spec) {
  auto s = std::dynamic_pointer_cast<const ActivationSpec>(spec);
  if (!s) throw Error({.kind = ErrorKind::internal, .message = "not an activation spec"});
  return std::make_unique<ActivationOp>(context, std::move(s));
}

}  // namespace moejit::detail
