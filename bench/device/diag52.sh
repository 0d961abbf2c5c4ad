#!/usr/bin/env bash
# Tenth session (nvidia-h200): diag51's clock64 phases for HEAD (diag) and the lazy fifth key
# (diag_lazy; ab53: +0.2 us at every small T) at T=8 and 128, to see which phase grew.
source "$(dirname "$0")/common.sh"
for v in diag diag_lazy; do
  for T in 8 128; do
    echo "$v T=$T $(k3_run $B/moejit_$v $T $OUT/$v/t$T)"
    python3 bench/device/k3_phases.py "$v T=$T" $OUT/$v/t$T/ids.npy
  done
done
