#!/usr/bin/env bash
# Tenth session (nvidia-h200): diag50's clock64 phases for three diagnostic builds (not in git):
# diag = HEAD, diag_ilp = the rescan as 4 chains (ab51), diag_warp = warp_refill (ab49); [8] is
# the cache fill's cycles (keys ready -> first round), so rounds = [1] - [8].
source "$(dirname "$0")/common.sh"
for v in diag diag_ilp diag_warp; do
  for T in 4 128; do
    echo "$v T=$T $(k3_run $B/moejit_$v $T $OUT/$v/t$T)"
    python3 bench/device/k3_phases.py "$v T=$T" $OUT/$v/t$T/ids.npy
  done
done
