#!/usr/bin/env bash
# One GPU call (nvidia-h200) for the activation work of issue 2: the [activation] GPU tests, the
# side-by-side benchmark with torch, build variants (.carry/moejit_VARIANT) on chosen shapes, and an ncu look at SituGLU at large T.
source "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
echo "== [activation] tests"
timeout 200 $B/test_gpu "[activation]" > $OUT/test_act.txt 2>&1; echo "exit $?"
grep -E "FAILED|test cases|assertions|ulp" $OUT/test_act.txt | head -12
echo "== side by side"
timeout 200 python3 bench/activation_torch.py --moejit $B/moejit --json $OUT/activation.json 2>&1 | grep -v "^\\$" | tee $OUT/activation.txt
OPS=silu_2048,silu_3072,silu_7168,situ_2048,situ_3072,situ_7168,gelu_2048
for v in f8; do
  [ -x $B/moejit_$v ] || continue
  echo "== variant $v"
  timeout 60 $B/moejit_$v bench bench/specs/activation.json --op $OPS --tokens 16,64,128,256 2>&1 | tee $OUT/variant_$v.txt
  timeout 60 $B/moejit bench bench/specs/activation.json --op $OPS --tokens 16,64,128,256 2>&1 | tee $OUT/variant_base.txt
done
echo "== ncu situ_7168 T=32768"
timeout 90 ncu --kernel-name regex:activation --launch-count 1 --metrics sm__inst_executed.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,gpu__time_duration.sum,smsp__issue_active.avg.pct_of_peak_sustained_active \
  $B/moejit bench bench/specs/activation.json --op situ_7168 --tokens 32768 --calls 1 --replays 1 2>&1 | grep -E "^\s+(sm__|dram__|launch__|gpu__|smsp__)" | tee $OUT/ncu.txt
echo "== moejit run vs --reference"
timeout 60 python3 tests/gpu/run_npy.py --moejit $B/moejit 2>&1 | tail -4
