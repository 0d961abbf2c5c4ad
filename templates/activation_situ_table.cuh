#pragma once
// SituGLU by tables (dense, bf16 input; included by activation.cuh). SituGLU's cost is its
// instructions -- two tanhs and a sigmoid a value, ~67 instructions an element -- not its bytes.
// A bf16 input has 65536 values, and the contract fixes beta and linear_beta, so the gate factor
// A(g) = beta tanh(g / beta) sigmoid(g) and the up factor B(u) = linear_beta tanh(u / linear_beta)
// are functions of 16 bits. situ_table_init_kernel evaluates both, with the very device code of
// activate_chunk, for every bf16 of magnitude in [2^-25, 2^7) (4096 magnitudes x 2 signs each;
// 64 KB in all), once when the op loads. situ_table_kernel copies them to shared memory and an
// element becomes two lookups and out = round(A(g) * B(u)): the same bits as activate_chunk,
// since that is how activate_chunk rounds. A chunk holding a value outside the window (zeros,
// |x| >= 128, inf, NaN) is computed by activate_chunk.

namespace moejit {

namespace situ_table {
inline constexpr unsigned kLo = 102u << 7;   // bf16 magnitude bits of 2^-25
inline constexpr unsigned kSpan = 4096;      // magnitudes in the window: 2^-25 <= |x| < 2^7
inline constexpr int kEntries = 2 * kSpan;   // per table, both signs
inline constexpr int kTableBytes = 2 * kEntries * 4;

/// The table index of a bf16 given by its bits, and whether it lies outside the window.
__device__ __forceinline__ unsigned index_of(unsigned bits, bool& outside) {
  const unsigned d = (bits & 0x7FFFu) - kLo;
  outside |= d >= kSpan;
  return ((bits >> 3) & kSpan) | (d & (kSpan - 1));
}
}  // namespace situ_table

template <class T>
constexpr bool is_bf16 = false;
template <>
constexpr bool is_bf16<__nv_bfloat16> = true;

/// The contracts that have the table kernels: dense SituGLU of bf16 input, gate and up halves.
template <class C>
constexpr bool situ_by_tables() {
  return C::kKind == ActKind::situ && is_bf16<typename C::In> && !C::kMasked && !C::kInterleaved;
}

/// Fills args.out (float[2][kEntries]: A, then B) with the factors of every bf16 in the window.
template <class C>
__global__ void __launch_bounds__(256) situ_table_init_kernel(ActivationArgs args) {
  static_assert(C::kKind == ActKind::situ, "SituGLU only");
  float* table = static_cast<float*>(args.out);
  using namespace situ_table;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < 2 * kEntries; i += gridDim.x * blockDim.x) {
    const unsigned j = static_cast<unsigned>(i % kEntries);
    const unsigned bits = ((j & kSpan) << 3) | (kLo + (j & (kSpan - 1)));
    const float x = __uint_as_float(bits << 16);
    if (i < kEntries) {
      table[i] = mul(mul(C::kBeta, tanh_accurate(mul(x, C::kInvBeta))), sigmoid(x));
    } else {
      table[i] = C::kLinearBeta > 0.0f ? mul(C::kLinearBeta, tanh_accurate(mul(x, C::kInvLinearBeta))) : x;
    }
  }
}

/// Dense SituGLU over rows [0, T) by lookups in the tables at args.table (dynamic shared memory:
/// kTableBytes). kUnroll chunks a thread in flight; the grid strides.
template <class C>
__global__ void __launch_bounds__(C::kThreads, 3) situ_table_kernel(ActivationArgs args) {
  static_assert(ActivationChecks<C>::ok && situ_by_tables<C>());
  using In = typename C::In;
  using Out = typename C::Out;
  using namespace situ_table;
  constexpr int kV = C::kVec;
  constexpr int kUnroll = 2;
  extern __shared__ float4 table4[];
  // NOTE: the tables are written when the op loads, not by the previous kernel: copy them before
  // waiting for it.
  const float4* src = static_cast<const float4*>(args.table);
  for (int i = threadIdx.x; i < kTableBytes / 16; i += C::kThreads) table4[i] = src[i];
  __syncthreads();
  const float* ta = reinterpret_cast<const float*>(table4);
  const float* tb = ta + kEntries;
  dependent_launch_prologue();

  constexpr unsigned kChunksPerRow = C::kD / kV;
  const In* in = static_cast<const In*>(args.in);
  Out* out = static_cast<Out*>(args.out);
  const unsigned total = static_cast<unsigned>(args.tokens) * kChunksPerRow;
  const unsigned step = gridDim.x * C::kThreads;
  for (unsigned base = blockIdx.x * C::kThreads + threadIdx.x; base < total; base += step * kUnroll) {
    Vec<In, kV> g[kUnroll], u[kUnroll];
    unsigned at[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const unsigned c = base + k * step;
      if (c >= total) break;
      const unsigned r = c / kChunksPerRow;
      const unsigned col = (c - r * kChunksPerRow) * kV;
      at[k] = r * C::kD + col;
      const In* row = in + r * (2 * C::kD);
      g[k] = load_vec<In, kV>(row + col);
      u[k] = load_vec<In, kV>(row + C::kD + col);
    }
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      if (base + k * step >= total) break;
      Vec<Out, kV> o;
      bool outside = false;
#pragma unroll
      for (int i = 0; i < kV; ++i) {
        const float a = ta[index_of(__bfloat16_as_ushort(g[k].v[i]), outside)];
        const float b = tb[index_of(__bfloat16_as_ushort(u[k].v[i]), outside)];
        o.v[i] = from_float<Out>(mul(a, b));
      }
      if (outside) activate_chunk<C, kV>(g[k], u[k], o);
      store_vec<Out, kV>(out + at[k], o);
    }
  }
}

}  // namespace moejit
