#!/usr/bin/env bash
# Fourteenth session (nvidia-h200), second run: the masked layout as tiles of real rows, each
# thread loading its next tile's chunk before it computes this one, on one resident wave.
# act18 (bench/results/2026-12-02-b/act18): tiles of one chunk a thread without that prefetch lost
# 10-20% half full (one wave: 31 tiles a block at T_max 8192) but took few rows 5.7 -> 2.9 us
# and expert 0 full (SituGLU 8192) 80.7 -> 62.2.
# Variants (NOTE.txt):
#   n    400ba35: one grid row per expert, at most 32 blocks an SM in all
#   m5   tiles, next chunk loaded ahead, at most 5 blocks an SM (launch bounds 5: 43-48 registers)
#   m4   the same at 4 blocks an SM (launch bounds 4: up to 64 registers)
source "$(dirname "$0")/common.sh"
tests_of $B/test_gpu_m5 m5 "[activation]"
V="n m5 m4"
M=silu_2048_masked,situ_3072_masked
E=silu_2048_masked_e256
echo "== half full"
variants_ab "$V" half "" $M 64,256,2048,8192
variants_ab "n" dense "" silu_2048,situ_3072 256,1024,8192,32768 silu_2048 2048
echo "== half full, 256 experts (T_max 16/64/256 = 2048/8192/32768 real rows)"
variants_ab "$V" e256 "" $E 16,64,256
echo "== few rows an expert (0-12)"
variants_ab "$V" few "--inputs few" $M 8192 $E 256
echo "== one expert full"
variants_ab "$V" one "--inputs one-full" $M 8192 $E 256
echo "== every expert full (T_max 4096 = dense's 32768 rows)"
variants_ab "$V" full "--inputs full" $M 4096
