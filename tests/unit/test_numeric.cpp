// Bit-exact conversions between fp32 and bf16/fp16, element access by dtype, and ulp distances
// (reference/numeric.cpp).
#include "reference/numeric.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

using namespace moejit;
using namespace moejit::reference;

namespace {

std::uint32_t bits(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}

}  // namespace

TEST_CASE("bf16 and fp16 round trips are exact for every bit pattern", "[reference][numeric]") {
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const auto h = static_cast<std::uint16_t>(b);
    const float fb = bf16_to_float(h);
    if (!std::isnan(fb)) CHECK(float_to_bf16(fb) == h);
    const float fh = half_to_float(h);
    if (!std::isnan(fh)) CHECK(float_to_half(fh) == h);
  }
}

TEST_CASE("fp32 to bf16/fp16 rounds to nearest even", "[reference][numeric]") {
  CHECK(float_to_bf16(1.0f) == 0x3F80);
  CHECK(float_to_bf16(bf16_to_float(0x3F80) + std::ldexp(1.0f, -8)) == 0x3F80);   // tie, to even
  CHECK(float_to_bf16(bf16_to_float(0x3F81) + std::ldexp(1.0f, -8)) == 0x3F82);   // tie, to even
  CHECK(float_to_bf16(std::numeric_limits<float>::infinity()) == 0x7F80);
  CHECK(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
  CHECK(float_to_half(65504.0f) == 0x7BFF);
  CHECK(float_to_half(65520.0f) == 0x7C00);
  CHECK(float_to_half(5.960464477539063e-08f) == 0x0001);  // smallest subnormal
  CHECK(float_to_half(2.980232238769531e-08f) == 0x0000);  // half of it: tie to even (0)
  CHECK(float_to_half(-0.0f) == 0x8000);
#if defined(__FLT16_MANT_DIG__)
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::uint32_t> any;
  for (int i = 0; i < 200000; ++i) {
    std::uint32_t b = any(rng);
    float x;
    std::memcpy(&x, &b, 4);
    if (std::isnan(x)) continue;
    const _Float16 h = static_cast<_Float16>(x);
    std::uint16_t hb;
    std::memcpy(&hb, &h, 2);
    INFO("x bits " << bits(x));
    CHECK(float_to_half(x) == hb);
  }
#endif
}

TEST_CASE("ulp distances", "[reference][numeric]") {
  const std::uint16_t a[] = {0x3F80, 0x3F80, 0x7FC0, 0x8001};
  const std::uint16_t b[] = {0x3F80, 0x3F81, 0x7FC0, 0x0001};
  CHECK(ulp_distance(DType::bf16, a, b, 0) == 0);
  CHECK(ulp_distance(DType::bf16, a, b, 1) == 1);
  CHECK(ulp_distance(DType::bf16, a, b, 2) == 0);  // both NaN
  CHECK(ulp_distance(DType::bf16, a, b, 3) == 2);  // across zero
}

TEST_CASE("fp32 ulp distances order values across zero; a NaN is far from any number", "[reference][numeric]") {
  const float a[] = {1.0f, 1.0f, -0.0f, std::nanf(""), std::nanf(""), -std::numeric_limits<float>::denorm_min()};
  const float b[] = {1.0f, std::nextafter(1.0f, 2.0f), 0.0f, 1.0f, -std::nanf(""), std::numeric_limits<float>::denorm_min()};
  CHECK(ulp_distance(DType::f32, a, b, 0) == 0);
  CHECK(ulp_distance(DType::f32, a, b, 1) == 1);
  CHECK(ulp_distance(DType::f32, a, b, 2) == 0);  // -0 and +0 are one value
  CHECK(ulp_distance(DType::f32, a, b, 3) == std::numeric_limits<std::int32_t>::max());
  CHECK(ulp_distance(DType::f32, a, b, 4) == 0);  // two NaNs, whatever their bits
  CHECK(ulp_distance(DType::f32, a, b, 5) == 2);
  const std::int32_t i[] = {7, 7, -3};
  const std::int32_t j[] = {7, 8, -3};
  CHECK(ulp_distance(DType::i32, i, j, 0) == 0);
  CHECK(ulp_distance(DType::i32, i, j, 1) == std::numeric_limits<std::int32_t>::max());
  CHECK(ulp_distance(DType::i32, i, j, 2) == 0);
}

TEST_CASE("store rounds to the dtype and load reads it back as float", "[reference][numeric]") {
  const float x = 1.0f + 0x1p-8f + 0x1p-20f;  // just above the midpoint of two bf16 neighbours
  std::uint16_t h[1];
  store(DType::bf16, h, 0, x);
  CHECK(h[0] == 0x3F81);
  CHECK(load(DType::bf16, h, 0) == round_to(DType::bf16, x));
  store(DType::f16, h, 0, x);
  CHECK(load(DType::f16, h, 0) == round_to(DType::f16, x));
  CHECK(round_to(DType::f32, x) == x);
  float f[1];
  store(DType::f32, f, 0, x);
  CHECK(bits(load(DType::f32, f, 0)) == bits(x));
  std::int32_t i[2];
  store(DType::i32, i, 1, -5.0f);
  CHECK(i[1] == -5);
  CHECK(load(DType::i32, i, 1) == -5.0f);
  std::int64_t l[1];
  store(DType::i64, l, 0, 4096.0f);
  CHECK(l[0] == 4096);
  CHECK(load(DType::i64, l, 0) == 4096.0f);
}

TEST_CASE("fp16 subnormals and the largest finite value convert exactly", "[reference][numeric]") {
  CHECK(half_to_float(0x0001) == std::ldexp(1.0f, -24));
  CHECK(half_to_float(0x03FF) == std::ldexp(1023.0f, -24));
  CHECK(half_to_float(0x8001) == -std::ldexp(1.0f, -24));
  CHECK(half_to_float(0x7BFF) == 65504.0f);
  CHECK(std::isinf(half_to_float(0x7C00)));
  CHECK(float_to_half(std::ldexp(1023.0f, -24)) == 0x03FF);
  CHECK(float_to_half(-std::numeric_limits<float>::infinity()) == 0xFC00);
}
