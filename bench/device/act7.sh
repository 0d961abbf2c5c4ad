#!/usr/bin/env bash
# Eighth session (nvidia-h200), issue 2: the masked layout's grid with 24 or 20 blocks per SM in
# all (t24, t20) beside the shipped 32 (t32): at 8192 real rows the masked kernel ran 1.2-1.9%
# behind dense per real row with ~2.9 chunks a thread against dense's 4 (more, shorter blocks).
# Masked at T_max 256/2048/8192 (half full: 1024/8192/32768 real rows), dense at those row counts.
source "$(dirname "$0")/common.sh"
SPEC=bench/specs/activation.json BASE=t32 ab_variants "t32 t24 t20" situ_3072_masked,silu_2048_masked 256,2048,8192 \
  situ_3072,silu_2048 1024,8192,32768
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
grep -m3 -E "^op|masked" $OUT/bench.txt | head -3
