#!/usr/bin/env bash
# Seventh session, sixth run (nvidia-h200): the warp kernel looping over tokens with the next
# row's logits loaded while the current token is selected (kWarpPrefetch, up to 16 keys a lane;
# the grid sized to the resident blocks), beside HEAD (old); pf50: the same with half the resident
# blocks (MOEJIT_ROUTING_RESIDENT_PCT=50, a temporary launcher knob). [routing] tests first.
source "$(dirname "$0")/common.sh"
routing_tests
R=bench/specs/routing.json
for round in 1 2 3; do
  ab_run old $round $B/moejit_old $R deepseek_v3,kimi_k2,qwen3,glm45 1,16,128,1024,4096,16384
  ab_run pf $round $B/moejit $R deepseek_v3,kimi_k2,qwen3,glm45 1,16,128,1024,4096,16384
  ab_run pf50 $round $B/moejit $R deepseek_v3,kimi_k2,qwen3,glm45 1024,4096,16384 MOEJIT_ROUTING_RESIDENT_PCT=50
done
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
