#!/usr/bin/env bash
# GPU call (nvidia-h200), second step of the warp-kernel rewrite (group scores on key halves,
# 32-bit group ranks, softmax exponentials reused, two cached keys below 12 experts per lane):
# the [routing] tests, the warp kernels beside the first step (.carry/moejit_v1) and the previous
# build (.carry/moejit_old), then the torch table and the crossover up to 1024 tokens.
source "$(dirname "$0")/common.sh"
echo "== [routing] tests"
timeout 300 $B/test_gpu "[routing]" > $OUT/test_routing.txt 2>&1; echo "exit $?"
grep -E "FAILED|test cases|assertions|All tests" $OUT/test_routing.txt | head -8
W=deepseek_v3_warp,kimi_k2_warp,kimi_k3_warp,qwen3_warp,glm45_warp
for v in old v1 new; do
  bin=$B/moejit; [ $v != new ] && bin=$B/moejit_$v
  [ -x $bin ] || continue
  echo "== warp kernels, $v"
  timeout 90 $bin bench bench/specs/routing.json --op $W --tokens 1,128,1024,4096,16384 2>&1 | grep -v "^device" | tee $OUT/warp_$v.txt
done
echo "== routing beside torch"
timeout 240 python3 bench/routing_torch.py --moejit $B/moejit --json $OUT/routing.json --crossover $OUT/crossover.json 2>&1 | grep -v -E "^\\$|warn|Online softmax|split the|important use|softmax\.$|^$" | tee $OUT/routing.txt
