#!/usr/bin/env bash
# GPU call (nvidia-h200) for the grouped block kernel: the [routing] tests, DeepSeek-V3 with each
# kernel forced, then the routing benchmark beside torch with every crossover (grouped too).
source "$(dirname "$0")/common.sh"
echo "== [routing] tests"
timeout 120 $B/test_gpu "[routing]" > $OUT/test_routing.txt 2>&1; echo "exit $?"
grep -E "FAILED|test cases|assertions|All tests" $OUT/test_routing.txt | head -8
echo "== DeepSeek-V3, each kernel"
timeout 40 $B/moejit bench bench/specs/routing.json --op deepseek_v3_block,deepseek_v3_warp --tokens 1,16,128,256,1024,16384 2>&1 | tee $OUT/ds_kernels.txt
echo "== routing beside torch"
timeout 150 python3 bench/routing_torch.py --moejit $B/moejit --json $OUT/routing.json --crossover $OUT/crossover.json 2>&1 | grep -v -E "^\\$|warn|Online softmax|split the|important use|softmax\.$|^$" | tee $OUT/routing.txt
