#!/usr/bin/env bash
# Tenth session (nvidia-h200): the one-key rescan of a used-up cache (Kimi-K3: 28 slots) as 4
# (new) or 7 (ilp7) chains over consecutive slots side by side, merged in slot order, instead of
# one chain through all slots (old = HEAD 51d1e41). The warp-wide refill (ab49) and a dry run of
# it on every token (ab50) showed a refill costs ~0.16 us however it is done across the warp
# (two reductions), and that the code being cold is not the cost. [routing] tests of both first.
source "$(dirname "$0")/common.sh"
routing_tests
echo "== ilp7"; timeout 200 $B/test_gpu_ilp7 "[routing]" > $OUT/tests_ilp7.txt 2>&1; echo "exit $?"; grep -E "FAILED|All tests|test cases" $OUT/tests_ilp7.txt | head -3
ab_variants "old new ilp7" kimi_k3 1,2,4,8,16,32,64,128,256,1024,16384 glm45 1,128,16384
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
