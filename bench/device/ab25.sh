#!/usr/bin/env bash
# Seventh session, last experiment (nvidia-h200): the sigmoid's out-of-range test by a float sum
# of the denominators (FADDs, FMA pipe) instead of an integer maximum of their bits (ALU pipe),
# beside HEAD (old). [routing] tests first (their third variant has rows 70-150 below their max,
# which take the rare path).
source "$(dirname "$0")/common.sh"
routing_tests
ab_old_new deepseek_v3,glm45 1,128,16384 kimi_k2,kimi_k3 1,16384
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
