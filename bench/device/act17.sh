#!/usr/bin/env bash
# Thirteenth session (nvidia-h200), third run: the masked kernel prefetching its next pass into L2.
# act16 (bench/results/2026-12-02/act16): a block costs ~1 ns of the whole GPU whether or not it
# finds rows (few rows at T_max 8192: 5.7 us with 32 blocks an SM, 10.5 with 64), and a thread
# that strides over two passes is ~4% slower than one pass with twice the blocks (half full).
# Variants (NOTE.txt):
#   n   the twelfth session's kernel and grid (32 blocks an SM in all)
#   p   n + the next pass's inputs prefetched into L2 (prefetch.global.L2) before this pass computes
#   pc  p + grid c (one pass over a half-full expert, up to 64 blocks an SM)
#   ph  p with 16 blocks an SM instead of 32
source "$(dirname "$0")/common.sh"
tests_of $B/test_gpu_p p "[activation]"
tests_of $B/test_gpu_pc pc "[activation]"
V="n p pc ph"
M=silu_2048_masked,situ_3072_masked
echo "== half full"
variants_ab "$V" half "" $M 64,256,2048,8192 silu_2048,situ_3072 256,1024,8192,32768
echo "== few rows an expert (0-12)"
variants_ab "$V" few "--inputs few" $M 64,2048,8192
echo "== every expert full (T_max 1024/4096 = dense's 8192/32768 rows)"
variants_ab "$V" full "--inputs full" $M 1024,4096
echo "== one expert full"
variants_ab "$V" one "--inputs one-full" $M 2048,8192
