#!/usr/bin/env bash
# Ninth session (nvidia-h200): late (ab42's new) beside pre (late + the refill test from the
# cache before the pop, rounds still in a loop for Kimi-K3) and u2 (pre + the loop unrolled by
# two). ab45 unrolled all of Kimi-K3's rounds: slower at T <= 256 (3.27 vs 3.17 at T=16).
source "$(dirname "$0")/common.sh"
ab_variants "late pre u2" kimi_k3 1,16,64,128,256,16384 kimi_k2,glm45 1,128,16384
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
