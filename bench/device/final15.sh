#!/usr/bin/env bash
# The tenth session's last GPU call (nvidia-h200): the shipped tree (the lazy-keys warp kernel
# up to 384 tokens, runtime/routing_crossover.json): the [routing] tests and `moejit bench` of the
# five routers at the table's T (final14's torch columns stand: torch did not change).
source "$(dirname "$0")/common.sh"
routing_tests
echo "### new 1" > $OUT/bench.txt
ab_bench $B/moejit bench/specs/routing.json deepseek_v3,kimi_k2,kimi_k3,qwen3,glm45 1,16,128,1024,4096,16384
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
grep -i "copy" $OUT/bench.txt | head -2
