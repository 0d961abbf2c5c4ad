#!/usr/bin/env bash
# Thirteenth session (nvidia-h200): the masked activation against dense at the same real rows.
# Variants (build.sh's tree, patched; bench/results/2026-12-02/act15/NOTE.txt):
#   n   the twelfth session's masked kernel (grid 32 blocks an SM in all, count before the loads)
#   s   n + each thread's first chunk loaded before its count where the first chunks span <= 4 MB
#   sc  s + one pass of kUnroll chunks over a half-full expert where that needs more blocks than
#       n gives (up to twice as many) -- the tree as built ($B/moejit)
#   sbc sc + one load of the count a block (thread 0, shared memory, __syncthreads)
# Half-full experts with the counts rotated and kept in L2 (--hot), few rows an expert (0-12) and
# one expert full; dense at the same real rows for the half-full case.
source "$(dirname "$0")/common.sh"
cp $B/moejit $B/moejit_sc
tests_of $B/test_gpu sc "[activation]"
tests_of $B/test_gpu_sbc sbc "[activation]"
V="n s sc sbc"
M=(silu_2048_masked,situ_3072_masked 64,256,2048,8192)
echo "== half full"
variants_ab "$V" half "" "${M[@]}" silu_2048,situ_3072 256,1024,8192,32768
echo "== half full, counts in L2"
variants_ab "$V" hot "--hot expert_num_tokens" "${M[@]}"
echo "== few rows an expert (0-12)"
variants_ab "$V" few "--inputs few" "${M[@]}"
echo "== one expert full"
variants_ab "$V" one "--inputs one-full" "${M[@]}"
