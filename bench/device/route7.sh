#!/usr/bin/env bash
# One GPU call (nvidia-h200), fifth session, issue 3 experiments (temporary knobs, removed after):
# the warp kernel with 16, 8 or 4 lanes per token for the single-group models
# (MOEJIT_X_ROUTING_LANES) and a selection round that takes the winner's expert by ballot + shuffle
# when one lane holds the largest upper half (MOEJIT_X_BALLOT_ROUND); the [routing] tests under
# both knobs; an ncu profile of DeepSeek-V3's and Qwen3's warp kernels as they are.
source "$(dirname "$0")/common.sh"
for v in "8 1" "16 1"; do
  set -- $v
  echo "== [routing] tests, lanes $1, ballot round"
  MOEJIT_X_ROUTING_LANES=$1 MOEJIT_X_BALLOT_ROUND=$2 timeout 240 $B/test_gpu "[routing]" > $OUT/tests_l$1.txt 2>&1; echo "exit $?"
  grep -E "FAILED|test cases|assertions|All tests" $OUT/tests_l$1.txt | head -6
done
S=qwen3_warp,glm45_warp,kimi_k2_warp
A=deepseek_v3_warp,kimi_k3_warp,$S
T=1,16,128,1024,4096,16384
for round in 1 2 3; do
  for v in base ballot l16 l8 l4; do
    echo "### $v $round" >> $OUT/bench.txt
    case $v in
      base) timeout 90 $B/moejit bench bench/specs/routing.json --op $A --tokens $T >> $OUT/bench.txt 2>&1 ;;
      ballot) MOEJIT_X_BALLOT_ROUND=1 timeout 90 $B/moejit bench bench/specs/routing.json --op $A --tokens $T >> $OUT/bench.txt 2>&1 ;;
      l*) MOEJIT_X_ROUTING_LANES=${v#l} timeout 90 $B/moejit bench bench/specs/routing.json --op $S --tokens $T >> $OUT/bench.txt 2>&1 ;;
    esac
  done
done
src() {  # name op
  timeout 150 ncu --section SourceCounters --kernel-name regex:routing_warp --launch-count 1 \
    --page source --csv --print-source sass $B/moejit bench bench/specs/routing.json --op $2 --tokens 16384 --calls 1 --replays 1 > /tmp/$1.csv 2>&1
  python3 bench/device/sass_summary.py /tmp/$1.csv 16384 60 > $OUT/$1_summary.txt
  head -2 $OUT/$1_summary.txt
}
src dsw deepseek_v3_warp
src qww qwen3_warp
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
