#!/usr/bin/env bash
# The closing GPU call of the third 2026-11-29 session (nvidia-h200): every [gpu] test on the
# final tree (multi-GPU cases skip on one GPU), the `moejit run` test, the block kernels beside
# the build before the DeepSeek-V3 group reductions (.carry/moejit_old), and the routing benchmark
# beside torch with the block/warp crossover.
source "$(dirname "$0")/common.sh"
$B/moejit warmup specs/ bench/specs/ --arch sm_90a -q | grep -E "^warmup"
echo "== [gpu] tests"
timeout 300 $B/test_gpu > $OUT/test_gpu.txt 2>&1; echo "test_gpu exit $?"
grep -E "FAILED|SKIPPED|signal|test cases|assertions|All tests" $OUT/test_gpu.txt | head -12
echo "== moejit run vs --reference"
timeout 60 python3 tests/gpu/run_npy.py --moejit $B/moejit 2>&1 | tail -4
K=deepseek_v3_block,kimi_k2_block,qwen3_block,glm45_block
for v in old new; do
  bin=$B/moejit; [ $v = old ] && bin=$B/moejit_old
  echo "== block kernels, $v"
  timeout 60 $bin bench bench/specs/routing.json --op $K --tokens 1,16,128 2>&1 | grep -v "^device" | tee $OUT/block_$v.txt
done
echo "== routing beside torch"
timeout 200 python3 bench/routing_torch.py --moejit $B/moejit --json $OUT/routing.json --crossover $OUT/crossover.json 2>&1 | grep -v -E "^\\$|warn|Online softmax|split the|important use|softmax\.$|^$" | tee $OUT/routing.txt
