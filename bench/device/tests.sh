#!/usr/bin/env bash
# GPU call (nvidia-h200): the single-GPU [gpu] tests of routing and activations (the PDL chain
# case among them) — the check after a refactor of device code.
source "$(dirname "$0")/common.sh"
timeout 300 $B/test_gpu "[routing],[activation]" > $OUT/test_gpu.txt 2>&1; echo "test_gpu exit $?"
grep -E "FAILED|signal|test cases|assertions|All tests" $OUT/test_gpu.txt | head -12
