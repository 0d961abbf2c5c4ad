#!/usr/bin/env bash
# GPU call (nvidia-h200) for the block routing kernel's latency work: the [routing] tests, then
# every block kernel at T <= 256 beside the previous build (.carry/moejit_old) twice in one run;
# with TORCH=1 also the routing table beside torch and the block/warp crossover.
# Runs of the third 2026-11-29 session: results/2026-11-29-c/block/ (weights in shared memory,
# fewer barriers) and, with TORCH=1, block2/ (plus DeepSeek-V3's group reductions and split rank
# counts, the split later dropped).
source "$(dirname "$0")/common.sh"
echo "== [routing] tests"
timeout 300 $B/test_gpu "[routing]" > $OUT/test_routing.txt 2>&1; echo "exit $?"
grep -E "FAILED|test cases|assertions|All tests" $OUT/test_routing.txt | head -8
K=deepseek_v3_block,kimi_k2_block,kimi_k3_block,qwen3_block,glm45_block
for i in 1 2; do
  for v in old new; do
    bin=$B/moejit; [ $v = old ] && bin=$B/moejit_old
    echo "== block kernels, $v ($i)"
    timeout 90 $bin bench bench/specs/routing.json --op $K --tokens 1,16,128,256 2>&1 | grep -v "^device" | tee $OUT/block_${v}_$i.txt
  done
done
if [ "${TORCH:-0}" = 1 ]; then
  echo "== routing beside torch"
  timeout 240 python3 bench/routing_torch.py --moejit $B/moejit --json $OUT/routing.json --crossover $OUT/crossover.json 2>&1 | grep -v -E "^\\$|warn|Online softmax|split the|important use|softmax\.$|^$" | tee $OUT/routing.txt
fi
