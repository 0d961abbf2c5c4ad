#!/usr/bin/env bash
# Tenth session (nvidia-h200): Kimi-K3 with the refill as ~40 instructions across the warp
# (warp_refill: one reduction and a ballot) -- w2 -- and the same with a 96-register budget on
# sm_90a, with which ptxas issues all 14 load vectors first (new); old = HEAD 51d1e41. The
# clock64 phases (diag50/51) of a diagnostic build of new at T=4 and 128.
source "$(dirname "$0")/common.sh"
routing_tests
ab_variants "old w2 new" kimi_k3 1,2,4,8,16,32,64,128,256,1024,4096,16384
inst_per_token old $B/moejit_old kimi_k3
inst_per_token new $B/moejit kimi_k3
for T in 4 128; do
  k3_run $B/moejit_diag_w2mb5 $T $OUT/diag/t$T > /dev/null
  python3 bench/device/k3_phases.py "diag_w2mb5 T=$T" $OUT/diag/t$T/ids.npy
done
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
