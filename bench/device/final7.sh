#!/usr/bin/env bash
# The closing GPU call of the fifth 2026-11-29 session (nvidia-h200): tanh_accurate against tanhf
# on every fp32 input and rcp_fast against __frcp_rn on every y in [1, 2^126), every [gpu] test on
# the final tree (multi-GPU cases skip on one GPU), the `moejit run` test, and the routing
# benchmark beside torch with the block/warp crossover.
source "$(dirname "$0")/common.sh"
nvcc -arch=sm_90a -I templates tests/gpu/tanh_exhaustive.cu -o /tmp/tanh_exhaustive && timeout 60 /tmp/tanh_exhaustive | tee $OUT/exhaustive.txt
nvcc -arch=sm_90a -I templates tests/gpu/rcp_exhaustive.cu -o /tmp/rcp_exhaustive && timeout 60 /tmp/rcp_exhaustive | tee -a $OUT/exhaustive.txt
$B/moejit warmup specs/ bench/specs/ --arch sm_90a -q | grep -E "^warmup"
echo "== [gpu] tests"
timeout 300 $B/test_gpu > $OUT/test_gpu.txt 2>&1; echo "test_gpu exit $?"
grep -E "FAILED|signal|test cases|assertions|All tests" $OUT/test_gpu.txt | head -12
echo "== moejit run vs --reference"
timeout 60 python3 tests/gpu/run_npy.py --moejit $B/moejit 2>&1 | tail -2
routing_beside_torch
