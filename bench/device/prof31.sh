#!/usr/bin/env bash
# Eighth session (nvidia-h200): Kimi-K3's warp stall samples per SASS line at T=16 and T=128
# (sampling interval 0: every 2^5 cycles), to see what grows the time from T=16 to T=128.
source "$(dirname "$0")/common.sh"
for t in 16 128; do
  timeout 120 ncu --section SourceCounters --warp-sampling-interval 0 --kernel-name regex:routing_warp --launch-count 1 \
    --page source --csv --print-source sass $B/moejit bench bench/specs/routing.json --op kimi_k3_warp --tokens $t --calls 1 --replays 1 > /tmp/k3_$t.csv 2>&1
  python3 bench/device/sass_summary.py /tmp/k3_$t.csv $t 0 "Warp Stall Sampling (All Samples)" > $OUT/k3_${t}_stalls.txt
  head -2 $OUT/k3_${t}_stalls.txt
done
