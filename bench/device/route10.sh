#!/usr/bin/env bash
# One GPU call (nvidia-h200), fifth session, issue 3: the warp kernel with one copy of its body
# per load kind (vectors when logits and bias are aligned for them, else elements; before, ptxas
# predicated both) (.carry/moejit) beside e74ac2a (.carry/moejit_old); and with two cached keys
# per lane for DeepSeek-V3, GLM-4.5 and Qwen3 (temporary knob MOEJIT_X_CACHE=2); [routing] tests
# first.
source "$(dirname "$0")/common.sh"
routing_tests
W=deepseek_v3_warp,kimi_k2_warp,kimi_k3_warp,qwen3_warp,glm45_warp
S=deepseek_v3_warp,qwen3_warp,glm45_warp
T=1,16,128,1024,4096,16384
for round in 1 2 3; do
  for v in old new c2; do
    echo "### $v $round" >> $OUT/bench.txt
    case $v in
      old) timeout 90 $B/moejit_old bench bench/specs/routing.json --op $W --tokens $T >> $OUT/bench.txt 2>&1 ;;
      new) timeout 90 $B/moejit bench bench/specs/routing.json --op $W --tokens $T >> $OUT/bench.txt 2>&1 ;;
      c2) MOEJIT_X_CACHE=2 timeout 90 $B/moejit bench bench/specs/routing.json --op $S --tokens $T >> $OUT/bench.txt 2>&1 ;;
    esac
  done
done
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
