// Probe (fifteenth session): would an exact grid, launched from the device once the counts are
// known, close the masked activation's gap to dense? Standalone (nvcc on the GPU machine, not
// moejit's NVRTC path): silu-and-mul, bf16, d 2048, 8 experts, the shipped kernel's work split
// (one 16-byte chunk of outputs a thread a pass).
//   dense    one pass over `rows` rows (dense's grid)
//   stride   grid (min(half-full, 528), E), each block striding over its expert's rows (shipped)
//   exact    a 1-warp kernel reads the counts, writes each expert's first block and tail-launches
//            (CUDA dynamic parallelism, cudaStreamTailLaunch) a one-pass grid of exactly the
//            blocks the real rows need
// Build and run (GPU machine): nvcc -O3 -std=c++17 -arch=sm_90a -rdc=true bench/device/cdp_probe.cu
//   -lcudadevrt -o /tmp/cdp_probe && /tmp/cdp_probe
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

constexpr int kD = 2048, kVec = 8, kThreads = 256, kE = 8, kCpr = kD / kVec;  // chunks a row

#define CK(x)                                                                               \
  do {                                                                                      \
    cudaError_t e_ = (x);                                                                   \
    if (e_ != cudaSuccess) {                                                                \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (0)

__device__ __forceinline__ void chunk(const __nv_bfloat16* in, __nv_bfloat16* out, unsigned row, unsigned col) {
  const uint4 g = *reinterpret_cast<const uint4*>(in + row * 2u * kD + col);
  const uint4 u = *reinterpret_cast<const uint4*>(in + row * 2u * kD + kD + col);
  const __nv_bfloat16* gv = reinterpret_cast<const __nv_bfloat16*>(&g);
  const __nv_bfloat16* uv = reinterpret_cast<const __nv_bfloat16*>(&u);
  uint4 o;
  __nv_bfloat16* ov = reinterpret_cast<__nv_bfloat16*>(&o);
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    const float x = __bfloat162float(gv[i]);
    const float a = __bfloat162float(__float2bfloat16(__fdiv_rn(x, 1.0f + expf(-x))));
    ov[i] = __float2bfloat16(a * __bfloat162float(uv[i]));
  }
  *reinterpret_cast<uint4*>(out + row * kD + col) = o;
}

__global__ void __launch_bounds__(kThreads, 8) dense(const __nv_bfloat16* in, __nv_bfloat16* out, unsigned rows) {
  const unsigned c = blockIdx.x * kThreads + threadIdx.x;
  if (c < rows * kCpr) chunk(in, out, c / kCpr, c % kCpr * kVec);
}

__global__ void __launch_bounds__(kThreads, 8) stride(const __nv_bfloat16* in, __nv_bfloat16* out, const int* counts,
                                                      unsigned t_max) {
  const unsigned e = blockIdx.y, total = min(unsigned(counts[e]), t_max) * kCpr;
  for (unsigned c = blockIdx.x * kThreads + threadIdx.x; c < total; c += gridDim.x * kThreads)
    chunk(in, out, e * t_max + c / kCpr, c % kCpr * kVec);
}

// first[e]: expert e's first block; first[kE]: all blocks.
__global__ void __launch_bounds__(kThreads, 8) exact_child(const __nv_bfloat16* in, __nv_bfloat16* out,
                                                           const unsigned* first, unsigned t_max) {
  unsigned e = 0;
#pragma unroll
  for (int i = 1; i < kE; ++i) e += blockIdx.x >= first[i];
  const unsigned c = (blockIdx.x - first[e]) * kThreads + threadIdx.x;
  const unsigned r = c / kCpr;
  if (r < (first[kE + 1 + e])) chunk(in, out, e * t_max + r, c % kCpr * kVec);
}

__global__ void exact_parent(const __nv_bfloat16* in, __nv_bfloat16* out, const int* counts, unsigned* first,
                             unsigned t_max) {
  // first[0..kE]: block offsets; first[kE+1+e]: expert e's rows.
  if (threadIdx.x != 0) return;
  unsigned b = 0;
  for (int e = 0; e < kE; ++e) {
    const unsigned rows = min(unsigned(max(counts[e], 0)), t_max);
    first[e] = b;
    first[kE + 1 + e] = rows;
    b += (rows * kCpr + kThreads - 1) / kThreads;
  }
  first[kE] = b;
  if (b) exact_child<<<b, kThreads, 0, cudaStreamTailLaunch>>>(in, out, first, t_max);
}

int main() {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const unsigned t_maxes[] = {64, 256, 2048, 8192};
  const int kSets = 2;  // alternate two sets of buffers (each >= 2x L2 at the large sizes)
  const size_t max_in = size_t{kE} * 8192 * 2 * kD, max_out = size_t{kE} * 8192 * kD;
  __nv_bfloat16 *in[kSets], *out[kSets];
  int* counts[kSets];
  unsigned* first;
  for (int s = 0; s < kSets; ++s) {
    CK(cudaMalloc(&in[s], max_in * 2));
    CK(cudaMalloc(&out[s], max_out * 2));
    CK(cudaMemset(in[s], 0x3f, max_in * 2));
    CK(cudaMalloc(&counts[s], kE * sizeof(int)));
  }
  CK(cudaMalloc(&first, 2 * (kE + 1) * sizeof(unsigned)));
  cudaEvent_t t0, t1;
  CK(cudaEventCreate(&t0));
  CK(cudaEventCreate(&t1));
  std::printf("%-10s %6s %8s %10s %10s %10s\n", "inputs", "T_max", "rows", "dense", "stride", "exact");
  for (const char* inputs : {"half", "few"}) {
    for (unsigned t_max : t_maxes) {
      std::vector<int> h(kE);
      unsigned real = 0;
      for (int e = 0; e < kE; ++e) {
        h[e] = inputs[0] == 'h' ? int(t_max / 2) : int((e * 7) % 13);
        h[e] = std::min<int>(h[e], t_max);
        real += h[e];
      }
      for (int s = 0; s < kSets; ++s) CK(cudaMemcpy(counts[s], h.data(), kE * sizeof(int), cudaMemcpyHostToDevice));
      const unsigned single = (t_max * kCpr + kThreads - 1) / kThreads;
      const dim3 sgrid(std::min<unsigned>((single + 1) / 2, (32 * sms + kE - 1) / kE), kE);
      float us[3];
      for (int v = 0; v < 3; ++v) {
        auto call = [&](int i) {
          const int s = i % kSets;
          if (v == 0) {
            if (real) dense<<<(real * kCpr + kThreads - 1) / kThreads, kThreads>>>(in[s], out[s], real);
          } else if (v == 1) {
            stride<<<sgrid, kThreads>>>(in[s], out[s], counts[s], t_max);
          } else {
            exact_parent<<<1, 32>>>(in[s], out[s], counts[s], first, t_max);
          }
        };
        for (int i = 0; i < 20; ++i) call(i);
        const int n = t_max >= 2048 ? 50 : 400;
        float best = 1e30f;
        for (int round = 0; round < 3; ++round) {
          CK(cudaEventRecord(t0));
          for (int i = 0; i < n; ++i) call(i);
          CK(cudaEventRecord(t1));
          CK(cudaEventSynchronize(t1));
          float ms = 0;
          CK(cudaEventElapsedTime(&ms, t0, t1));
          best = std::min(best, ms * 1000 / n);
        }
        CK(cudaGetLastError());
        us[v] = best;
      }
      std::printf("%-10s %6u %8u %10.2f %10.2f %10.2f\n", inputs, t_max, real, us[0], us[1], us[2]);
    }
  }
  // Correctness of the exact grid against stride at T_max 2048, half full.
  {
    const unsigned t_max = 2048;
    std::vector<int> h(kE);
    for (int e = 0; e < kE; ++e) h[e] = (e * 613) % (t_max + 1);
    CK(cudaMemcpy(counts[0], h.data(), kE * sizeof(int), cudaMemcpyHostToDevice));
    const size_t n_out = size_t{kE} * t_max * kD;
    std::vector<unsigned short> a(n_out), b(n_out);
    CK(cudaMemset(out[0], 0, n_out * 2));
    stride<<<dim3(528 / kE * kE, kE), kThreads>>>(in[0], out[0], counts[0], t_max);
    CK(cudaMemcpy(a.data(), out[0], n_out * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemset(out[0], 0, n_out * 2));
    exact_parent<<<1, 32>>>(in[0], out[0], counts[0], first, t_max);
    CK(cudaMemcpy(b.data(), out[0], n_out * 2, cudaMemcpyDeviceToHost));
    size_t bad = 0;
    for (size_t i = 0; i < n_out; ++i) bad += a[i] != b[i];
    std::printf("exact vs stride, uneven counts at T_max 2048: %zu outputs differ\n", bad);
  }
  return 0;
}
