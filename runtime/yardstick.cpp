#include "yardstick.hpp"

#include "compiler/yardstick.hpp"
#include "kernel.hpp"
#include "templates/yardstick_args.h"

namespace moejit::detail {

Yardsticks measure_yardsticks(Context& context, const Stream& stream, std::size_t bytes, int calls, int replays) {
  const auto contract = yardstick_contract(context.device().arch);
  auto copy = context.kernel(contract, kYardstickCopy);
  auto read = context.kernel(contract, kYardstickRead);
  copy->set_block({kYardstickThreads, 1, 1});
  read->set_block({kYardstickThreads, 1, 1});
  const Driver& driver = context.driver();
  DeviceBuffer src(driver, bytes), dst(driver, bytes);
  // NOTE: a word repeated throughout folds to zero in the read kernel, which then never stores.
  MOEJIT_CU(driver, cuMemsetD32Async(src.address(), 0x3C5A96E1u, bytes / 4, stream.get()));
  const YardstickArgs args{src.ptr(), dst.ptr(), bytes / 16};
  const auto per_block = static_cast<unsigned long long>(kYardstickThreads) * kYardstickUnroll;
  const Dim3 grid{static_cast<unsigned>((args.vectors + per_block - 1) / per_block), 1, 1};
  const double copy_us = time_per_call_us(driver, stream, calls, replays, [&](int) { copy->launch(grid, args, stream.get()); });
  const double read_us = time_per_call_us(driver, stream, calls, replays, [&](int) { read->launch(grid, args, stream.get()); });
  const double b = static_cast<double>(bytes);
  return {.copy_bytes_per_s = 2 * b / (copy_us * 1e-6), .read_bytes_per_s = b / (read_us * 1e-6),
          .hbm_peak_bytes_per_s = context.device().hbm_peak_bytes_per_s};
}

}  // namespace moejit::detail
