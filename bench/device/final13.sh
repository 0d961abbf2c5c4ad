#!/usr/bin/env bash
# The ninth session's last GPU call (nvidia-h200): every [gpu] test on the shipped tree (710df09:
# final12's tree + the predicated store + fast rounds up to top 16), and Kimi-K3 at T = 1/16/128.
source "$(dirname "$0")/common.sh"
gpu_tests
echo "### new 1" > $OUT/bench.txt
ab_bench $B/moejit bench/specs/routing.json kimi_k3,kimi_k2 1,16,128,16384
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
