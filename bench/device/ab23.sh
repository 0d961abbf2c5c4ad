#!/usr/bin/env bash
# Seventh session, seventh run (nvidia-h200): sigmoid routers with a bias keep each expert's
# score in shared memory for the finish (no reload of the logit, no second sigmoid), beside HEAD
# (old). [routing] tests first, then ncu instruction counts of DeepSeek-V3 and three rounds.
source "$(dirname "$0")/common.sh"
routing_tests
ncu_sass dsw deepseek_v3_warp
ab_old_new deepseek_v3,kimi_k2,glm45,qwen3 1,16,128,1024,16384 kimi_k3 1,16,128,16384
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
