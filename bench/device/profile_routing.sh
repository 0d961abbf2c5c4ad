#!/usr/bin/env bash
# One GPU call (nvidia-h200): where the routing kernels spend their issue slots. ncu's details
# (speed of light, occupancy, scheduler, warp states) and the per-SASS-instruction source page
# (instructions executed, stall samples) of the warp kernel at T=16384 (DeepSeek-V3, Kimi-K3,
# Qwen3) and the block kernel at T=1 (DeepSeek-V3).
source "$(dirname "$0")/common.sh"
S="--section SpeedOfLight --section Occupancy --section SchedulerStats --section WarpStateStats --section LaunchStats --section SourceCounters"
prof() {  # name kernel-regex op tokens
  timeout 120 ncu $S --kernel-name regex:$2 --launch-count 1 $B/moejit bench bench/specs/routing.json --op $3 --tokens $4 --calls 1 --replays 1 \
    > $OUT/$1_details.txt 2>&1
  timeout 120 ncu --section SourceCounters --section WarpStateStats --kernel-name regex:$2 --launch-count 1 --page source --csv --print-source sass \
    $B/moejit bench bench/specs/routing.json --op $3 --tokens $4 --calls 1 --replays 1 > $OUT/$1_sass.csv 2>&1
  grep -E "Duration|Registers|Achieved Occupancy|Issue Slots Busy|No Eligible|Executed Ipc A|Warp Cycles Per Issued|Theoretical Occ|Block Limit" $OUT/$1_details.txt | sed "s/^/$1 /"
}
prof dsw routing_warp deepseek_v3_warp 16384
prof k3w routing_warp kimi_k3_warp 16384
prof qww routing_warp qwen3_warp 16384
prof dsb routing_block deepseek_v3_block 1
ls -la $OUT
