#!/usr/bin/env bash
# Sixth session, third run (nvidia-h200): activation blocks of 256 (shipped), 512 and 1024
# threads (MOEJIT_ACT_THREADS, a contract field), each path, beside the build before; the
# [activation] tests at 512.
# The MOEJIT_* variant knobs were temporary experiment code, removed after the run (the NOTE in
# bench/results/2026-12-01/ says which); on the shipped tree those variants run the shipped code.
source "$(dirname "$0")/common.sh"
MOEJIT_ACT_THREADS=512 timeout 200 $B/test_gpu "[activation]" > $OUT/tests_act_t512.txt 2>&1; echo "activation t512 exit $?"; tail -2 $OUT/tests_act_t512.txt
A=bench/specs/activation.json
AOPS=situ_7168,silu_7168,situ_3072,situ_2048,silu_2048,gelu_2048,swiglu_oai_2880
for round in 1 2 3; do
  ab_run old $round $B/moejit_old $A $AOPS "1 16 128"
  for t in 256 512 1024; do ab_run t$t $round $B/moejit $A $AOPS "1 16 128" MOEJIT_ACT_THREADS=$t; done
  ab_run old $round $B/moejit_old $A situ_7168,situ_3072,silu_2048 "8192"
  ab_run old $round $B/moejit_old $A situ_3072_masked,silu_2048_masked "2048"
  for t in 256 512; do
    ab_run t$t $round $B/moejit $A situ_7168,situ_3072,silu_2048 "8192" MOEJIT_ACT_THREADS=$t
    ab_run t$t $round $B/moejit $A situ_3072_masked,silu_2048_masked "2048" MOEJIT_ACT_THREADS=$t
  done
done
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
