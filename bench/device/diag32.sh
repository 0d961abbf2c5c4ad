#!/usr/bin/env bash
# Eighth session (nvidia-h200): Kimi-K3 grows 0.39 us from T=16 to 128 with its bias, 0.10
# without (diag30), and staging the bias in shared memory did not change that (ab36). With a bias
# the scores also go to shared memory for the finish (kScoresShared); ns = without that.
source "$(dirname "$0")/common.sh"
ab_variants "new ns" kimi_k3 1,16,64,128,256
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
