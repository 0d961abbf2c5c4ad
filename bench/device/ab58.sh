#!/usr/bin/env bash
# Tenth session (nvidia-h200): the lazy keys as a third warp kernel (Refill::lazy) that the
# launcher takes up to runtime/routing_crossover.json's lazy_keys_max_tokens. Where is that
# crossover? plain = built with it 0 (the vector warp kernel of HEAD 51d1e41 at every T), lazy =
# built with it 10^9 (ab57's kernel at every T); new = the tree as committed (the [routing]
# tests run on it: lazy for their small T, plain for 1024 and 16384).
source "$(dirname "$0")/common.sh"
routing_tests
BASE=none ab_variants "plain lazy" kimi_k3 1,4,128,256,384,512,640,768,1024,2048,16384
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
