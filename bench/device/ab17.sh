#!/usr/bin/env bash
# Sixth session, second run (nvidia-h200): the [activation] GPU tests (also with 128-thread
# scalar blocks), then beside the build before (moejit_old): SituGLU's scalar path with one warp
# vote for tanh and the sigmoid's fast reciprocal, 32-bit offsets, scalar blocks of 256/128/64
# threads; dense against masked (half-full experts) at large T.
# The MOEJIT_* variant knobs were temporary experiment code, removed after the run (the NOTE in
# bench/results/2026-12-01/ says which); on the shipped tree those variants run the shipped code.
source "$(dirname "$0")/common.sh"
echo "== tests"
timeout 200 $B/test_gpu "[activation]" > $OUT/tests_act.txt 2>&1; echo "activation exit $?"; tail -2 $OUT/tests_act.txt
MOEJIT_ACT_SCALAR_BLOCK=128 timeout 200 $B/test_gpu "[activation]" > $OUT/tests_act_b128.txt 2>&1; echo "activation b128 exit $?"; tail -2 $OUT/tests_act_b128.txt
A=bench/specs/activation.json
AOPS=situ_7168,silu_7168,situ_3072,situ_2048,silu_2048,gelu_2048,gelu_tanh_2048,swiglu_oai_2880
for round in 1 2 3; do
  ab_run old $round $B/moejit_old $A $AOPS "1 16 64 128"
  ab_run b256 $round $B/moejit $A $AOPS "1 16 64 128"
  for b in 128 64; do ab_run b$b $round $B/moejit $A $AOPS "1 16 64 128" MOEJIT_ACT_SCALAR_BLOCK=$b; done
  ab_run old $round $B/moejit_old $A situ_7168,silu_7168,situ_3072,silu_2048 "8192 32768"
  ab_run b256 $round $B/moejit $A situ_7168,silu_7168,situ_3072,silu_2048 "8192 32768"
  ab_run old $round $B/moejit_old $A situ_3072_masked,silu_2048_masked "2048 8192"
  ab_run b256 $round $B/moejit $A situ_3072_masked,silu_2048_masked "2048 8192"
done
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
