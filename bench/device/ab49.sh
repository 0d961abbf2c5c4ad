#!/usr/bin/env bash
# Tenth session (nvidia-h200): a used-up cache refilled by the whole warp (warp_refill: the owner
# writes its keys to shared memory, each lane takes one slot, two reductions) instead of the
# lane's own rescan, for 16+ keys a lane (Kimi-K3). new = the working tree, old = HEAD 51d1e41.
# The bench's Kimi-K3 inputs rescan once at T=4 and 64 and twice at T=128 (a CPU simulation of
# the bench's inputs): those are the T to watch, against T=2, 8, 32.
source "$(dirname "$0")/common.sh"
routing_tests
ab_variants "old new" kimi_k3 1,2,4,8,16,32,64,128,256,1024,4096,16384 kimi_k3_block 1,4,128
inst_per_token old $B/moejit_old kimi_k3
inst_per_token new $B/moejit kimi_k3
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
