#!/usr/bin/env bash
# Runs on the GPU machine (device tool), from the repository root, with .carry/ carried (bench/device/build.sh):
# the [gpu] tests, `moejit check` of every shipped spec (one under compute-sanitizer), the cold
# and warm warmup of all specs, and the activation benchmark beside torch. Full logs go to $OUT.
source "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
echo "== cold warmup (all specs, sm_90a, all cores)"
$B/moejit warmup specs/ bench/specs/ --arch sm_90a -q 2>&1 | tee $OUT/warmup.txt | grep -E "^warmup|^warm start"
echo "== warm start"
$B/moejit warmup specs/ --arch sm_90a -q 2>&1 | grep -E "^warmup|^warm start"
echo "== gpu tests"
$B/test_gpu 2>&1 | tee $OUT/test_gpu.txt | tail -4
echo "== moejit check (all specs)"
for s in specs/*.json; do $B/moejit check $s --tokens 0,1,7,33,1024; done > $OUT/check.txt 2>&1
grep -E "FAIL|^check:|error" $OUT/check.txt | head -20
echo "== compute-sanitizer memcheck"
compute-sanitizer --tool memcheck $B/moejit check specs/kimi-k3.json --tokens 1,7,33 2>&1 | tail -3
echo "== bench"
python3 bench/activation_torch.py --moejit $B/moejit --json $OUT/activation.json 2>&1 | tee $OUT/activation.txt | grep -v "^\\$"
