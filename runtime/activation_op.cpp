// Launcher of the activation op (templates/activation.cuh).
#include <moejit/error.hpp>

#include "compiler/ops/activation.hpp"
#include "kernel.hpp"
#include "op_loader.hpp"
#include "templates/activation_args.h"

#include <algorithm>

namespace moejit::detail {

namespace {

class ActivationOp final : public Op {
 public:
  ActivationOp(Context& context, std::shared_ptr<const ActivationSpec> spec)
      : Op(spec), spec_(*spec), sm_count_(context.device().sm_count), vec_(spec->vec()) {
    auto kernel = context.kernel(spec->contracts(context.device().arch).front());
    kernel->set_block({ActivationSpec::kThreads, 1, 1}, 0);
    kernel_ = std::move(kernel);
  }

 private:
  void do_launch(std::span<const Buffer> buffers, std::int64_t tokens, CUstream stream) const override {
    if (tokens == 0) return;
    const bool masked = spec_.layout == ActivationLayout::masked;
    const Buffer& in = buffers[0];
    const Buffer& out = buffers[masked ? 2 : 1];
    const int vec = vec_;
    const bool aligned = reinterpret_cast<std::uintptr_t>(in.ptr) % (static_cast<std::size_t>(vec) * size_of(spec_.dtype)) == 0 &&
                         reinterpret_cast<std::uintptr_t>(out.ptr) % (static_cast<std::size_t>(vec) * size_of(spec_.out_dtype)) == 0;
    const std::int64_t v = aligned ? vec : 1;
    const std::int64_t per_block = std::int64_t{ActivationSpec::kThreads} * ActivationSpec::kUnroll;
    const std::int64_t blocks = (tokens * (spec_.d / v) + per_block - 1) / per_block;
    ActivationArgs args{in.ptr, out.ptr, masked ? static_cast<const int*>(buffers[1].ptr) : nullptr, tokens,
                        aligned ? 1 : 0, 0};
    Dim3 grid;
    if (masked) {
      // Grid-stride over each expert's rows: enough blocks to fill the GPU a few times over,
      // whatever the (device-side) counts turn out to be.
      const std::int64_t target = std::max<std::int64_t>(1, (4 * sm_count_ + spec_.num_experts - 1) / spec_.num_experts);
      grid = {static_cast<unsigned>(std::min(blocks, target)), static_cast<unsigned>(spec_.num_experts), 1};
    } else {
      grid = {static_cast<unsigned>(std::min<std::int64_t>(blocks, 0x7fffffff)), 1, 1};
    }
    kernel_->launch(grid, args, stream);
  }

  const ActivationSpec& spec_;
  int sm_count_;
  int vec_;
  std::shared_ptr<const Kernel> kernel_;
};

}  // namespace

std::unique_ptr<Op> load_activation(Context& context, std::shared_ptr<const OpSpec> spec) {
  auto s = std::dynamic_pointer_cast<const ActivationSpec>(spec);
  if (!s) throw Error({.kind = ErrorKind::internal, .message = "not an activation spec"});
  return std::make_unique<ActivationOp>(context, std::move(s));
}

}  // namespace moejit::detail
