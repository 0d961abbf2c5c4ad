#!/usr/bin/env bash
# GPU call (nvidia-h200) for the warp-per-token routing kernel's rewrite (vector loads, 32-bit
# key halves, shuffle group scores, three cached keys per lane): the [routing] tests, the warp
# kernels at large T beside the previous build (.carry/moejit_old, when present), the Kimi-K3
# block kernel at large T, and ncu's per-instruction counts.
source "$(dirname "$0")/common.sh"
echo "== [routing] tests"
timeout 300 $B/test_gpu "[routing]" > $OUT/test_routing.txt 2>&1; echo "exit $?"
grep -E "FAILED|test cases|assertions|All tests" $OUT/test_routing.txt | head -8
W=deepseek_v3_warp,kimi_k2_warp,kimi_k3_warp,qwen3_warp,glm45_warp
for v in old new; do
  bin=$B/moejit; [ $v = old ] && bin=$B/moejit_old
  [ -x $bin ] || continue
  echo "== warp kernels, $v"
  timeout 90 $bin bench bench/specs/routing.json --op $W --tokens 1,128,1024,4096,16384 2>&1 | grep -v "^device" | tee $OUT/warp_$v.txt
done
echo "== Kimi-K3 block kernel at large T"
timeout 60 $B/moejit bench bench/specs/routing.json --op kimi_k3_block,kimi_k2_block,deepseek_v3_block --tokens 512,1024,4096,16384 2>&1 | grep -v "^device" | tee $OUT/block_large.txt
for op in deepseek_v3_warp kimi_k3_warp; do
  timeout 120 ncu --section SourceCounters --section WarpStateStats --section SchedulerStats --section Occupancy --kernel-name regex:routing_warp --launch-count 1 --page source --csv --print-source sass \
    $B/moejit bench bench/specs/routing.json --op $op --tokens 16384 --calls 1 --replays 1 > $OUT/${op}_sass.csv 2>&1
done
ls -la $OUT
