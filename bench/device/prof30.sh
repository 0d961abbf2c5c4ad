#!/usr/bin/env bash
# Eighth session (nvidia-h200): per-SASS-line instruction counts of the warp routing kernels
# after 2d6ab9e (Kimi-K3, DeepSeek-V3 at T=16384), and Kimi-K3's stall samples per line at
# T=16 and T=128 (why T=128 is 0.4 us slower).
source "$(dirname "$0")/common.sh"
ncu_sass k3 kimi_k3_warp
ncu_sass ds deepseek_v3_warp
for t in 16 128; do
  timeout 150 ncu --section SourceCounters --section LaunchStats --section Occupancy --kernel-name regex:routing_warp --launch-count 1 \
    --page source --csv --print-source sass $B/moejit bench bench/specs/routing.json --op kimi_k3_warp --tokens $t --calls 1 --replays 1 > /tmp/k3_$t.csv 2>&1
  python3 bench/device/sass_summary.py /tmp/k3_$t.csv $t 0 "Warp Stall Sampling (All Samples)" > $OUT/k3_${t}_stalls.txt
  head -2 $OUT/k3_${t}_stalls.txt
  timeout 60 ncu --metrics gpu__time_duration.sum,dram__bytes_read.sum,smsp__cycles_active.max,sm__cycles_active.max --kernel-name regex:routing_warp --launch-count 3 \
    $B/moejit bench bench/specs/routing.json --op kimi_k3_warp --tokens $t --calls 3 --replays 1 2>&1 | grep -E "gpu__time|dram__bytes|cycles_active" | tail -4
done
