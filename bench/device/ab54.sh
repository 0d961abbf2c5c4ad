#!/usr/bin/env bash
# Tenth session (nvidia-h200): the lazy fifth key was ~0.2 us slower per call at every small T
# (ab53) though its clock64 phases were faster per token (diag52): is it its code (three inline
# copies of the ~140-instruction resolve, +312 instructions)? lnr = lazy with the resolve
# replaced by a forced exact rerun (2984 instructions, fewer than old's 3256): a diagnostic only.
source "$(dirname "$0")/common.sh"
ab_variants "old new lnr" kimi_k3 1,8,16,64,128,16384
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
