#!/usr/bin/env bash
# One GPU call (nvidia-h200), fifth session, issue 3: the routing kernels with the sigmoid's
# reciprocal by its fast path (rcp_fast, checked on every y in [1, 2^126) by
# tests/gpu/rcp_exhaustive.cu), renormalize without the division's slow path for zero numerators,
# and bias-free weights read from the key (.carry/moejit) beside ac320da (.carry/moejit_old);
# the [routing] tests first; every SASS line of DeepSeek-V3's and Qwen3's warp kernels (ncu).
source "$(dirname "$0")/common.sh"
echo "== rcp_exhaustive"
nvcc -arch=sm_90a -I templates tests/gpu/rcp_exhaustive.cu -o /tmp/rcp_exhaustive && /tmp/rcp_exhaustive | tee $OUT/rcp_exhaustive.txt
routing_tests
W=deepseek_v3_warp,kimi_k2_warp,kimi_k3_warp,qwen3_warp,glm45_warp
K=kimi_k2_block,kimi_k3_block,deepseek_v3_block
ab_old_new $W 1,16,128,1024,4096,16384 $K 1,16,128
ncu_sass dsw deepseek_v3_warp
ncu_sass qww qwen3_warp
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
