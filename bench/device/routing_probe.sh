#!/usr/bin/env bash
# One GPU call (nvidia-h200) for the routing latency work of issue 3: the [routing] GPU tests,
# the probe spec (bench/specs/routing_probe.json) with the current build and the variants
# .carry/moejit_old and .carry/moejit_b (earlier builds), where present, a trivial kernel for the per-call floor, and ncu stall reasons.
source "$(dirname "$0")/common.sh"
echo "== [routing] tests"
timeout 240 $B/test_gpu "[routing]" > $OUT/test_routing.txt 2>&1; echo "exit $?"
grep -E "FAILED|test cases|assertions|All tests" $OUT/test_routing.txt | head -8
echo "== trivial kernel (silu d=2048)"
$B/moejit bench bench/specs/activation.json --op silu_2048 --tokens 1 2>&1 | tail -1
for v in old b new; do
  bin=$B/moejit; [ $v != new ] && bin=$B/moejit_$v
  [ -x $bin ] || continue
  echo "== probe, $v"
  timeout 90 $bin bench bench/specs/routing_probe.json --tokens 1,16,128,16384 2>&1 | grep -v "^device" | tee $OUT/probe_$v.txt
done
if [ -n "${NO_NCU:-}" ]; then exit 0; fi
echo "== ncu"
M=gpu__time_duration.sum,smsp__inst_executed.sum,regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio
for op in ds_grouped flat256_warp k3_block; do
  echo "-- $op T=1"
  timeout 60 ncu --kernel-name regex:routing --launch-count 1 --metrics $M $B/moejit bench bench/specs/routing_probe.json --op $op --tokens 1 --calls 1 --replays 1 2>&1 \
    | grep -E "^\s+(gpu__|smsp__)" | awk '$NF+0 >= 0.05 || /gpu__|inst_executed/' | tee -a $OUT/ncu.txt
done
