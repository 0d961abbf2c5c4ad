#!/usr/bin/env bash
# One GPU call (nvidia-h200), fourth session: ncu per-SASS instruction counts of the warp kernel
# with the split (32-bit) selection at T=16384, Kimi-K3 and DeepSeek-V3, summarized by
# bench/device/sass_summary.py (the CSVs stay on the GPU machine).
source "$(dirname "$0")/common.sh"
src() {  # name op
  timeout 150 ncu --section SourceCounters --section WarpStateStats --kernel-name regex:routing_warp --launch-count 1 \
    --page source --csv --print-source sass $B/moejit bench bench/specs/routing.json --op $2 --tokens 16384 --calls 1 --replays 1 > /tmp/$1.csv 2>&1
  python3 bench/device/sass_summary.py /tmp/$1.csv 16384 45 | tee $OUT/$1_summary.txt
}
src k3w kimi_k3_warp
src dsw deepseek_v3_warp
