#pragma once
// Yardsticks: the ceilings `moejit bench` reports every op against, compiled and cached like any
// op (measuring them is also a self-test of the pipeline).
// * copy: an SM kernel streaming one buffer into another in 16-byte vectors, all of a thread's
//   loads issued before its stores -- what an elementwise op can reach;
// * read: the same loads folded into one word a thread, stored only on a value no input holds --
//   what a kernel that streams its operands (a decode GEMM's weights) can reach.
// NOTE: a copy captured as a graph memcpy node runs on the copy engine (~2.75 TB/s on an H200,
// about 2/3 of what the SMs stream): never a ceiling for kernels.

#include "yardstick_args.h"

namespace moejit {

template <class Config>
__global__ void __launch_bounds__(Config::kThreads) yardstick_copy_kernel(YardstickArgs a) {
  constexpr int kThreads = Config::kThreads, kUnroll = Config::kUnroll;
  const auto* __restrict__ src = static_cast<const uint4*>(a.src);
  auto* __restrict__ dst = static_cast<uint4*>(a.dst);
  const unsigned long long first = static_cast<unsigned long long>(blockIdx.x) * (kThreads * kUnroll) + threadIdx.x;
  uint4 v[kUnroll];
#pragma unroll
  for (int i = 0; i < kUnroll; ++i) {
    const unsigned long long j = first + static_cast<unsigned long long>(i) * kThreads;
    if (j < a.vectors) v[i] = src[j];
  }
#pragma unroll
  for (int i = 0; i < kUnroll; ++i) {
    const unsigned long long j = first + static_cast<unsigned long long>(i) * kThreads;
    if (j < a.vectors) dst[j] = v[i];
  }
}

template <class Config>
__global__ void __launch_bounds__(Config::kThreads) yardstick_read_kernel(YardstickArgs a) {
  constexpr int kThreads = Config::kThreads, kUnroll = Config::kUnroll;
  const auto* __restrict__ src = static_cast<const uint4*>(a.src);
  const unsigned long long first = static_cast<unsigned long long>(blockIdx.x) * (kThreads * kUnroll) + threadIdx.x;
  uint4 v[kUnroll];
#pragma unroll
  for (int i = 0; i < kUnroll; ++i) {
    const unsigned long long j = first + static_cast<unsigned long long>(i) * kThreads;
    v[i] = j < a.vectors ? src[j] : make_uint4(0, 0, 0, 0);
  }
  unsigned x = 0;
#pragma unroll
  for (int i = 0; i < kUnroll; ++i) x ^= v[i].x ^ v[i].y ^ v[i].z ^ v[i].w;
  // NOTE: the store depends on every load, so none is dropped; the caller fills src so that no
  // thread's fold has this value and nothing is ever written.
  if (x == Config::kNeverFolded) static_cast<unsigned*>(a.dst)[blockIdx.x * kThreads + threadIdx.x] = x;
}

}  // namespace moejit
