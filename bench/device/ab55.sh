#!/usr/bin/env bash
# Tenth session (nvidia-h200): lazy keys, compact (new): the fill also keeps each lane's fifth
# and sixth upper halves, its fourth and fifth wins take them with the expert unresolved, the
# records get their experts after the last round (one copy of that code), and only a seventh win
# rescans (a rolled loop over the keys in shared memory). old = HEAD 51d1e41. ab53's lazy build
# had three inline copies of an unrolled rescan and was ~0.2 us slower per call (ab54).
source "$(dirname "$0")/common.sh"
routing_tests
ab_variants "old new" kimi_k3 1,2,4,8,16,32,64,128,256,1024,4096,16384
inst_per_token new $B/moejit kimi_k3
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
