#!/usr/bin/env bash
# One GPU call each (nvidia-h200), fifth session, issue 3: a routing build (.carry/moejit) beside
# e74ac2a (.carry/moejit_old): [routing] tests first (one reads through unaligned pointers), the
# warp kernels side by side, every SASS line of the DeepSeek-V3 and Kimi-K3 warp kernels (ncu).
# Run twice: on the element loads as a non-unrolled loop in one kernel
# (results/2026-11-29-e/loads-loop-rejected) and on the two warp kernels per contract
# (results/2026-11-29-e/two-warp-kernels).
source "$(dirname "$0")/common.sh"
routing_tests
W=deepseek_v3_warp,kimi_k2_warp,kimi_k3_warp,qwen3_warp,glm45_warp
T=1,16,64,128,1024,4096,16384
ab_old_new $W $T
ncu_sass dsw deepseek_v3_warp
ncu_sass k3w kimi_k3_warp
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
