#include <moejit/dtype.hpp>

namespace moejit {

std::string_view spec_name(DType t) noexcept {
  switch (t) {
    case DType::f32: return "fp32";
    case DType::f16: return "fp16";
    case DType::bf16: return "bf16";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
  }
  return "?";
}

std::string_view numpy_name(DType t) noexcept {
  switch (t) {
    case DType::f32: return "float32";
    case DType::f16: return "float16";
    case DType::bf16: return "bfloat16";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
  }
  return "?";
}

std::string_view cuda_name(DType t) noexcept {
  switch (t) {
    case DType::f32: return "float";
    case DType::f16: return "__half";
    case DType::bf16: return "__nv_bfloat16";
    case DType::i32: return "int";
    case DType::i64: return "long long";
  }
  return "?";
}

std::size_t size_of(DType t) noexcept {
  switch (t) {
    case DType::f16:
    case DType::bf16: return 2;
    case DType::f32:
    case DType::i32: return 4;
    case DType::i64: return 8;
  }
  return 0;
}

bool is_float(DType t) noexcept { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }

std::optional<DType> parse_dtype(std::string_view name) noexcept {
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i64}) {
    if (spec_name(t) == name) return t;
  }
  return std::nullopt;
}

}  // namespace moejit
