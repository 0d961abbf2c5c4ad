#!/usr/bin/env bash
# Seventh session (nvidia-h200): [routing] tests of the tree (nb); old (HEAD) beside nb (the
# selection recorded in shared memory, FMA+FSETP finite test, shift+xor orderable bits, unsigned
# index math, a register budget so ptxas issues the row's loads first, no pop after the last
# round, no refill test before a cache can run out, whole-lane caches up to 4 keys) and beside
# ballot (nb + a round whose winner is known from a ballot, the lowest-expert reduction only on
# ties). ncu instruction counts of nb.
source "$(dirname "$0")/common.sh"
routing_tests
ncu_sass dsw deepseek_v3_warp
ncu_sass qww qwen3_warp
ab_variants "old nb ballot" deepseek_v3,kimi_k2,qwen3,glm45 1,16,128,1024,16384 kimi_k3 1,16,128,16384
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
