#pragma once
// Gated activations (numerics.md "activation"): silu, gelu, gelu_tanh, swiglu_oai, situ.
// Dense [T, 2d] -> [T, d], or masked [E, T_max, 2d] -> [E, T_max, d] where rows at or past
// expert_num_tokens[e] are not written. fp32 math with the exact rounding points of numerics.md.
//
// The output is cut into chunks of kVec elements (16-byte loads for bf16/fp16), or of one element
// on the scalar path. Thread i takes chunks i, i + S, ..., i + (kUnroll - 1) S with S =
// gridDim.x * kThreads, then moves on by kUnroll * S: a warp's loads are coalesced, and all loads
// of a thread are issued before the first use. The launcher (runtime/activation_op.cpp) sizes the
// grid: small T spreads over the SMs (per-call latency), large T gets kUnroll chunks a thread
// (bytes in flight), or for the issue-bound kinds (SituGLU, erf gelu) 32 blocks an SM that stride.
// A run-time flag takes the scalar path for pointers not aligned for vectors and for outputs too
// small to fill the GPU twice with one element a thread. Masked layout: one grid row (blockIdx.y)
// per expert, striding over the rows its count says. Two kernels, so that each has its own
// registers: 32-bit element offsets (activation_kernel: inputs below 2^31 elements) and 64-bit
// ones (activation_wide_kernel).
//
// Config (generated): kKind, kMasked, kD, kNumExperts, kInterleaved, kBeta, kInvBeta,
// kLinearBeta, kInvLinearBeta, kAlpha, kLimit, kThreads, kVec, kUnroll, In, Out.

#include "activation_args.h"
#include "common.cuh"

namespace moejit {

enum class ActKind : int { silu = 0, gelu = 1, gelu_tanh = 2, swiglu_oai = 3, situ = 4 };

template <class C>
struct ActivationChecks {
  static_assert(C::kD > 0, "d must be positive");
  static_assert(is_pow2(C::kVec) && C::kD % C::kVec == 0, "kVec must be a power of two dividing d");
  static_assert(C::kVec * sizeof(typename C::In) <= 16 && C::kVec * sizeof(typename C::Out) <= 16,
                "a vector is at most 16 bytes");
  static_assert(C::kThreads % 32 == 0 && C::kThreads <= 1024, "whole warps, at most 1024 threads");
  static_assert(C::kUnroll >= 1 && C::kUnroll <= 8, "unroll in [1, 8]");
  static_assert(!C::kMasked || C::kNumExperts > 0, "masked layout needs experts");
  static constexpr bool ok = true;
};

/// sigmoid(x), the bits of common.cuh's sigmoid for 1 <= 1 + exp(-x) < 2^126 (every x above
/// about -87) by the reciprocal's fast path alone (rcp_fast); sets `slow` where it is wrong (x
/// below that, NaN), and the caller redoes its chunk with common.cuh's sigmoid: the range check
/// off the common path (swiglu_oai at 32768 rows: 145 -> 135 us). One branch a chunk, after all
/// its values: a branch is a scheduling barrier that would keep the next value from overlapping.
__device__ __forceinline__ float sigmoid_fast(float x, bool& slow) {
  const float y = sigmoid_denominator(x);
  slow |= !rcp_fast_ok(y);
  return rcp_fast(y);
}

/// sigmoid(x), the same bits, with a branch to __frcp_rn per value where it is needed.
__device__ __forceinline__ float sigmoid_by_rcp_fast(float x) {
  bool slow = false;
  const float s = sigmoid_fast(x, slow);
  return slow ? sigmoid(x) : s;
}

/// SituGLU's output from its gate and its (possibly squashed) up value, with the sigmoid given.
template <class C, class Sigmoid>
__device__ __forceinline__ typename C::Out situ_output(float g, float v, Sigmoid&& sigmoid_of) {
  const float t = mul(C::kBeta, tanh_accurate(mul(g, C::kInvBeta)));
  return from_float<typename C::Out>(mul(mul(t, sigmoid_of(g)), v));
}

/// swiglu_oai's output, with the sigmoid given. NaN-propagating clamps: a comparison with NaN is
/// false, so NaN passes through.
template <class C, class Sigmoid>
__device__ __forceinline__ typename C::Out swiglu_oai_output(float g, float u, Sigmoid&& sigmoid_of) {
  const float gc = g > C::kLimit ? C::kLimit : g;
  const float uc = u > C::kLimit ? C::kLimit : (u < -C::kLimit ? -C::kLimit : u);
  return from_float<typename C::Out>(mul(add(uc, 1.0f), mul(gc, sigmoid_of(mul(C::kAlpha, gc)))));
}

/// One output element from its gate and up values, rounded as numerics.md says (the kinds
/// without a sigmoid; activate_chunk does SituGLU and swiglu_oai a chunk at a time).
template <class C>
__device__ __forceinline__ typename C::Out activate(float g, float u) {
  using Out = typename C::Out;
  if constexpr (C::kKind == ActKind::silu) {
    const float a = round_to<Out>(__fdiv_rn(g, add(1.0f, expf(-g))));
    return from_float<Out>(mul(a, u));
  } else if constexpr (C::kKind == ActKind::gelu) {
    // NOTE: 1 + erf(x) as erfc(-x): equal, but without the cancellation for negative x that
    // lets two correct erff implementations disagree in every bit of the result.
    const float a = round_to<Out>(mul(mul(0.5f, g), erfcf(-mul(g, 0.70710678118654752f))));
    return from_float<Out>(mul(a, u));
  } else {
    static_assert(C::kKind == ActKind::gelu_tanh, "SituGLU and swiglu_oai go through activate_chunk");
    // NOTE: 0.5 * (1 + tanh(y)) as 1 / (1 + exp(-2y)), for the same reason.
    const float cube = mul(mul(g, g), g);
    const float inner = mul(0.7978845608f, add(g, mul(0.044715f, cube)));
    const float a = round_to<Out>(__fdiv_rn(g, add(1.0f, expf(-mul(2.0f, inner)))));
    return from_float<Out>(mul(a, u));
  }
}

/// The kV outputs of one chunk. SituGLU with linear_beta: u / linear_beta is below tanh's
/// switch point (|u| < 15 at linear_beta 25) for all but outliers, so when no lane of the warp
/// holds a larger one the warp takes only tanh's polynomial part (no exp, no reciprocal: about a
/// sixth of SituGLU's instructions); otherwise every lane takes the whole tanh. The same bits
/// either way (tanh_accurate selects the polynomial below the switch point). SituGLU and
/// swiglu_oai take their sigmoids by sigmoid_fast and redo the chunk where one was out of its
/// range (the same bits where it was in range).
template <class C, int kV>
__device__ __forceinline__ void activate_chunk(const Vec<typename C::In, kV>& g, const Vec<typename C::In, kV>& u,
                                               Vec<typename C::Out, kV>& o) {
  bool slow = false;
  // NOTE: SituGLU's vector path keeps a branch a value: without, its 8 values overlap in 40-48
  // registers instead of 32 (2.5% slower at 32768 rows); swiglu_oai fits 32 without.
  const auto fast = [&slow](float x) {
    if constexpr (kV == 1 || C::kKind == ActKind::swiglu_oai) return sigmoid_fast(x, slow);
    else return sigmoid_by_rcp_fast(x);
  };
  const auto exact = [](float x) { return sigmoid(x); };
  if constexpr (C::kKind == ActKind::situ && C::kLinearBeta > 0.0f) {
    float y[kV];
    bool large = false;
#pragma unroll
    for (int i = 0; i < kV; ++i) {
      y[i] = mul(to_float(u.v[i]), C::kInvLinearBeta);
      large |= !(fabsf(y[i]) < tanh_switch());  // NaN counts as large
    }
    if (__any_sync(__activemask(), large)) {
#pragma unroll
      for (int i = 0; i < kV; ++i) y[i] = tanh_accurate(y[i]);
    } else {
#pragma unroll
      for (int i = 0; i < kV; ++i) y[i] = tanh_small(y[i]);
    }
#pragma unroll
    for (int i = 0; i < kV; ++i) o.v[i] = situ_output<C>(to_float(g.v[i]), mul(C::kLinearBeta, y[i]), fast);
    if (slow) {
#pragma unroll
      for (int i = 0; i < kV; ++i) {
        const float v = mul(C::kLinearBeta, tanh_accurate(mul(to_float(u.v[i]), C::kInvLinearBeta)));
        o.v[i] = situ_output<C>(to_float(g.v[i]), v, exact);
      }
    }
  } else if constexpr (C::kKind == ActKind::situ || C::kKind == ActKind::swiglu_oai) {
    const auto output = [](float gi, float ui, const auto& sigmoid_of) {
      if constexpr (C::kKind == ActKind::situ) return situ_output<C>(gi, ui, sigmoid_of);
      else return swiglu_oai_output<C>(gi, ui, sigmoid_of);
    };
#pragma unroll
    for (int i = 0; i < kV; ++i) o.v[i] = output(to_float(g.v[i]), to_float(u.v[i]), fast);
    if (slow) {
#pragma unroll
      for (int i = 0; i < kV; ++i) o.v[i] = output(to_float(g.v[i]), to_float(u.v[i]), exact);
    }
  } else {
#pragma unroll
    for (int i = 0; i < kV; ++i) o.v[i] = activate<C>(to_float(g.v[i]), to_float(u.v[i]));
  }
}

/// Processes chunks first, first + step, ... of `rows` rows of 2d inputs and d outputs;
/// row_of(r) is row r's index in the input and output arrays (called with rising r). Index is
/// the type of every element offset: unsigned when they all fit in 32 bits (activation_kernel),
/// where the row of a chunk is a 32-bit division by a constant (2 instructions; the 64-bit one
/// is ~20, a fifth of a scalar SituGLU element).
template <class C, int kV, class Index, class RowOf>
__device__ __forceinline__ void activation_rows(const typename C::In* __restrict__ in,
                                                typename C::Out* __restrict__ out, Index rows, Index first,
                                                Index step, RowOf&& row_of) {
  using In = typename C::In;
  using Out = typename C::Out;
  constexpr Index kChunksPerRow = C::kD / kV;
  const Index total = rows * kChunksPerRow;
  for (Index base = first; base < total; base += step * C::kUnroll) {
    Vec<In, kV> g[C::kUnroll], u[C::kUnroll];
    Index at[C::kUnroll];  // the chunk's first output element
    // Load: every load of this thread in flight before the first use.
#pragma unroll
    for (int k = 0; k < C::kUnroll; ++k) {
      const Index c = base + k * step;
      if (c >= total) break;
      const Index r = c / kChunksPerRow;
      const Index row = row_of(r);
      const Index col = (c - r * kChunksPerRow) * kV;
      at[k] = row * C::kD + col;
      const In* src = in + row * (2 * C::kD);
      if constexpr (C::kInterleaved && kV == 1) {
        g[k].v[0] = src[2 * col];
        u[k].v[0] = src[2 * col + 1];
      } else if constexpr (C::kInterleaved) {
        // [g0, u0, g1, u1, ...]: 2 * kV inputs give kV outputs.
        const Vec<In, kV> lo = load_vec<In, kV>(src + 2 * col);
        const Vec<In, kV> hi = load_vec<In, kV>(src + 2 * col + kV);
#pragma unroll
        for (int i = 0; i < kV / 2; ++i) {
          g[k].v[i] = lo.v[2 * i];
          u[k].v[i] = lo.v[2 * i + 1];
          g[k].v[i + kV / 2] = hi.v[2 * i];
          u[k].v[i + kV / 2] = hi.v[2 * i + 1];
        }
      } else {
        g[k] = load_vec<In, kV>(src + col);
        u[k] = load_vec<In, kV>(src + C::kD + col);
      }
    }
    // Compute and store.
#pragma unroll
    for (int k = 0; k < C::kUnroll; ++k) {
      if (base + k * step >= total) break;
      Vec<Out, kV> o;
      activate_chunk<C, kV>(g[k], u[k], o);
      store_vec<Out, kV>(out + at[k], o);
    }
  }
}

template <class C, int kV, class Index>
__device__ __forceinline__ void activation_body(const ActivationArgs& args) {
  using In = typename C::In;
  using Out = typename C::Out;
  const Index first = static_cast<Index>(blockIdx.x) * C::kThreads + threadIdx.x;
  const Index step = static_cast<Index>(gridDim.x) * C::kThreads;
  const In* in = static_cast<const In*>(args.in);
  Out* out = static_cast<Out*>(args.out);
  const Index tokens = static_cast<Index>(args.tokens);
  if constexpr (C::kMasked) {
    // One grid row per expert, striding over its rows.
    const Index e = blockIdx.y;
    const long long count = args.expert_num_tokens[e];
    const Index rows = static_cast<Index>(count < 0 ? 0 : (count > args.tokens ? args.tokens : count));
    const Index offset = e * tokens;
    activation_rows<C, kV, Index>(in, out, rows, first, step, [&](Index r) { return offset + r; });
  } else {
    activation_rows<C, kV, Index>(in, out, tokens, first, step, [](Index r) { return r; });
  }
}

/// The body for the launcher's flag (vectors or scalars) with element offsets of type Index.
template <class C, class Index>
__device__ __forceinline__ void activation_entry(const ActivationArgs& args) {
  static_assert(ActivationChecks<C>::ok);
  dependent_launch_prologue();
  if (args.vectorized) {
    activation_body<C, C::kVec, Index>(args);
  } else {
    activation_body<C, 1, Index>(args);
  }
}

/// Blocks of 256 threads an SM the 32-bit kernel is held to, which sets ptxas's register budget
/// (8 blocks: 32 registers; silu at 32768 rows ~8% faster than at 6). gelu and swiglu_oai spill at
/// 32 on one arch or the other, so each gets a budget it fits; left alone, ptxas gives them 63.
template <class C>
constexpr int activation_min_blocks() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
  constexpr bool sm100 = true;
#else
  constexpr bool sm100 = false;
#endif
  constexpr int b = C::kKind == ActKind::gelu ? (sm100 ? 6 : 5) : C::kKind == ActKind::swiglu_oai ? (sm100 ? 5 : 8) : 8;
  return b * 256 / C::kThreads;
}

/// 32-bit element offsets: every call whose input has fewer than 2^31 elements (the launcher's
/// pick). A kernel of its own, so that the 64-bit path's registers are not its own.
template <class C>
__global__ void __launch_bounds__(C::kThreads, activation_min_blocks<C>()) activation_kernel(ActivationArgs args) {
  activation_entry<C, unsigned>(args);
}

/// 64-bit element offsets: inputs of 2^31 elements or more.
template <class C>
__global__ void __launch_bounds__(C::kThreads) activation_wide_kernel(ActivationArgs args) {
  activation_entry<C, long long>(args);
}

}  // namespace moejit

#include "activation_table.cuh"
