#!/usr/bin/env bash
# GPU call (nvidia-h200), second step of the block routing kernel's latency work (rank counts
# split over several lanes when a level has fewer candidates than threads; DeepSeek-V3's groups,
# one per warp, scored by warp reductions): the [routing] tests, every block kernel at T <= 256
# beside the previous build (.carry/moejit_old) twice, then the torch table and crossover.
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
echo "== routing beside torch"
timeout 240 python3 bench/routing_torch.py --moejit $B/moejit --json $OUT/routing.json --crossover $OUT/crossover.json 2>&1 | grep -v -E "^\\$|warn|Online softmax|split the|important use|softmax\.$|^$" | tee $OUT/routing.txt
