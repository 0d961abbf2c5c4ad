#!/usr/bin/env bash
# Eighth session, third GPU call (nvidia-h200): GLM-4.5 lost 0.07 us at T=1 and 0.08 at 16384
# in ab31. Which part: `fin` = new but biased keys by a finite test (no second FMA), `early` =
# new but rule 6 tested up front (no test after the selection), beside old and new. Then GLM's
# per-line instruction counts, old and new.
source "$(dirname "$0")/common.sh"
ab_variants "old fin early new" glm45,kimi_k2,kimi_k3,deepseek_v3 1,128,16384
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
ncu_sass glm_old glm45_warp $B/moejit_old
ncu_sass glm_new glm45_warp $B/moejit
