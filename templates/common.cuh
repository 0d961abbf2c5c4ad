#pragma once
// Shared device helpers for moejit templates: dtype conversions with explicit rounding, aligned
// vectors, and fp32 arithmetic that the compiler may not contract into FMAs (the CPU reference
// rounds after every operation, so the kernels must too).

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace moejit {

template <class T>
__device__ __forceinline__ float to_float(T x);
template <>
__device__ __forceinline__ float to_float<float>(float x) { return x; }
template <>
__device__ __forceinline__ float to_float<__half>(__half x) { return __half2float(x); }
template <>
__device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }

/// Round-to-nearest-even into T.
template <class T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) { return x; }
template <>
__device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

/// x rounded to T and back: a rounding point of numerics.md.
template <class T>
__device__ __forceinline__ float round_to(float x) { return to_float(from_float<T>(x)); }

// NOTE: __fmul_rn/__fadd_rn are never contracted into FMAs, so each product and sum is rounded
// exactly where numerics.md (and the CPU reference) rounds it.
__device__ __forceinline__ float mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float add(float a, float b) { return __fadd_rn(a, b); }
// NOTE: __frcp_rn(y) and __fdiv_rn(1.0f, y) are both 1/y correctly rounded (the same bits); the
// reciprocal is the shorter instruction sequence.
/// 1 + exp(-x), the sigmoid's denominator (>= 1, or NaN).
__device__ __forceinline__ float sigmoid_denominator(float x) { return add(1.0f, expf(-x)); }
__device__ __forceinline__ float sigmoid(float x) { return __frcp_rn(sigmoid_denominator(x)); }

/// 1/y correctly rounded for 1 <= y < 2^126 (the bits of __frcp_rn(y): tests/gpu/rcp_exhaustive.cu
/// checks every such y) by the reciprocal's fast path alone, without its range check and the
/// branch to its slow path. Wrong elsewhere (inf, NaN, results below the normal range): callers
/// test rcp_fast_ok(y) and redo those y with __frcp_rn, off the common path.
__device__ __forceinline__ float rcp_fast(float y) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(y));
  return __fmaf_rn(__fmaf_rn(-y, r, 1.0f), r, r);
}
__device__ __forceinline__ bool rcp_fast_ok(float y) { return y >= 1.0f && y < 0x1p126f; }

/// a / b correctly rounded (the bits of __fdiv_rn(a, b)) from y = __frcp_rn(b), for a divisor
/// shared by many quotients: one product and Markstein's correction (with y the correctly
/// rounded 1/b and q a faithful quotient, q + (a - b q) y rounds to a / b; the residual is exact
/// by FMA). Three instructions where __fdiv_rn takes ten and a range check. Valid for a = 0 and
/// 2^-100 <= |a| <= 2^100 with 1 <= b <= 2^24 (no quotient or residual leaves the normal range);
/// callers redo other a with __fdiv_rn. tests/gpu/div_rcp_sweep.cu compares it with __fdiv_rn
/// on every significand of a against 2^16 and more significands of b, and on random pairs.
__device__ __forceinline__ float div_by_rcp(float a, float b, float y) {
  const float q = __fmul_rn(a, y);
  return __fmaf_rn(__fmaf_rn(-q, b, a), y, q);
}
/// The smallest |a| div_by_rcp takes (besides 0); the largest is 1 / div_by_rcp_min().
__device__ __forceinline__ constexpr float div_by_rcp_min() { return 0x1p-100f; }
__device__ __forceinline__ bool div_by_rcp_ok(float a) {
  const float m = fabsf(a);
  return a == 0.0f || (m >= div_by_rcp_min() && m <= 1.0f / div_by_rcp_min());
}

// ---- an accurate tanhf in two parts ------------------------------------------------------------
// CUDA's tanhf (libdevice, CUDA 13), written out operation for operation so that a caller can
// skip the part it does not need: |x| < 0.6 takes an odd polynomial, |x| >= 0.6 takes
// 1 - 2 / (exp(2|x|) + 1) with the sign of x. tanh_small(x) alone is exact for |x| < 0.6
// (tanh_switch()); tanh_accurate(x) selects between both for any x (NaN and +-inf included) and
// returns what tanhf returns. Not tanh.approx: numerics.md asks for the accurate function.
// NOTE: a function, not a namespace-scope constant: a constant that device code takes by
// reference (an asm operand) is emitted under an internal name that NVRTC salts per compile, and
// the same contract would then give different cubin bytes.
__device__ __forceinline__ constexpr float tanh_switch() { return 0.6f; }  // 0x3F19999A, libdevice's switch point
__device__ __forceinline__ float tanh_small(float x) {
  const float x2 = __fmul_rn(x, x);
  float p = __fmaf_rn(0x1.01e104p-6f, x2, -0x1.ac795cp-5f);
  p = __fmaf_rn(p, x2, 0x1.10b282p-3f);
  p = __fmaf_rn(p, x2, -0x1.5553dap-2f);
  p = __fmaf_rn(p, x2, 0.0f);
  return __fmaf_rn(p, x, x);
}
__device__ __forceinline__ float tanh_large(float x) {
  const float ax = fabsf(x);
  float e, r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(__fmul_rn(ax, 0x1.715476p+1f)));
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(__fadd_rn(e, 1.0f)));
  const float t = ax >= 0x1.205968p+3f ? 1.0f : __fmaf_rn(r, -2.0f, 1.0f);
  return copysignf(t, x);
}
__device__ __forceinline__ float tanh_accurate(float x) {
  // NOTE: both parts, then a select: written as a ?: the compiler branches per element, which
  // diverges on mixed inputs and lengthens the per-call latency (SituGLU at T=128 2.0 -> 2.6 us).
  float r;
  asm("{\n\t.reg .pred p;\n\tsetp.ge.f32 p, %1, %2;\n\tselp.f32 %0, %3, %4, p;\n\t}"
      : "=f"(r)
      : "f"(fabsf(x)), "f"(tanh_switch()), "f"(tanh_large(x)), "f"(tanh_small(x)));
  return r;
}

template <class T, int kN>
struct alignas(sizeof(T) * kN) Vec {
  T v[kN];
};

/// 16 bytes of shared memory in one ld.shared.v4 that NVVM cannot rewrite: its vectorizer splits
/// plain float4 loads of the tail's epilogue one way or another from compile to compile (the
/// same source, different PTX and cubins).
__device__ __forceinline__ uint4 load_shared_u4(const void* p) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(static_cast<unsigned>(__cvta_generic_to_shared(p)))
               : "memory");
  return v;
}
/// Four floats of shared memory, as load_shared_u4 loads them.
__device__ __forceinline__ float4 load_shared_float4(const float* p) {
  const uint4 v = load_shared_u4(p);
  return make_float4(__uint_as_float(v.x), __uint_as_float(v.y), __uint_as_float(v.z), __uint_as_float(v.w));
}

template <class T, int kN>
__device__ __forceinline__ Vec<T, kN> load_vec(const T* p) { return *reinterpret_cast<const Vec<T, kN>*>(p); }
template <class T, int kN>
__device__ __forceinline__ void store_vec(T* p, const Vec<T, kN>& v) { *reinterpret_cast<Vec<T, kN>*>(p) = v; }

constexpr bool is_pow2(long long x) { return x > 0 && (x & (x - 1)) == 0; }

// Programmatic dependent launch (sm_90+). launch_dependents lets the next kernel of the stream
// (when launched with the PDL attribute) be scheduled now; wait_for_primary blocks until the
// previous kernel has finished and its writes are visible. Both are no-ops for a kernel launched
// without the attribute, so a kernel that starts with them is correct either way.
__device__ __forceinline__ void launch_dependents() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
__device__ __forceinline__ void wait_for_primary() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
/// The start of a kernel that reads or writes memory the previous kernel may touch: wait for the
/// previous kernel before the first load or store, then let the next one in. In that order at
/// most two kernels of a stream hold SM slots at once (this one and the next, waiting); letting
/// the next one in first cascades: later kernels' waiting blocks take the slots the running
/// kernel's own blocks still need (Kimi-K2 routing at T=128: 3.35 -> 4.87 us on the H200).
__device__ __forceinline__ void dependent_launch_prologue() {
  wait_for_primary();
  launch_dependents();
}

}  // namespace moejit
