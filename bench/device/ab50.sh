#!/usr/bin/env bash
# Tenth session (nvidia-h200): is the ~0.2 us a Kimi-K3 token pays for a refill the refill's code
# being cold in the SM's instruction caches? new = warp_refill (ab49), dry = new with the refill
# branch also taken, as a dry run (no owner: nothing written), at rounds 1 and 2 by every token
# (each unrolled copy of the loop's round runs its refill code once), old = HEAD 51d1e41.
source "$(dirname "$0")/common.sh"
ab_variants "old new dry" kimi_k3 1,2,4,8,16,32,64,128,256,16384
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
