#!/usr/bin/env bash
# Eighth session, fifth GPU call (nvidia-h200): Kimi-K3 (28 keys a lane, top 16) with a cache of
# 5 or 6 keys a lane (c5, c6) instead of 4, now that its keys cost fewer instructions: the
# rescans of a used-up cache are what makes T=128 slower than T=16 (3.86 vs 3.48 us).
source "$(dirname "$0")/common.sh"
ab_variants "old new c5 c6" kimi_k3 1,16,64,128,1024,16384
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
