#!/usr/bin/env bash
# Tenth session (nvidia-h200): (1) is never-executed code inline what made the lazy builds
# ~0.2 us slower per call? junk = HEAD + a never-taken block of ~500 instructions after the
# selection (a diagnostic only). (2) new = ab55's lazy keys with the records' resolution over a
# ballot of the lazy records (ab55 looped over all 16 with a shared load each) and slot counts
# that are not whole vectors. old = HEAD 51d1e41.
source "$(dirname "$0")/common.sh"
routing_tests
ab_variants "old junk new" kimi_k3 1,8,64,128,256,16384
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
