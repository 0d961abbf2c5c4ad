#!/usr/bin/env bash
# On the GPU machine (device tool, nvidia-h200-x2), from the repository root with .carry/
# carried (bench/device/build.sh): warmup timings, every [gpu] test (tp 2 included), `moejit
# check` of every shipped spec, the `moejit run` GPU test, and a compute-sanitizer pass.
source "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm --format=csv,noheader
echo "== cold warmup of every spec (sm_90a, all cores), then a warm start"
$B/moejit warmup specs/ bench/specs/ --arch sm_90a -q | grep -E "^warmup"
$B/moejit warmup specs/ --arch sm_90a -q | grep -E "^warmup|^warm start"
echo "== [gpu] tests"
timeout 330 $B/test_gpu 2>&1 > $OUT/test_gpu.txt; echo "test_gpu exit $?"
grep -E "FAILED|SKIPPED|test cases|assertions" $OUT/test_gpu.txt | head -12
echo "== moejit check, every spec"
for s in specs/*.json; do timeout 60 $B/moejit check $s --tokens 0,1,7,33,1024; done > $OUT/check.txt 2>&1
grep -E "^FAIL|^check:|error" $OUT/check.txt | head -20
echo "== moejit run vs --reference"
timeout 60 python3 tests/gpu/run_npy.py --moejit $B/moejit 2>&1 | tail -13
echo "== compute-sanitizer memcheck"
timeout 90 compute-sanitizer --tool memcheck $B/moejit check specs/kimi-k3.json --op router,experts_act_masked,tail_tp1 --tokens 1,33 2>&1 | tail -3
