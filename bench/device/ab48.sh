#!/usr/bin/env bash
# Ninth session (nvidia-h200): Kimi-K3's loop of rounds unrolled by 2 (shipped, e7198ec), 4 (u4)
# or 7 (u7; all 14 unrolled was slower: ab45). [routing] tests of u4 and u7 first.
source "$(dirname "$0")/common.sh"
for v in u4 u7; do echo "== $v"; timeout 200 $B/test_gpu_$v "[routing]" > $OUT/tests_$v.txt 2>&1; echo "exit $?"; grep -E "FAILED|All tests|test cases" $OUT/tests_$v.txt | head -3; done
ab_variants "new u4 u7" kimi_k3 1,16,128,256,1024,16384
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
