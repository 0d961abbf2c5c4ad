#!/usr/bin/env bash
# Seventh session, second run (nvidia-h200): the warp routing kernel with the selection recorded
# in shared memory, the key's finite test by one FMA + FSETP, the orderable bits by shift + xor,
# unsigned index math and L1 prefetches of the row and bias (ptxas sinks some vector loads below
# the first keys' math: a second memory round trip per token). [routing] tests, ncu instruction
# counts, then old (HEAD) beside new, three rounds.
source "$(dirname "$0")/common.sh"
routing_tests
ncu_sass dsw deepseek_v3_warp
ncu_sass qww qwen3_warp
ncu_sass glw glm45_warp
ncu_sass k3w kimi_k3_warp
ab_old_new deepseek_v3,kimi_k2,qwen3,glm45 1,16,128,1024,16384 kimi_k3,kimi_k3_block 1,16,128,16384
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
