#!/usr/bin/env bash
# Eighth session (nvidia-h200): the warp routing kernel with 1 or 2 warps a block (w1, w2)
# instead of 4: Kimi-K3 grows ~3 ns a token from T=16 to 128 (3.45 -> 3.85 us) with at most one
# warp per scheduler; fewer warps a block spread those tokens over more SMs.
source "$(dirname "$0")/common.sh"
ab_variants "new w1 w2" kimi_k3,deepseek_v3,qwen3 1,16,64,128,1024,16384
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
