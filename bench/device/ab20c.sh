#!/usr/bin/env bash
# Seventh session, fourth run (nvidia-h200): np (ab20b, no prefetch) beside two register budgets
# for ptxas (__launch_bounds__ min blocks from 65536 / (threads * (2 * slots + 24 or + 32)), a
# temporary formula in kWarpMinBlocks): lb24 and lb32, and HEAD (old).
source "$(dirname "$0")/common.sh"
ab_variants "old np lb24 lb32" deepseek_v3,kimi_k2,qwen3,glm45 1,16,128,1024,16384 kimi_k3 1,16,128,16384
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
