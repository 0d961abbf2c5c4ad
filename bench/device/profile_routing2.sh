#!/usr/bin/env bash
# One GPU call (nvidia-h200): ncu's per-SASS-instruction counts and stall samples of the block
# routing kernel at T=132 (one token per SM: where a token's latency goes) and of the warp kernel
# at T=16384 (where the issue slots go), after the warp-kernel rewrite.
source "$(dirname "$0")/common.sh"
src() {  # name kernel-regex op tokens
  timeout 120 ncu --section SourceCounters --section WarpStateStats --section SchedulerStats --kernel-name regex:$2 --launch-count 1 \
    --page source --csv --print-source sass $B/moejit bench bench/specs/routing.json --op $3 --tokens $4 --calls 1 --replays 1 > $OUT/$1.csv 2>&1
  echo "$1 $(wc -c < $OUT/$1.csv) bytes"
}
src dsb132 routing_block deepseek_v3_block 132
src glmb132 routing_block glm45_block 132
src k2b132 routing_block kimi_k2_block 132
src k2w routing_warp kimi_k2_warp 16384
src qww routing_warp qwen3_warp 16384
src glmw routing_warp glm45_warp 16384
