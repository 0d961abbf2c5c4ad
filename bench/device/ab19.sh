#!/usr/bin/env bash
# Sixth session, fourth run (nvidia-h200): the masked layout's blocks per SM in all (a temporary
# launcher knob, MOEJIT_ACT_MASKED_TARGET: 8 = one wave of resident blocks, 16, 32 = shipped, 48)
# beside dense at the same real rows (8 experts half full).
# The knob was temporary experiment code, removed after the run; on the shipped tree every variant
# runs the shipped 32.
source "$(dirname "$0")/common.sh"
MOEJIT_ACT_MASKED_TARGET=8 timeout 200 $B/test_gpu "[activation]" > $OUT/tests_t8.txt 2>&1; echo "activation t8 exit $?"; tail -2 $OUT/tests_t8.txt
A=bench/specs/activation.json
for round in 1 2 3; do
  ab_run dense $round $B/moejit $A situ_3072,silu_2048 "8192 32768"
  for t in 8 16 32 48; do ab_run t$t $round $B/moejit $A situ_3072_masked,silu_2048_masked "2048 8192" MOEJIT_ACT_MASKED_TARGET=$t; done
done
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
