#!/usr/bin/env bash
# Ninth session (nvidia-h200): HEAD (old, 120e560); late (ab42's new); new = ab43's fast rounds
# without refills plus a spare: each lane's next key below its cache, found off the chain, joins
# the cache after round kCache - 1 (ab43 reran the exact rounds for every lane that used up its
# cache: Kimi-K3 T=128 4.58 us, one token of the 128 enough). The [routing] tests now have rows
# whose best keys crowd into one lane (the spare and the rerun both run).
source "$(dirname "$0")/common.sh"
routing_tests
ab_variants "old late new" kimi_k3,deepseek_v3,kimi_k2,qwen3,glm45 1,16,128,1024,4096,16384 kimi_k3_block 1,128
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
for op in kimi_k2 kimi_k3 deepseek_v3 glm45; do inst_per_token old $B/moejit_old $op; inst_per_token new $B/moejit $op; done
