#!/usr/bin/env bash
# Ninth session (nvidia-h200): HEAD (old, 120e560); late (ab42's new: one reduction a round,
# ties found by a sum of the wins, refills in the rounds as before); new = late + the refill
# test from the cache before the pop (off the chain from the reduction to the refill branch) and
# Kimi-K3's 16 rounds unrolled. ab43/ab44's rounds without refills were dropped (a lane that used
# its cache up forced the exact rounds again: Kimi-K3 T=128 4.4-4.6 us).
source "$(dirname "$0")/common.sh"
routing_tests
ab_variants "old late new" kimi_k3,deepseek_v3,kimi_k2,qwen3,glm45 1,16,128,1024,4096,16384 kimi_k3 64,256
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
for op in kimi_k2 kimi_k3 deepseek_v3; do inst_per_token old $B/moejit_old $op; inst_per_token new $B/moejit $op; done
