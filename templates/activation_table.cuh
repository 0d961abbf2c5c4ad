#pragma once
// Activations by tables (bf16 input, gate and up halves; included by activation.cuh). SituGLU's
// and erf gelu's cost is their instructions (SituGLU: two accurate tanhs and a sigmoid a value,
// ~67 instructions an element), not their bytes. A bf16 input has 65536 values and the contract
// fixes the constants, so the factors are functions of 16 bits:
//   situ: A(g) = beta tanh(g / beta) sigmoid(g), B(u) = linear_beta tanh(u / linear_beta) (or u),
//         out = round(A(g) * B(u));
//   gelu: A(g) = round_out(0.5 g erfc(-g / sqrt 2)), B(u) = u, out = round(A(g) * u);
// exactly how activate_chunk rounds them. act_table_init_kernel evaluates the factors with
// activate_chunk's own device code, once when the op loads, for every bf16 of magnitude in
// [2^-25, 2^7) (4096 magnitudes x 2 signs: 32 KB a table); act_table_kernel copies them to
// shared memory and an element becomes one or two lookups and a product: the same bits. A chunk
// holding a value outside the window (zeros, |x| >= 128, inf, NaN) is computed by activate_chunk.
// Dense: a grid that strides over the rows; masked: grid rows per expert, each striding over its
// expert's rows (the launcher sizes them from the caller's expected rows).

namespace moejit {

namespace act_table {
inline constexpr unsigned kLo = 102u << 7;   // bf16 magnitude bits of 2^-25
inline constexpr unsigned kSpan = 4096;      // magnitudes in the window: 2^-25 <= |x| < 2^7
inline constexpr int kEntries = 2 * kSpan;   // a table, both signs

/// The table index of a bf16 given by its bits, and whether it lies outside the window: the low
/// 12 bits of 4096 consecutive magnitudes are all different, so they index the table directly.
__device__ __forceinline__ unsigned index_of(unsigned bits, bool& outside) {
  outside |= (bits & 0x7FFFu) - kLo >= kSpan;
  return ((bits >> 3) & kSpan) | (bits & (kSpan - 1));
}
/// The magnitude bits table entry j stands for.
__device__ __forceinline__ unsigned bits_of(unsigned j) {
  const unsigned low = j & (kSpan - 1);
  const unsigned magnitude = kLo + ((low - kLo) & (kSpan - 1));
  return ((j & kSpan) << 3) | magnitude;
}
}  // namespace act_table

template <class T>
constexpr bool is_bf16 = false;
template <>
constexpr bool is_bf16<__nv_bfloat16> = true;

/// The contracts that have the table kernels: SituGLU and erf gelu of bf16 input, gate and up halves.
template <class C>
constexpr bool act_by_tables() {
  return (C::kKind == ActKind::situ || C::kKind == ActKind::gelu) && is_bf16<typename C::In> && !C::kInterleaved;
}
/// A table for the up half too (SituGLU with linear_beta).
template <class C>
constexpr bool act_up_table() {
  return C::kKind == ActKind::situ && C::kLinearBeta > 0.0f;
}
template <class C>
constexpr int act_table_bytes() {
  return (act_up_table<C>() ? 2 : 1) * act_table::kEntries * 4;
}

/// Fills args.out (float[kEntries] A, then B where there is one) with the factors of every bf16
/// in the window.
template <class C>
__global__ void __launch_bounds__(256) act_table_init_kernel(ActivationArgs args) {
  static_assert(act_by_tables<C>());
  using namespace act_table;
  float* table = static_cast<float*>(args.out);
  constexpr int kTables = act_up_table<C>() ? 2 : 1;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < kTables * kEntries; i += gridDim.x * blockDim.x) {
    const float x = __uint_as_float(bits_of(static_cast<unsigned>(i % kEntries)) << 16);
    if (i >= kEntries) {
      table[i] = mul(C::kLinearBeta, tanh_accurate(mul(x, C::kInvLinearBeta)));
    } else if constexpr (C::kKind == ActKind::situ) {
      table[i] = mul(mul(C::kBeta, tanh_accurate(mul(x, C::kInvBeta))), sigmoid(x));
    } else {
      table[i] = round_to<typename C::Out>(mul(mul(0.5f, x), erfcf(-mul(x, 0.70710678118654752f))));
    }
  }
}

/// The activation by lookups in the tables at args.table (dynamic shared memory:
/// act_table_bytes); kUnroll chunks a thread in flight.
template <class C>
__global__ void __launch_bounds__(C::kThreads, 3) act_table_kernel(ActivationArgs args) {
  static_assert(ActivationChecks<C>::ok && act_by_tables<C>());
  using In = typename C::In;
  using Out = typename C::Out;
  using namespace act_table;
  constexpr int kV = C::kVec;
  constexpr int kUnroll = 2;
  extern __shared__ float4 table4[];
  // NOTE: the tables are written when the op loads, not by the previous kernel: their copy
  // starts before waiting for it.
  const float4* src = static_cast<const float4*>(args.table);
  for (int i = threadIdx.x; i < act_table_bytes<C>() / 16; i += C::kThreads) table4[i] = src[i];
  const float* ta = reinterpret_cast<const float*>(table4);
  const float* tb = ta + kEntries;
  dependent_launch_prologue();
  __syncthreads();

  constexpr unsigned kChunksPerRow = C::kD / kV;
  const In* in = static_cast<const In*>(args.in);
  Out* out = static_cast<Out*>(args.out);
  unsigned rows = static_cast<unsigned>(args.tokens), first_row = 0;
  if constexpr (C::kMasked) {
    const long long count = args.expert_num_tokens[blockIdx.y];
    rows = static_cast<unsigned>(count < 0 ? 0 : (count > args.tokens ? args.tokens : count));
    first_row = blockIdx.y * static_cast<unsigned>(args.tokens);
  }
  const unsigned total = rows * kChunksPerRow;
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
      at[k] = (first_row + r) * C::kD + col;
      const In* row = in + (first_row + r) * (2 * C::kD);
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
        const float b = act_up_table<C>() ? tb[index_of(__bfloat16_as_ushort(u[k].v[i]), outside)] : to_float(u[k].v[i]);
        o.v[i] = from_float<Out>(mul(a, b));
      }
      if (outside) activate_chunk<C, kV>(g[k], u[k], o);
      store_vec<Out, kV>(out + at[k], o);
    }
  }
}

}  // namespace moejit
