#pragma once
// The sm_90a part the compiler lays kernels out for. Warmup runs with no GPU at hand, so these
// are the H100 / H200 SXM's, the largest sm_90 parts: one with fewer SMs runs a second wave of
// CTAs (correct, slower). Every sm_90 limit a tiling reads is here, not in the op that reads it.

#include <cstdint>

namespace moejit::detail::sm90 {

inline constexpr int kSms = 132;
inline constexpr int kSharedPerCta = 227 * 1024;  ///< opt-in dynamic shared memory of a CTA
inline constexpr std::int64_t kL2Bytes = 50LL << 20;

}  // namespace moejit::detail::sm90
