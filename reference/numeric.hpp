#pragma once
// Bit-exact CPU conversions between fp32 and bf16/fp16 (round-to-nearest-even), and element
// access by dtype. The references round exactly where numerics.md says.

#include <moejit/dtype.hpp>

#include <cstddef>
#include <cstdint>

namespace moejit::reference {

float bf16_to_float(std::uint16_t bits) noexcept;
std::uint16_t float_to_bf16(float x) noexcept;
float half_to_float(std::uint16_t bits) noexcept;
std::uint16_t float_to_half(float x) noexcept;

/// x rounded to `t` (bf16, fp16 or fp32) and back.
float round_to(DType t, float x) noexcept;
/// Element `i` of a buffer of dtype `t`, as float (integers converted).
float load(DType t, const void* data, std::size_t i) noexcept;
/// Stores x, rounded to `t`.
void store(DType t, void* data, std::size_t i, float x) noexcept;

/// Distance in units in the last place of `t` between two values of `t` given as raw bits;
/// 0 for bitwise-equal values and for two NaNs, a large number when only one is NaN.
std::int64_t ulp_distance(DType t, const void* a, const void* b, std::size_t i) noexcept;

}  // namespace moejit::reference
