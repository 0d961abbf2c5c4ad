#!/usr/bin/env bash
# Fourteenth session (nvidia-h200), third run: the masked grid in blocks of 1024 threads.
# act18/act19 (bench/results/2026-12-02-b): a persistent grid of tiles wins where experts are
# nearly empty or skewed but loses 10-20% half full; a block costs ~1 ns of the GPU whether or
# not it finds rows (act16). If that cost is a block's, not its threads', four times bigger
# blocks cut it by four at the same threads in flight.
# Variants (NOTE.txt):
#   n    400ba35: one grid row per expert of 256-thread blocks, at most 32 blocks an SM in all
#   k1   n's threads an expert, in blocks of 1024 where an expert has at least 4 of n's blocks
#   k2   k1 with twice the threads (64 of n's blocks an SM; act16's grid c in 1024-thread blocks)
source "$(dirname "$0")/common.sh"
tests_of $B/test_gpu_k1 k1 "[activation]"
V="n k1 k2"
M=silu_2048_masked,situ_3072_masked
E=silu_2048_masked_e256
echo "== half full"
variants_ab "$V" half "" $M 64,256,2048,8192
variants_ab "n" dense "" silu_2048,situ_3072 256,1024,8192,32768
echo "== few rows an expert (0-12)"
variants_ab "$V" few "--inputs few" $M 8192 $E 256
echo "== one expert full"
variants_ab "$V" one "--inputs one-full" $M 8192 $E 256
echo "== half full, 256 experts (T_max 16/64/256 = 2048/8192/32768 real rows)"
variants_ab "$V" e256 "" $E 16,64,256
echo "== every expert full (T_max 4096 = dense's 32768 rows)"
variants_ab "$V" full "--inputs full" $M 4096
