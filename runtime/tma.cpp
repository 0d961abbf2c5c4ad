#include "tma.hpp"

#include <cstring>

namespace moejit::detail {

TmaMap tma_map(const Driver& driver, const void* base, std::int64_t k, std::int64_t rows, int box_rows, DType dtype) {
  CUtensorMap map;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(k), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(k) * 2};
  const cuuint32_t box[2] = {64, static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  const auto type = dtype == DType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  MOEJIT_CU(driver, cuTensorMapEncodeTiled(&map, type, 2, const_cast<void*>(base), dims, strides, box, element_strides,
                                           CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                           CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  TmaMap out;
  static_assert(sizeof(out) == sizeof(map));
  std::memcpy(&out, &map, sizeof map);
  return out;
}

}  // namespace moejit::detail
