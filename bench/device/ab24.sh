#!/usr/bin/env bash
# Seventh session, eighth run (nvidia-h200): ss = ab23's new build (scores in shared memory);
# new = ss + the one-key rescan as a tree of pairwise maxima (log2 of the slots deep instead of
# a chain); old = HEAD. [routing] tests of new first.
source "$(dirname "$0")/common.sh"
routing_tests
ab_variants "old ss new" kimi_k3,glm45 1,16,64,128,16384 deepseek_v3,qwen3 1,128,16384
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
