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
__device__ __forceinline__ float sigmoid(float x) { return __fdiv_rn(1.0f, add(1.0f, expf(-x))); }

template <class T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

template <class T, int N>
__device__ __forceinline__ Vec<T, N> load_vec(const T* p) { return *reinterpret_cast<const Vec<T, N>*>(p); }
template <class T, int N>
__device__ __forceinline__ void store_vec(T* p, const Vec<T, N>& v) { *reinterpret_cast<Vec<T, N>*>(p) = v; }

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
