#!/usr/bin/env bash
# Prepared in the fourteenth session; its first half (dense at 32 blocks an SM) ran in the fifteenth
# as act23 (bench/results/2026-12-02-c/act23), its ncu half has not run. The two measurements
# act18 never reached, ~2-3 minutes of device time. Why does a thread striding over its expert's
# rows (the shipped masked grid: ~8 passes at T_max 8192) lose ~7% to dense's one pass?
#   n    the shipped tree (bash bench/device/build.sh; cp .carry/moejit .carry/moejit_n)
#   dp   n with the dense grid held to 32 blocks an SM -- in runtime/activation_op.cpp,
#        `std::min<std::int64_t>(blocks, 0x7fffffff)` -> `std::min<std::int64_t>(blocks, 32 * sm_count_)`,
#        rebuild, `strip -o .carry/moejit_dp build-dev/moejit`, restore
# Run: `timeout 300 bash bench/device/act22.sh; bash bench/device/pack_out.sh` (ncu's reports are
# several files).
# If dp loses what masked loses, the cost is the striding (then: why -- the warp-state section);
# if not, it is the masked kernel's own.
source "$(dirname "$0")/common.sh"
echo "== dense held to 32 blocks an SM"
variants_ab "n dp" dense "" silu_2048,situ_3072 8192,32768
echo "== ncu (clocks left alone): silu 2048, dense 32768 rows, masked T_max 8192 half full, dp"
for case in "silu_2048 32768 n" "silu_2048_masked 8192 n" "silu_2048 32768 dp"; do
  set -- $case
  timeout 90 ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy \
    --kernel-name regex:activation --launch-skip 3 --launch-count 1 $B/moejit_$3 bench bench/specs/activation.json --op $1 --tokens $2 --calls 2 --replays 2 \
    > $OUT/ncu_$1_$3.txt 2>&1
  echo "$case: $(grep -E 'Duration|DRAM Throughput|Achieved Occupancy|Warp Cycles Per Issued' $OUT/ncu_$1_$3.txt | tr -s ' ' | tr '\n' ';')"
done | tee $OUT/ncu.txt
