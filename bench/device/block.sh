#!/usr/bin/env bash
# GPU call (nvidia-h200) for the block routing kernel's latency (weights left in shared memory by
# each expert's thread, level 0 of the rank tree behind a warp barrier, the finite-logit flag on a
# barrier the kernel needs anyway, grouped keep sets scored by every warp): the [routing] tests,
# then every block kernel at T <= 256 beside the previous build (.carry/moejit_old) in one run.
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
