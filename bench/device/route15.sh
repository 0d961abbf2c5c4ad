#!/usr/bin/env bash
# One GPU call (nvidia-h200), fifth session, issue 3: the selection's rescan refills one key (the
# next below the winner, one max pass) instead of kCache insertions (.carry/moejit) beside 3361e2d
# (.carry/moejit_old); [routing] tests first; then the new build's routing table beside torch and
# the block/warp crossover.
source "$(dirname "$0")/common.sh"
routing_tests
W=deepseek_v3_warp,kimi_k2_warp,kimi_k3_warp,qwen3_warp,glm45_warp
T=1,4,16,64,128,1024,4096,16384
ab_old_new $W $T
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
routing_beside_torch
