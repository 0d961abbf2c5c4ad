#pragma once
// The weight streamer: a warp computes 16 weight rows x N activation rows with mma.sync
// m16n8k16, the operands swapped so that weight rows fill the tensor core's 16-row side (decode:
// few activation rows, the weights' bytes are the cost). Each lane loads 16 bytes of a weight row
// straight into the registers of an A fragment: the k order inside a 32-wide block is permuted
// (lane quad q holds k 8q..8q+7), identically for A and B, which leaves the dot products
// unchanged and makes every load a 16-byte vector with no shared memory and no shuffles. A ring
// of kU blocks keeps a warp's weight loads in flight (the next block's loads are issued as soon
// as a block is consumed); kSplit warps split K and add their partial sums in a fixed order.
// Used by the experts' GEMMs (experts.cuh); the latent tail's up projection (latent_tail.cuh) has
// the same layout and takes mma_16816 and load_shared_row from here, but loads W with its own
// asm volatile load, which must stay ahead of griddepcontrol.wait (its L2::256B twin was slower).

#include "common.cuh"

namespace moejit {
namespace wstream {

inline constexpr int kBlockK = 32;  // k elements a lane group loads per row and block

/// 16 bytes of a weight row: read once, kept out of L1. A lane group reads 64 bytes of a row a
/// block and the next blocks follow it, so L2 is asked to fetch 256 bytes a miss (H200: the
/// decode GEMMs 5-6% faster at T = 8-64, bench/README.md "Experts").
__device__ __forceinline__ uint4 load_streamed(const void* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
/// 16 bytes of an activation row: read by every CTA of its tile. A coherent load (the kernel this
/// one waits for may have written it, which the non-coherent path need not see), volatile so that
/// it stays after the wait that stream_mma's caller places before it.
__device__ __forceinline__ uint4 load_shared_row(const void* p) {
  uint4 v;
  asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
  return v;
}

template <class T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1);
template <>
__device__ __forceinline__ void mma_16816<__nv_bfloat16>(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma_16816<__half>(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/// Two packed elements of T each scaled by s in fp32 and rounded back (router weight on input).
template <class T>
__device__ __forceinline__ unsigned scale_pair(unsigned v, float s) {
  T e[2];
  memcpy(e, &v, 4);
  e[0] = from_float<T>(mul(to_float(e[0]), s));
  e[1] = from_float<T>(mul(to_float(e[1]), s));
  unsigned out;
  memcpy(&out, e, 4);
  return out;
}

/// One warp's A (two 16-byte runs of its lane's two weight rows) and B (one 16-byte run of each
/// n8 block's row) of one 32-wide k block.
template <int kNB>
struct Fragment {
  unsigned a0[4], a1[4];
  unsigned b[kNB][4];
};

/// No wait: the activations are ready when the kernel starts.
struct NoWait {
  __device__ void operator()() const {}
};

/// acc[j] += A (rows g and g+8 of the warp's 16) x B (n8 block j) over k blocks [0, kBlocks)
/// from the lane's pointers (already at its k offset); kU blocks in flight. `wait()` runs between
/// the first blocks' weight loads and their activation loads: weights never depend on the kernel
/// before, so they stream while it finishes.
template <class T, int kNB, int kU, int kBlocks, bool kScaleB, class Wait = NoWait>
__device__ __forceinline__ void stream_mma(const char* a0, const char* a1, const char* const (&b)[kNB],
                                           const float (&b_scale)[kNB], float (&acc)[kNB][4], const Wait& wait = {}) {
  constexpr int kBytes = kBlockK * 2;
  Fragment<kNB> f[kU];
  const auto load_a = [&](Fragment<kNB>& fr, int kb) {
    const uint4 x0 = load_streamed(a0 + kb * kBytes), x1 = load_streamed(a1 + kb * kBytes);
    fr.a0[0] = x0.x, fr.a0[1] = x0.y, fr.a0[2] = x0.z, fr.a0[3] = x0.w;
    fr.a1[0] = x1.x, fr.a1[1] = x1.y, fr.a1[2] = x1.z, fr.a1[3] = x1.w;
  };
  const auto load_b = [&](Fragment<kNB>& fr, int kb) {
#pragma unroll
    for (int j = 0; j < kNB; ++j) {
      const uint4 y = load_shared_row(b[j] + kb * kBytes);
      fr.b[j][0] = y.x, fr.b[j][1] = y.y, fr.b[j][2] = y.z, fr.b[j][3] = y.w;
    }
  };
  const auto load = [&](Fragment<kNB>& fr, int kb) {
    load_a(fr, kb);
    load_b(fr, kb);
  };
  const auto compute = [&](const Fragment<kNB>& fr) {
#pragma unroll
    for (int j = 0; j < kNB; ++j) {
      unsigned bb[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) bb[i] = kScaleB ? scale_pair<T>(fr.b[j][i], b_scale[j]) : fr.b[j][i];
#pragma unroll
      for (int s = 0; s < 2; ++s) {
        const unsigned a[4] = {fr.a0[2 * s], fr.a1[2 * s], fr.a0[2 * s + 1], fr.a1[2 * s + 1]};
        mma_16816<T>(acc[j], a, bb[2 * s], bb[2 * s + 1]);
      }
    }
  };
#pragma unroll
  for (int u = 0; u < kU; ++u) {
    if (u < kBlocks) load_a(f[u], u);
  }
  wait();
#pragma unroll
  for (int u = 0; u < kU; ++u) {
    if (u < kBlocks) load_b(f[u], u);
  }
  for (int kb = 0; kb < kBlocks; kb += kU) {
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      if (kb + u < kBlocks) {
        compute(f[u]);
        if (kb + u + kU < kBlocks) load(f[u], kb + u + kU);
      }
    }
  }
}

/// Adds the K-split warps' partial sums into split 0's, in split order (the same bits at every
/// run). `scratch` holds (kSplit - 1) x kGroups x 32 x kNB x 4 floats.
template <int kGroups, int kSplit, int kNB>
__device__ __forceinline__ void reduce_splits(float (&acc)[kNB][4], float* scratch) {
  if constexpr (kSplit > 1) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int group = warp % kGroups, split = warp / kGroups;
    constexpr int kPer = kNB * 4;
    if (split > 0) {
      float* dst = scratch + ((split - 1) * kGroups + group) * 32 * kPer + lane;
#pragma unroll
      for (int j = 0; j < kNB; ++j) {
#pragma unroll
        for (int i = 0; i < 4; ++i) dst[(j * 4 + i) * 32] = acc[j][i];
      }
    }
    __syncthreads();
    if (split == 0) {
      for (int s = 1; s < kSplit; ++s) {
        const float* src = scratch + ((s - 1) * kGroups + group) * 32 * kPer + lane;
#pragma unroll
        for (int j = 0; j < kNB; ++j) {
#pragma unroll
          for (int i = 0; i < 4; ++i) acc[j][i] = add(acc[j][i], src[(j * 4 + i) * 32]);
        }
      }
    }
  }
}

/// Pipeline depth: blocks in flight a warp (fewer with more B registers).
template <int kNB>
constexpr int pipeline_depth() {
  return kNB == 1 ? 4 : 2;
}


}  // namespace wstream
}  // namespace moejit
