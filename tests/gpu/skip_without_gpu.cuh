#pragma once
// The exhaustive checks' skip rule, as test_gpu's: where no GPU can run `kernel`, print why and
// exit 77, which CTest reports as "Skipped".

#include <cstdio>
#include <cstdlib>

template <class Kernel>
void skip_without_gpu(const char* test, Kernel kernel) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("SKIPPED: %s: no CUDA device here; it runs on an H200\n", test);
    std::exit(77);
  }
  cudaFuncAttributes attributes;
  if (cudaFuncGetAttributes(&attributes, kernel) != cudaSuccess) {
    std::printf("SKIPPED: %s: built for sm_90a and sm_100a, not for this GPU\n", test);
    std::exit(77);
  }
}
