#!/usr/bin/env bash
# Ninth session (nvidia-h200): ab40's rounds with the tie test moved out of the rounds (each lane
# counts its wins, one sum after the last round; a tie makes the sum exceed K) and the winner's
# store predicated, beside HEAD (120e560). ab40's ballot per round cost the large-T figures
# (Qwen3 16384 8.47 -> 8.96). [routing] tests first; ncu instructions a token.
source "$(dirname "$0")/common.sh"
routing_tests
ab_variants "old new" kimi_k3,deepseek_v3,kimi_k2,qwen3,glm45 1,16,128,1024,16384 kimi_k3_block 1,16,128
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
for op in qwen3 kimi_k3 glm45; do inst_per_token old $B/moejit_old $op; inst_per_token new $B/moejit $op; done
