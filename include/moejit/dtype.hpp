#pragma once
/// Element types of the tensors moejit ops read and write.

#include <cstddef>
#include <optional>
#include <string_view>

namespace moejit {

enum class DType { f32, f16, bf16, i32, i64 };

/// The spec spelling: "fp32", "fp16", "bf16", "int32", "int64".
std::string_view spec_name(DType t) noexcept;
/// The NumPy spelling: "float32", "float16", "bfloat16", "int32", "int64".
std::string_view numpy_name(DType t) noexcept;
/// The CUDA C++ type used in generated code: "float", "__half", "__nv_bfloat16", ...
std::string_view cuda_name(DType t) noexcept;
std::size_t size_of(DType t) noexcept;
bool is_float(DType t) noexcept;
/// Parses the spec spelling.
std::optional<DType> parse_dtype(std::string_view name) noexcept;

}  // namespace moejit
