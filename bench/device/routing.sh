#!/usr/bin/env bash
# One GPU call (nvidia-h200) for issue 3: routing tests + probe (routing_probe.sh, no ncu), then
# the side-by-side routing benchmark with torch and the block/warp crossover measurement.
source "$(dirname "$0")/common.sh"
NO_NCU=1 bash bench/device/routing_probe.sh
echo "== routing beside torch"
timeout 240 python3 bench/routing_torch.py --moejit $B/moejit --json $OUT/routing.json --crossover $OUT/crossover.json 2>&1 | grep -v "^\\$" | tee $OUT/routing.txt
