#!/usr/bin/env bash
# Ninth session (nvidia-h200): HEAD (old, 120e560) beside ab41's rounds (cnt: wins counted, one
# sum after the last round) and new: the sum over the popping rounds only, issued beside the last
# round's reduction, the last round's ties by a ballot. [routing] tests first; ncu instructions
# a token for Kimi-K2 (slower at 16384 in ab41) and DeepSeek-V3.
source "$(dirname "$0")/common.sh"
routing_tests
ab_variants "old cnt new" kimi_k3,deepseek_v3,kimi_k2,qwen3,glm45 1,16,128,1024,16384
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
for op in kimi_k2 deepseek_v3; do inst_per_token old $B/moejit_old $op; inst_per_token new $B/moejit $op; done
