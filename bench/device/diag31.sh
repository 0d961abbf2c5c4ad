#!/usr/bin/env bash
# Eighth session (nvidia-h200): is Kimi-K3's growth from T=16 to 128 (3.45 -> 3.85 us, more with
# more work a token) two blocks landing on one SM? s1 = the warp kernel launched with 120 KB of
# dynamic shared memory (one block per SM at most), beside new.
source "$(dirname "$0")/common.sh"
ab_variants "new s1" kimi_k3,deepseek_v3,kimi_k2 1,16,64,128,256
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
