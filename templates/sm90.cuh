#pragma once
// sm_90a building blocks of the TMA + mbarrier + wgmma kernels (experts_prefill.cuh,
// latent_tail.cuh): mbarriers, TMA loads and stores of 2-D boxes (128-byte swizzle), wgmma
// descriptors of K-major tiles, the wgmma fences, and register reallocation between warpgroups;
// cp.async with mbarrier completion where rows are gathered rather than boxed.

#include "common.cuh"
#include "tma_map.h"

namespace moejit {
namespace sm90 {

__device__ __forceinline__ unsigned smem_address(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ void barrier_init(unsigned long long* b, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_address(b)), "r"(count) : "memory");
}
__device__ __forceinline__ void barrier_expect(unsigned long long* b, int bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_address(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void barrier_arrive(unsigned long long* b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_address(b)) : "memory");
}
/// barrier_arrive from the lanes where `lane` is 0, predicated rather than branched on, so that
/// the wgmmas in flight around it stay pipelined (ptxas serializes them around divergent code).
__device__ __forceinline__ void barrier_arrive_lane0(unsigned long long* b, int lane) {
  asm volatile(
      "{\n.reg .pred first;\nsetp.eq.s32 first, %1, 0;\n"
      "@first mbarrier.arrive.shared::cta.b64 _, [%0];\n}\n" ::"r"(smem_address(b)),
      "r"(lane)
      : "memory");
}
/// Blocks until the barrier's phase of this parity has completed.
__device__ __forceinline__ void barrier_wait(unsigned long long* b, int parity) {
  asm volatile(
      "{\n.reg .pred done;\nWAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n}\n" ::"r"(smem_address(b)),
      "r"(parity)
      : "memory");
}

/// 16 bytes of global memory at src into shared memory at dst (a shared-window address), past
/// L1. Generic-proxy writes: a wgmma reads them only after a fence.proxy.async (fence_proxy_async)
/// that follows the barrier wait which publishes them.
__device__ __forceinline__ void cp_async16(unsigned dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}
/// An arrival on the barrier once this thread's cp.asyncs so far have landed; one of the arrivals
/// the barrier was initialized to expect (.noinc).
__device__ __forceinline__ void barrier_arrive_copies(unsigned long long* b) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(smem_address(b)) : "memory");
}
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
/// bar.sync on named barrier `id` (1-15: 0 is __syncthreads') of `threads` threads.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

/// `bytes` (a multiple of 16) of global memory at src into shared memory at dst (both 16-byte
/// aligned) by one bulk copy; completes bytes on `bar`.
__device__ __forceinline__ void bulk_load(void* dst, const void* src, int bytes, unsigned long long* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(smem_address(dst)),
               "l"(src), "r"(bytes), "r"(smem_address(bar))
               : "memory");
}

/// The box of `map` at (k, row) into shared memory at dst; completes bytes on `bar`.
__device__ __forceinline__ void tma_load(void* dst, const TmaMap* map, unsigned long long* bar, int k, int row) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::"
      "bytes [%0], [%1, {%3, %4}], [%2];" ::"r"(smem_address(dst)),
      "l"(map), "r"(smem_address(bar)), "r"(k), "r"(row)
      : "memory");
}

/// The box of `map` at (k, row) from shared memory at src (its bulk group: cp.async.bulk.commit_group).
__device__ __forceinline__ void tma_store(const TmaMap* map, const void* src, int k, int row) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];" ::"l"(map), "r"(k), "r"(row),
               "r"(smem_address(src))
               : "memory");
}

/// A wgmma descriptor of a K-major tile of 128-byte rows, 128-byte swizzle (8-row atoms 1024 bytes apart).
__device__ __forceinline__ unsigned long long descriptor(const void* p) {
  const unsigned long long address = smem_address(p);
  return ((address & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
}
/// Keeps the compiler from moving reads or writes of the accumulators across a wgmma fence or wait.
template <int kRegs>
__device__ __forceinline__ void pin(float (&d)[kRegs]) {
#pragma unroll
  for (int i = 0; i < kRegs; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

template <int kRegs>
__device__ __forceinline__ void registers_down() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void registers_up() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kRegs));
}

}  // namespace sm90
}  // namespace moejit
