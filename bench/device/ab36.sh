#!/usr/bin/env bash
# Eighth session (nvidia-h200): the bias through shared memory (each block copies it once; every
# warp reads its slots there) beside HEAD (2d6ab9e): Kimi-K3 took 3.85 us at T=128 with its bias
# read by every warp from global memory, 3.51 without a bias (diag30). [routing] tests first.
source "$(dirname "$0")/common.sh"
routing_tests
ab_variants "head new" kimi_k3,deepseek_v3,kimi_k2,glm45 1,16,64,128,256,1024,4096,16384
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
