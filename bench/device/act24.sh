#!/usr/bin/env bash
# Fifteenth session (nvidia-h200), second run. act23 showed dense loses what masked loses once it
# strides (silu 32768 rows: one pass 93.6 us, 32 blocks an SM striding 98.9, masked T_max 8192
# 100.1) and that a block walking its own contiguous rows is worse still (101.5): the rows in
# flight should stay one narrow window, as dense's in-order block dispatch keeps them.
# Variants (NOTE.txt; patches beside it):
#   n     the shipped tree (fcbe807)
#   q     each expert's passes handed out in order by a queue in device memory (one atomic a
#         block a pass, issued a pass ahead; the expert's last block zeroes it), same grid (q.patch)
#   qpf   q, and each thread's first chunk prefetched into L2 before its expert's count is read,
#         where all blocks' first chunks span <= 4 MB (qpf.patch; qpf8: <= 8 MB, by MOEJIT_SPEC_MB)
# Run: `timeout 560 bash bench/device/act24.sh; bash bench/device/pack_out.sh`.
source "$(dirname "$0")/common.sh"
tests_of $B/test_gpu_q q "[activation]"
MOEJIT_SPEC_MB=100000 tests_of $B/test_gpu_qpf qpf_all "[activation]"
M=silu_2048_masked,situ_3072_masked
E=silu_2048_masked_e256
echo "== half full"
variants_ab "n q qpf qpf8" half "" $M 64,256,2048,8192
variants_ab "n" dense "" silu_2048,situ_3072 256,1024,8192,32768
echo "== half full, 256 experts (T_max 16/64/256 = 2048/8192/32768 real rows)"
variants_ab "n q qpf" e256 "" $E 16,64,256
echo "== few rows an expert (0-12)"
variants_ab "n q qpf qpf8" few "--inputs few" silu_2048_masked 64,256,8192 situ_3072_masked 256,8192
echo "== one expert full, every expert full"
variants_ab "n q" one "--inputs one-full" $M 8192 $E 256
variants_ab "n q" full "--inputs full" $M 4096
