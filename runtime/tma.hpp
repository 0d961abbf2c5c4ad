#pragma once
// TMA descriptors (templates/tma_map.h) of row-major tensors of 16-bit elements, encoded through
// the driver for the sm_90a kernels' cp.async.bulk.tensor loads and stores.

#include <moejit/dtype.hpp>

#include "driver.hpp"
#include "templates/tma_map.h"

#include <cstdint>

namespace moejit::detail {

/// A descriptor of [rows, k] at base (rows k elements apart): boxes of 64 k (128 bytes, swizzled
/// 128 B, as the wgmma descriptors of templates/sm90.cuh read them) x box_rows; reads past the
/// tensor's rows fill zeros.
TmaMap tma_map(const Driver& driver, const void* base, std::int64_t k, std::int64_t rows, int box_rows, DType dtype);

}  // namespace moejit::detail
