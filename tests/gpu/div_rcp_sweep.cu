// templates/common.cuh's div_by_rcp(a, b, __frcp_rn(b)) against CUDA's __fdiv_rn(a, b), bit for
// bit, over the range div_by_rcp_ok admits with 1 <= b <= 2^24 (the routing kernels' softmax
// divides every exp(x - max) in [0, 1] by the row's sum in [1, E]). Built by CMake where nvcc
// exists and run by CTest (gpu.div_rcp_sweep).
// Away from the ends of the exponent range a quotient's rounding depends only on the
// significands, so part 1 takes every significand of a (2^23, a in [1, 2)) against 2^16
// significands of b spread over [1, 2) plus the 4096 at each end; part 2 takes random pairs over
// the whole admitted range (a in [2^-100, 1] and b in [1, 2^24], exponents uniform) and the
// extremes (a near 2^-100, b near 2^24, a = 0). Prints the mismatch count (and the first few)
// and exits 1 on any mismatch, 77 (skipped) where no GPU runs it.
#include "common.cuh"
#include "skip_without_gpu.cuh"

#include <cstdio>

namespace {

constexpr unsigned long long kSigA = 1ull << 23;
constexpr unsigned kSpreadB = 1u << 16;
constexpr unsigned kEndsB = 4096;
constexpr unsigned kSigB = kSpreadB + 2 * kEndsB;
constexpr unsigned long long kRandom = 1ull << 36;

struct Mismatch {
  float a, b;
};

__device__ void check(float a, float b, unsigned long long* bad, Mismatch* first) {
  const float want = __fdiv_rn(a, b);
  const float got = moejit::div_by_rcp(a, b, __frcp_rn(b));
  if (!moejit::div_by_rcp_ok(a) || __float_as_uint(got) != __float_as_uint(want)) {
    const unsigned long long k = atomicAdd(bad, 1ull);
    if (k < 8) first[k] = {a, b};
  }
}

/// The i-th significand of b in [1, 2): 2^16 spread evenly, then the lowest and highest 4096.
__device__ float b_of(unsigned i) {
  unsigned m;
  if (i < kSpreadB) {
    m = i * ((1u << 23) / kSpreadB) + (i * 2654435761u >> 25);  // a stride plus a varying offset
  } else if (i < kSpreadB + kEndsB) {
    m = i - kSpreadB;
  } else {
    m = (1u << 23) - 1 - (i - kSpreadB - kEndsB);
  }
  return __uint_as_float(0x3f800000u | (m & 0x7fffffu));
}

__global__ void significands(unsigned long long* bad, Mismatch* first, unsigned long long* checked) {
  unsigned long long n = 0;
  const unsigned long long total = kSigA * kSigB;
  for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    const float a = __uint_as_float(0x3f800000u | static_cast<unsigned>(i % kSigA));
    check(a, b_of(static_cast<unsigned>(i / kSigA)), bad, first);
    ++n;
  }
  atomicAdd(checked, n);
}

__device__ unsigned long long mix(unsigned long long x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

__global__ void random_pairs(unsigned long long* bad, Mismatch* first, unsigned long long* checked) {
  unsigned long long n = 0;
  for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < kRandom; i += gridDim.x * blockDim.x) {
    const unsigned long long r = mix(i), s = mix(i ^ 0x5851f42d4c957f2dull);
    // a: exponent in [-100, 0] (a = 1 at most), b: exponent in [0, 24] (b = 2^24 at most).
    const unsigned ea = 127 - 100 + static_cast<unsigned>((r >> 32) % 101);
    const unsigned eb = 127 + static_cast<unsigned>((s >> 32) % 25);
    float a = __uint_as_float(ea << 23 | static_cast<unsigned>(r & 0x7fffffu));
    float b = __uint_as_float(eb << 23 | static_cast<unsigned>(s & 0x7fffffu));
    if (ea == 127) a = 1.0f;
    if (eb == 127 + 24) b = 0x1p24f;
    // Every 64th pair an extreme: a at the bottom of the range, b at the top, or a = 0.
    if ((i & 63) == 1) a = __uint_as_float(0x0d800000u + static_cast<unsigned>(r & 0xffffu));  // 2^-100 + ...
    if ((i & 63) == 2) b = __uint_as_float(0x4b800000u - static_cast<unsigned>(r & 0xffffu));  // 2^24 - ...
    if ((i & 63) == 3) a = 0.0f;
    check(a, b, bad, first);
    ++n;
  }
  atomicAdd(checked, n);
}

int run(const char* what, void (*kernel)(unsigned long long*, Mismatch*, unsigned long long*),
        unsigned long long expected) {
  unsigned long long *bad, *checked;
  Mismatch* first;
  cudaMallocManaged(&bad, sizeof(*bad));
  cudaMallocManaged(&checked, sizeof(*checked));
  cudaMallocManaged(&first, 8 * sizeof(*first));
  *bad = 0;
  *checked = 0;
  kernel<<<132 * 16, 256>>>(bad, first, checked);
  if (cudaDeviceSynchronize() != cudaSuccess) {
    std::printf("div_rcp_sweep: CUDA error\n");
    return 2;
  }
  std::printf("div_rcp_sweep %s: %llu of %llu pairs differ from __fdiv_rn\n", what, *bad, *checked);
  for (unsigned long long i = 0; i < *bad && i < 8; ++i) {
    std::printf("  a = %a, b = %a\n", static_cast<double>(first[i].a), static_cast<double>(first[i].b));
  }
  return *bad == 0 && *checked == expected ? 0 : 1;
}

}  // namespace

int main() {
  skip_without_gpu("div_rcp_sweep", significands);
  const int sig = run("significands", significands, kSigA * kSigB);
  const int rnd = run("random", random_pairs, kRandom);
  return sig != 0 ? sig : rnd;
}
