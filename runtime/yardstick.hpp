#pragma once
// The ceilings every op's speed is reported against, measured on the device at hand with
// moejit's own yardstick kernels (compiler/yardstick.hpp), timed like the ops.

#include <moejit/context.hpp>

#include "device.hpp"

namespace moejit::detail {

struct Yardsticks {
  double copy_bytes_per_s = 0;  ///< SM copy, bytes read + written
  double read_bytes_per_s = 0;  ///< streaming read, bytes read
  double hbm_peak_bytes_per_s = 0;  ///< from the device's memory clock and bus width
};

/// Copies and reads `bytes` (1 GiB by default: far past L2) with the yardstick kernels,
/// `calls` launches per CUDA graph, the median of `replays` (performance.md's 20 and 7).
Yardsticks measure_yardsticks(Context& context, const Stream& stream, std::size_t bytes = std::size_t{1} << 30,
                              int calls = 20, int replays = 7);

}  // namespace moejit::detail
