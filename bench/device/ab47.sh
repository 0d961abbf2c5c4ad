#!/usr/bin/env bash
# Ninth session (nvidia-h200): the winner's record by one predicated st.shared (inline PTX)
# instead of `if (won) rec[k] = ...`, which ptxas compiled into the shared address rebuilt under
# the predicate every round (~7 instructions: Kimi-K2 16384 16.7 -> 17.5 us, +55 a token), beside
# HEAD 120e560 (old). [routing] tests, the A/B, ncu instructions a token, and the routing table
# beside torch with the crossover (the shipped tree if kept).
source "$(dirname "$0")/common.sh"
routing_tests
ab_variants "old new" kimi_k3,deepseek_v3,kimi_k2,qwen3,glm45 1,16,128,1024,16384
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
for op in kimi_k2 deepseek_v3; do inst_per_token new $B/moejit $op; done
routing_beside_torch
