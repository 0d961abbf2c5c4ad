#!/usr/bin/env bash
# Ninth session (nvidia-h200): HEAD (old, 120e560); late (ab42's new: one reduction a round, ties
# found by a sum of the wins); new = late + fast rounds without refills (a used-up cache's lane
# stops winning; after the last round such a lane checks its best key below the cache against
# the last round's, and the exact rounds run again if it reaches it), so the rounds unroll for
# Kimi-K3 too. [routing] tests first; ncu instructions a token.
source "$(dirname "$0")/common.sh"
routing_tests
ab_variants "old late new" kimi_k3,deepseek_v3,kimi_k2,qwen3,glm45 1,16,128,1024,16384 kimi_k3_block 1,128
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
for op in kimi_k2 kimi_k3 deepseek_v3; do inst_per_token old $B/moejit_old $op; inst_per_token new $B/moejit $op; done
