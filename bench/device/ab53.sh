#!/usr/bin/env bash
# Tenth session (nvidia-h200): the lazy fifth key (kLazyFifthFor): the cache fill also keeps a
# lane's fifth-largest upper half, so its fourth win takes that as the head (expert unresolved)
# instead of rescanning; only a fifth win rescans (new). old = HEAD 51d1e41. [routing] tests
# first (their crowded-lane rows drive a lane through all 16 rounds).
source "$(dirname "$0")/common.sh"
routing_tests
ab_variants "old new" kimi_k3 1,2,4,8,16,32,64,128,256,1024,4096,16384
inst_per_token old $B/moejit_old kimi_k3
inst_per_token new $B/moejit kimi_k3
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
