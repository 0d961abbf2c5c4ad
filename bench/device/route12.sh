#!/usr/bin/env bash
# One GPU call (nvidia-h200), fifth session, issue 3: the warp kernel's element-by-element loads
# (pointers not aligned for vectors) in a loop that is not unrolled, so that ptxas no longer issues
# them predicated beside the vector loads (.carry/moejit) beside e74ac2a (.carry/moejit_old);
# [routing] tests first (one of them reads through unaligned pointers); every SASS line of the
# DeepSeek-V3 and Kimi-K3 warp kernels (ncu).
source "$(dirname "$0")/common.sh"
echo "== [routing] tests"
timeout 240 $B/test_gpu "[routing]" > $OUT/tests.txt 2>&1; echo "exit $?"
grep -E "FAILED|test cases|assertions|All tests" $OUT/tests.txt | head -6
W=deepseek_v3_warp,kimi_k2_warp,kimi_k3_warp,qwen3_warp,glm45_warp
T=1,16,64,128,1024,4096,16384
for round in 1 2 3; do
  for v in old new; do
    bin=$B/moejit; [ $v != new ] && bin=$B/moejit_$v
    echo "### $v $round" >> $OUT/bench.txt
    timeout 90 $bin bench bench/specs/routing.json --op $W --tokens $T >> $OUT/bench.txt 2>&1
  done
done
ncu_sass dsw deepseek_v3_warp
ncu_sass k3w kimi_k3_warp
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
