#!/usr/bin/env bash
# One GPU call (nvidia-h200), fifth session, issue 3: the selection's rescan refills one key (the
# next below the winner, one max pass) instead of kCache insertions (.carry/moejit) beside 3361e2d
# (.carry/moejit_old); [routing] tests first; then the new build's routing table beside torch and
# the block/warp crossover.
source "$(dirname "$0")/common.sh"
echo "== [routing] tests"
timeout 240 $B/test_gpu "[routing]" > $OUT/tests.txt 2>&1; echo "exit $?"
grep -E "FAILED|test cases|assertions|All tests" $OUT/tests.txt | head -6
W=deepseek_v3_warp,kimi_k2_warp,kimi_k3_warp,qwen3_warp,glm45_warp
T=1,4,16,64,128,1024,4096,16384
for round in 1 2 3; do
  for v in old new; do
    bin=$B/moejit; [ $v != new ] && bin=$B/moejit_$v
    echo "### $v $round" >> $OUT/bench.txt
    timeout 90 $bin bench bench/specs/routing.json --op $W --tokens $T >> $OUT/bench.txt 2>&1
  done
done
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
echo "== routing beside torch (new)"
timeout 240 python3 bench/routing_torch.py --moejit $B/moejit --json $OUT/routing.json --crossover $OUT/crossover.json 2>&1 | grep -v -E "^\\$|warn|Online softmax|split the|important use|softmax\.$|^$|UserWarning" > $OUT/routing.txt; tail -40 $OUT/routing.txt
