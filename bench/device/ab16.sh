#!/usr/bin/env bash
# Sixth session, first run (nvidia-h200): div_rcp_sweep; the [routing] and [activation] GPU tests
# (routing also with the block kernel at 4 warps); then beside the build before (moejit_old):
# activations with the small path at 1 (scalars), 2 and 4 elements a thread and 32-bit offsets;
# routing (softmax sum by redux, division by the row's reciprocal, block kernel rounds on key
# halves at 2/4/7 warps for Kimi-K3).
# The MOEJIT_* variant knobs were temporary experiment code, removed after the run (the NOTE in
# bench/results/2026-12-01/ says which); on the shipped tree those variants run the shipped code.
source "$(dirname "$0")/common.sh"
nvcc -arch=sm_90a -I templates tests/gpu/div_rcp_sweep.cu -o /tmp/div_rcp_sweep && timeout 120 /tmp/div_rcp_sweep | tee $OUT/div_rcp_sweep.txt
echo "== tests"
timeout 200 $B/test_gpu "[routing]" > $OUT/tests_routing.txt 2>&1; echo "routing exit $?"; tail -3 $OUT/tests_routing.txt
MOEJIT_BLOCK_WARPS=4 timeout 200 $B/test_gpu "[routing]" > $OUT/tests_routing_bw4.txt 2>&1; echo "routing bw4 exit $?"; tail -3 $OUT/tests_routing_bw4.txt
for sv in 2 4; do
  MOEJIT_ACT_SMALL_VEC=$sv timeout 200 $B/test_gpu "[activation]" > $OUT/tests_act_sv$sv.txt 2>&1; echo "activation sv$sv exit $?"; tail -3 $OUT/tests_act_sv$sv.txt
done
A=bench/specs/activation.json R=bench/specs/routing.json
AOPS=situ_7168,silu_7168,situ_2048,silu_2048,gelu_2048,swiglu_oai_2880
ROPS=qwen3,deepseek_v3,glm45,kimi_k2,kimi_k3
for round in 1 2 3; do
  ab_run old $round $B/moejit_old $A $AOPS "1 16 64 128"
  for sv in 1 2 4; do ab_run sv$sv $round $B/moejit $A $AOPS "1 16 64 128" MOEJIT_ACT_SMALL_VEC=$sv; done
  ab_run old $round $B/moejit_old $A situ_7168,situ_3072_masked,silu_2048_masked "2048 8192"
  ab_run sv2 $round $B/moejit $A situ_7168,situ_3072_masked,silu_2048_masked "2048 8192"
  ab_run old $round $B/moejit_old $R $ROPS,kimi_k3_block "1 16 128 1024 16384"
  ab_run new $round $B/moejit $R $ROPS,kimi_k3_block "1 16 128 1024 16384"
  for w in 2 4; do ab_run bw$w $round $B/moejit $R kimi_k3_block "1 16 128 1024" MOEJIT_BLOCK_WARPS=$w; done
done
ncu_sass qwen3_new qwen3_warp
ncu_sass ds_new deepseek_v3_warp
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
