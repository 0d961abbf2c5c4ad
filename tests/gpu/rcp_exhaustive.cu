// Every fp32 y in [1, 2^126): templates/common.cuh's rcp_fast against CUDA's __frcp_rn, bit for
// bit (the range rcp_fast_ok admits; the routing kernels' sigmoid relies on it). Built by CMake
// where nvcc exists and run by CTest (gpu.rcp_exhaustive). Prints the mismatch count (and the
// first few) and exits 1 on any mismatch, 77 (skipped) where no GPU runs it.
#include "common.cuh"
#include "skip_without_gpu.cuh"

#include <cstdio>

constexpr unsigned kFirst = 0x3f800000u;  // 1.0f
constexpr unsigned kEnd = 0x7e800000u;    // 2^126

__global__ void sweep(unsigned long long* bad, unsigned* first, unsigned long long* checked) {
  unsigned long long n = 0;
  for (unsigned long long i = kFirst + blockIdx.x * blockDim.x + threadIdx.x; i < kEnd; i += gridDim.x * blockDim.x) {
    const float y = __uint_as_float(static_cast<unsigned>(i));
    ++n;
    if (!moejit::rcp_fast_ok(y) || __float_as_uint(moejit::rcp_fast(y)) != __float_as_uint(__frcp_rn(y))) {
      const unsigned long long k = atomicAdd(bad, 1ull);
      if (k < 8) first[k] = static_cast<unsigned>(i);
    }
  }
  atomicAdd(checked, n);
}

int main() {
  skip_without_gpu("rcp_exhaustive", sweep);
  unsigned long long *bad, *checked;
  unsigned* first;
  cudaMallocManaged(&bad, sizeof(*bad));
  cudaMallocManaged(&checked, sizeof(*checked));
  cudaMallocManaged(&first, 8 * sizeof(*first));
  *bad = 0;
  *checked = 0;
  sweep<<<132 * 16, 256>>>(bad, first, checked);
  if (cudaDeviceSynchronize() != cudaSuccess) {
    std::printf("rcp_exhaustive: CUDA error\n");
    return 2;
  }
  std::printf("rcp_exhaustive: %llu of %llu inputs in [1, 2^126) differ from __frcp_rn\n", *bad, *checked);
  for (unsigned long long i = 0; i < *bad && i < 8; ++i) {
    std::printf("  y = %a (0x%08x)\n", static_cast<double>(__builtin_bit_cast(float, first[i])), first[i]);
  }
  return *bad == 0 && *checked == kEnd - kFirst ? 0 : 1;
}
