#!/usr/bin/env bash
# One GPU call (nvidia-h200), fifth session, issue 3: route8.sh plus the key without a branch per
# expert, the grouped exclusion once per vector, the sigmoid's slow-path test by one integer max; the
# sigmoid reciprocal by its fast path (rcp_fast), renormalize without the division's slow path for zero
# numerators, bias-free weights read from the key (.carry/moejit) beside ac320da (.carry/moejit_old);
# the [routing] tests first; every SASS line of DeepSeek-V3's and Qwen3's warp kernels (ncu).
source "$(dirname "$0")/common.sh"
routing_tests
W=deepseek_v3_warp,kimi_k2_warp,kimi_k3_warp,qwen3_warp,glm45_warp
K=kimi_k2_block,kimi_k3_block,deepseek_v3_block
ab_old_new $W 1,16,128,1024,4096,16384 $K 1,16,128
ncu_sass dsw deepseek_v3_warp
ncu_sass qww qwen3_warp
ncu_sass glw glm45_warp
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
