#!/usr/bin/env bash
# Tenth session (nvidia-h200): where a Kimi-K3 token that refills spends its extra time. A
# diagnostic build (not in git) writes, per token, clock64 deltas of its phases into the first
# ids: [0] start -> keys (loads and key math), [1] the selection (cache fill, rounds, a rerun),
# [2] the finish, [3] refills, [4] exact rerun, [5] total, [6] block, [7] warp. Inputs: the
# bench's own (.carry/k3in from bench/device/k3_inputs.cpp, same Rng as `moejit bench`); `moejit
# run --repeat` (L2-warm inputs) prints the median per call; the last call's ids are kept.
source "$(dirname "$0")/common.sh"
for T in 2 4 8 64 128; do
  echo "T=$T $(k3_run $B/moejit_diag $T $OUT/t$T)"
  echo "T=$T old $(k3_run $B/moejit_old $T /tmp/o$T)"
done
echo "swap: T=4 logits, T=8 bias: $(k3_run $B/moejit_old 4 /tmp/s1 4 8)"
echo "swap: T=8 logits, T=4 bias: $(k3_run $B/moejit_old 8 /tmp/s2 8 4)"
for T in 2 4 8 64 128; do python3 bench/device/k3_phases.py "T=$T" $OUT/t$T/ids.npy 8 --no-fill; done
