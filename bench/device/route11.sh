#!/usr/bin/env bash
# One GPU call (nvidia-h200), fifth session, issue 3: the warp kernel launched with fewer warps per
# block when that spreads the tokens over more SMs (temporary knob MOEJIT_X_SPREAD; the kernel now
# reads its warps per block from blockDim), beside 4-warp blocks, same build; [routing] tests
# with the knob first.
source "$(dirname "$0")/common.sh"
echo "== [routing] tests (spread)"
MOEJIT_X_SPREAD=1 timeout 240 $B/test_gpu "[routing]" > $OUT/tests.txt 2>&1; echo "exit $?"
grep -E "FAILED|test cases|assertions|All tests" $OUT/tests.txt | head -6
W=deepseek_v3_warp,kimi_k2_warp,kimi_k3_warp,qwen3_warp,glm45_warp
T=1,16,64,128,256,512,1024
for round in 1 2 3; do
  for v in four spread; do
    echo "### $v $round" >> $OUT/bench.txt
    case $v in
      four) timeout 90 $B/moejit bench bench/specs/routing.json --op $W --tokens $T >> $OUT/bench.txt 2>&1 ;;
      spread) MOEJIT_X_SPREAD=1 timeout 90 $B/moejit bench bench/specs/routing.json --op $W --tokens $T >> $OUT/bench.txt 2>&1 ;;
    esac
  done
done
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
