#!/usr/bin/env bash
# The closing routing GPU call of the fourth 2026-11-29 session (nvidia-h200): tanh_accurate
# against tanhf on every fp32 input, every [gpu] test on the final tree (multi-GPU cases skip on
# one GPU), the `moejit run` test, the warp kernels beside the split selection with the branchy
# pop (.carry/moejit_vA) and f43d565 (.carry/moejit_old), and the routing benchmark beside torch
# with the block/warp crossover.
source "$(dirname "$0")/common.sh"
nvcc -arch=sm_90a -I templates tests/gpu/tanh_exhaustive.cu -o /tmp/tanh_exhaustive && timeout 60 /tmp/tanh_exhaustive | tee $OUT/tanh.txt
$B/moejit warmup specs/ bench/specs/ --arch sm_90a -q | grep -E "^warmup"
echo "== [gpu] tests"
timeout 300 $B/test_gpu > $OUT/test_gpu.txt 2>&1; echo "test_gpu exit $?"
grep -E "FAILED|SKIPPED|signal|test cases|assertions|All tests" $OUT/test_gpu.txt | head -12
echo "== moejit run vs --reference"
timeout 60 python3 tests/gpu/run_npy.py --moejit $B/moejit 2>&1 | tail -2
W=deepseek_v3_warp,kimi_k2_warp,kimi_k3_warp,qwen3_warp,glm45_warp
for round in 1 2; do
  for v in old vA new; do
    bin=$B/moejit; [ $v != new ] && bin=$B/moejit_$v; [ -x $bin ] || continue
    timeout 90 $bin bench bench/specs/routing.json --op $W --tokens 1024,4096,16384 > $OUT/warp_$v.txt 2>&1
  done
done
echo "== warp (old | vA | new), round 2"
paste -d'|' $OUT/warp_old.txt $OUT/warp_vA.txt $OUT/warp_new.txt | grep -v "^device" | awk -F'|' '{printf "%-48s|%s|%s\n", substr($1,1,48), substr($2,31,18), substr($3,31,18)}'
echo "== routing beside torch"
timeout 240 python3 bench/routing_torch.py --moejit $B/moejit --json $OUT/routing.json --crossover $OUT/crossover.json 2>&1 | grep -v -E "^\\$|warn|Online softmax|split the|important use|softmax\.$|^$" > $OUT/routing.txt; tail -40 $OUT/routing.txt
