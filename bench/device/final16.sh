#!/usr/bin/env bash
# Eleventh session's closing run (nvidia-h200), the shipped activations (SituGLU's and
# swiglu_oai's sigmoid reciprocal by rcp_fast): every [activation] GPU test (with the new masked
# case past 2^31 input elements), rcp_fast against __frcp_rn for every float in [1, 2^126), then
# the activation table beside torch eager and torch.compile (masked at 256-32768 real rows).
source "$(dirname "$0")/common.sh"
gpu_tests "[activation]"
nvcc -arch=sm_90a -I templates tests/gpu/rcp_exhaustive.cu -o /tmp/rcp_exhaustive && timeout 60 /tmp/rcp_exhaustive | tee $OUT/exhaustive.txt
echo "== activations beside torch"
timeout 330 python3 bench/activation_torch.py --moejit $B/moejit --json $OUT/activation.json 2>&1 |
  grep -v -E "^\\$|warn|UserWarning" > $OUT/activation.txt
tail -45 $OUT/activation.txt
