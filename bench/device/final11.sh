#!/usr/bin/env bash
# The closing GPU call of the eighth session (nvidia-h200): every [gpu] test (multi-GPU cases
# skip on one GPU), the routing table beside torch eager / torch.compile with the block/warp
# crossover, cold warmup of every shipped and bench spec, and the `moejit run` test.
source "$(dirname "$0")/common.sh"
gpu_tests
routing_beside_torch
$B/moejit warmup specs/ bench/specs/ --arch sm_90a -q | grep -E "^warmup" | tee $OUT/warmup.txt
echo "== moejit run vs --reference"
timeout 60 python3 tests/gpu/run_npy.py --moejit $B/moejit 2>&1 | tail -2
