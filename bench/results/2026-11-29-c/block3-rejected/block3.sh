#!/usr/bin/env bash
# GPU call (nvidia-h200), third step of the block routing kernel's latency work: rank levels with
# compile-time sizes, with (new) and without (.carry/moejit_nosplit) counts split over lanes,
# beside the build before the group reductions (.carry/moejit_old); the [routing] tests.
source "$(dirname "$0")/common.sh"
echo "== [routing] tests"
timeout 300 $B/test_gpu "[routing]" > $OUT/test_routing.txt 2>&1; echo "exit $?"
grep -E "FAILED|test cases|assertions|All tests" $OUT/test_routing.txt | head -8
K=deepseek_v3_block,kimi_k2_block,kimi_k3_block,qwen3_block,glm45_block
for i in 1 2; do
  for v in old nosplit new; do
    bin=$B/moejit; [ $v != new ] && bin=$B/moejit_$v
    echo "== block kernels, $v ($i)"
    timeout 90 $bin bench bench/specs/routing.json --op $K --tokens 1,16,128,256 2>&1 | grep -v "^device" | tee $OUT/block_${v}_$i.txt
  done
done
