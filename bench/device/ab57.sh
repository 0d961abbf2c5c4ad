#!/usr/bin/env bash
# Tenth session (nvidia-h200): ab56's lazy keys without any rescan code in the rounds (a
# seventh win runs the exact rounds), the records' experts resolved after the last round (new).
# ab56's `junk` showed never-executed code inline costs nothing; lnr (ab54, no resolution, a
# fifth win reran) had no per-call penalty, the builds with a rescan or resolution inside the
# rounds ~0.17 us. old = HEAD 51d1e41.
source "$(dirname "$0")/common.sh"
routing_tests
ab_variants "old new" kimi_k3 1,4,8,64,128,256,1024,16384
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
