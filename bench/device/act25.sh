#!/usr/bin/env bash
# Fifteenth session (nvidia-h200), third run. act24's queue handed a block's passes out in order
# but cost a __syncthreads a pass (111 vs 100 us, silu T_max 8192): a block waits for its slowest
# warp every pass. Here each warp takes items of K warp passes (32 chunks each) from its expert's
# queue (lane 0's atomic an item ahead, a shuffle; no block barrier), so work is balanced across
# SMs at a fine grain, as dense's one-pass block dispatch balances it (the suspect since act23:
# a static share per block, and some SMs slower than others).
# Variants (NOTE.txt; wq.patch): n the shipped tree; wqK = K warp passes an item, 32 blocks an SM
# (the shipped grid); wq4gG = K 4 and G blocks an SM in all (MOEJIT_WQ_K, MOEJIT_WQ_G).
# Masked SituGLU spills 16 bytes at 32 registers in this build (sm_90a and sm_100a).
# Run: `timeout 560 bash bench/device/act25.sh; bash bench/device/pack_out.sh`.
source "$(dirname "$0")/common.sh"
tests_of $B/test_gpu_wq wq "[activation]"
MOEJIT_WQ_K=1 MOEJIT_WQ_G=2 tests_of $B/test_gpu_wq wq_k1g2 "[activation]"
M=silu_2048_masked,situ_3072_masked
E=silu_2048_masked_e256
V="n wq2 wq4 wq4g8 wq4g16"
echo "== half full"
variants_ab "$V" half "" $M 256,2048,8192
variants_ab "n" dense "" silu_2048,situ_3072 8192,32768
echo "== half full, 256 experts (T_max 64/256 = 8192/32768 real rows)"
variants_ab "$V" e256 "" $E 64,256
echo "== few rows an expert (0-12), one expert full"
variants_ab "$V" few "--inputs few" $M 8192
variants_ab "$V" one "--inputs one-full" $M 8192
