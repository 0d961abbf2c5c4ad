// Every fp32 input: templates/common.cuh's tanh_accurate against CUDA's tanhf, bit for bit, and
// tanh_small against tanhf below the switch point. Built by CMake where nvcc exists and run by
// CTest (gpu.tanh_exhaustive). Prints the mismatch count (and the first few) and exits 1 on any
// mismatch, 77 (skipped) where no GPU runs it.
#include "common.cuh"
#include "skip_without_gpu.cuh"

#include <cstdio>

__global__ void sweep(unsigned long long* bad, unsigned* first) {
  for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < (1ull << 32); i += gridDim.x * blockDim.x) {
    const float x = __uint_as_float(static_cast<unsigned>(i));
    const float ref = tanhf(x);
    const float got = moejit::tanh_accurate(x);
    bool ok = __float_as_uint(ref) == __float_as_uint(got) || (ref != ref && got != got);
    if (fabsf(x) < moejit::tanh_switch()) ok = ok && __float_as_uint(moejit::tanh_small(x)) == __float_as_uint(ref);
    if (!ok) {
      const unsigned long long n = atomicAdd(bad, 1ull);
      if (n < 8) first[n] = static_cast<unsigned>(i);
    }
  }
}

int main() {
  skip_without_gpu("tanh_exhaustive", sweep);
  unsigned long long* bad;
  unsigned* first;
  cudaMallocManaged(&bad, sizeof(*bad));
  cudaMallocManaged(&first, 8 * sizeof(*first));
  *bad = 0;
  sweep<<<132 * 16, 256>>>(bad, first);
  if (cudaDeviceSynchronize() != cudaSuccess) {
    std::printf("tanh_exhaustive: CUDA error\n");
    return 2;
  }
  std::printf("tanh_exhaustive: %llu of 2^32 inputs differ from tanhf\n", *bad);
  for (unsigned long long i = 0; i < *bad && i < 8; ++i) {
    std::printf("  x = %a (0x%08x)\n", static_cast<double>(__builtin_bit_cast(float, first[i])), first[i]);
  }
  return *bad == 0 ? 0 : 1;
}
