#!/usr/bin/env bash
# The closing GPU call of the sixth session (nvidia-h200): div_by_rcp against __fdiv_rn
# (div_rcp_sweep), rcp_fast and tanh_accurate exhaustively, cold warmup of every shipped and bench
# spec, every [gpu] test (multi-GPU cases skip on one GPU), the `moejit run` test, then the
# activation and routing tables beside torch eager / torch.compile with the block/warp crossover.
source "$(dirname "$0")/common.sh"
nvcc -arch=sm_90a -I templates tests/gpu/div_rcp_sweep.cu -o /tmp/div_rcp_sweep && timeout 60 /tmp/div_rcp_sweep | tee $OUT/exhaustive.txt
nvcc -arch=sm_90a -I templates tests/gpu/tanh_exhaustive.cu -o /tmp/tanh_exhaustive && timeout 60 /tmp/tanh_exhaustive | tee -a $OUT/exhaustive.txt
nvcc -arch=sm_90a -I templates tests/gpu/rcp_exhaustive.cu -o /tmp/rcp_exhaustive && timeout 60 /tmp/rcp_exhaustive | tee -a $OUT/exhaustive.txt
$B/moejit warmup specs/ bench/specs/ --arch sm_90a -q | grep -E "^warmup" | tee $OUT/warmup.txt
gpu_tests
echo "== moejit run vs --reference"
timeout 60 python3 tests/gpu/run_npy.py --moejit $B/moejit 2>&1 | tail -2
echo "== activations beside torch"
timeout 240 python3 bench/activation_torch.py --moejit $B/moejit --json $OUT/activation.json 2>&1 | grep -v -E "^\\$|warn|^$" > $OUT/activation.txt; tail -62 $OUT/activation.txt
routing_beside_torch
