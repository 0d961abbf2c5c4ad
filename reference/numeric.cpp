#include "numeric.hpp"

#include <cmath>
#include <cstring>
#include <limits>

namespace moejit::reference {

namespace {

std::uint32_t bits_of(float x) noexcept {
  std::uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

float float_of(std::uint32_t b) noexcept {
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

// Maps float bits to integers that order like the values (for ulp distances).
std::int64_t ordered(std::uint32_t bits, int sign_bit) noexcept {
  const std::uint32_t sign = 1u << sign_bit;
  const auto magnitude = static_cast<std::int64_t>(bits & (sign - 1));
  return (bits & sign) ? -magnitude : magnitude;
}

}  // namespace

float bf16_to_float(std::uint16_t bits) noexcept { return float_of(static_cast<std::uint32_t>(bits) << 16); }

std::uint16_t float_to_bf16(float x) noexcept {
  const std::uint32_t b = bits_of(x);
  if (std::isnan(x)) return static_cast<std::uint16_t>((b >> 16) | 0x0040);  // quiet, keep sign
  const std::uint32_t rounding = 0x7FFF + ((b >> 16) & 1);
  return static_cast<std::uint16_t>((b + rounding) >> 16);
}

float half_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1F;
  const std::uint32_t man = h & 0x3FF;
  if (exp == 0x1F) return float_of(sign | 0x7F800000 | (man << 13));
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(man), -24);  // subnormal (or zero)
    return sign ? -v : v;
  }
  return float_of(sign | ((exp + 112) << 23) | (man << 13));
}

std::uint16_t float_to_half(float x) noexcept {
  const std::uint32_t b = bits_of(x);
  const auto sign = static_cast<std::uint16_t>((b >> 16) & 0x8000);
  if (std::isnan(x)) return static_cast<std::uint16_t>(sign | 0x7E00);
  const float a = std::fabs(x);
  if (a >= 65520.0f) return static_cast<std::uint16_t>(sign | 0x7C00);  // rounds to infinity
  if (a < 6.103515625e-05f) {
    // Subnormal half: a multiple of 2^-24; nearbyint rounds half to even.
    const float q = std::nearbyint(a * 16777216.0f);
    return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(q));
  }
  const std::uint32_t ab = bits_of(a);
  const std::uint32_t exp = (ab >> 23) - 112;
  std::uint32_t man = ab & 0x7FFFFF;
  std::uint32_t h = (exp << 10) | (man >> 13);
  const std::uint32_t rest = man & 0x1FFF;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;  // carries into the exponent as needed
  return static_cast<std::uint16_t>(sign | h);
}

float round_to(DType t, float x) noexcept {
  switch (t) {
    case DType::bf16: return bf16_to_float(float_to_bf16(x));
    case DType::f16: return half_to_float(float_to_half(x));
    default: return x;
  }
}

float load(DType t, const void* data, std::size_t i) noexcept {
  switch (t) {
    case DType::f32: return static_cast<const float*>(data)[i];
    case DType::bf16: return bf16_to_float(static_cast<const std::uint16_t*>(data)[i]);
    case DType::f16: return half_to_float(static_cast<const std::uint16_t*>(data)[i]);
    case DType::i32: return static_cast<float>(static_cast<const std::int32_t*>(data)[i]);
    case DType::i64: return static_cast<float>(static_cast<const std::int64_t*>(data)[i]);
  }
  return 0;
}

void store(DType t, void* data, std::size_t i, float x) noexcept {
  switch (t) {
    case DType::f32: static_cast<float*>(data)[i] = x; break;
    case DType::bf16: static_cast<std::uint16_t*>(data)[i] = float_to_bf16(x); break;
    case DType::f16: static_cast<std::uint16_t*>(data)[i] = float_to_half(x); break;
    case DType::i32: static_cast<std::int32_t*>(data)[i] = static_cast<std::int32_t>(x); break;
    case DType::i64: static_cast<std::int64_t*>(data)[i] = static_cast<std::int64_t>(x); break;
  }
}

std::int64_t ulp_distance(DType t, const void* a, const void* b, std::size_t i) noexcept {
  constexpr std::int64_t kFar = std::numeric_limits<std::int32_t>::max();
  const float fa = load(t, a, i), fb = load(t, b, i);
  if (std::isnan(fa) || std::isnan(fb)) return std::isnan(fa) && std::isnan(fb) ? 0 : kFar;
  switch (t) {
    case DType::f32: {
      const auto d = ordered(bits_of(fa), 31) - ordered(bits_of(fb), 31);
      return d < 0 ? -d : d;
    }
    case DType::bf16:
    case DType::f16: {
      const auto ba = static_cast<const std::uint16_t*>(a)[i], bb = static_cast<const std::uint16_t*>(b)[i];
      const auto d = ordered(ba, 15) - ordered(bb, 15);
      return d < 0 ? -d : d;
    }
    default: {
      return fa == fb ? 0 : kFar;
    }
  }
}

}  // namespace moejit::reference
