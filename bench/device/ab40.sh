#!/usr/bin/env bash
# Ninth session (nvidia-h200): selection rounds with one reduction on the dependency chain (the
# lane holding the largest upper half wins; a tie between lanes is only noted by a ballot and
# then the exact rounds run again) beside HEAD (120e560, two dependent reductions a round).
# [routing] tests first (they include rows of equal logits: the tie path).
source "$(dirname "$0")/common.sh"
routing_tests
ab_variants "old new" kimi_k3,deepseek_v3,kimi_k2,qwen3,glm45 1,16,128,1024,16384 kimi_k3_block,kimi_k2_block 1,16,128
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
