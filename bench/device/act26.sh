#!/usr/bin/env bash
# Prepared in the fifteenth session, run in the sixteenth (with an ncu section added), ~6 minutes of device time.
# act23 found dense SituGLU 3072 3.8% / 4.4% faster at 8192 / 32768 rows when its grid is held to
# 32 blocks an SM (each thread striding over ~8 chunks) instead of one chunk a thread, while silu
# lost 5.7% at 32768 (bench/results/2026-12-02-c/act23). Which kinds and widths gain, and at what
# cap? The answer decides a per-kind dense grid (the compute-heavy kinds capped, silu not).
# Build here: `bash bench/device/build_act26.sh` (all of the variants below into .carry/).
#   n      the shipped tree (bash bench/device/build.sh; cp .carry/moejit .carry/moejit_n)
#   dp32   n with the dense grid held to 32 blocks an SM -- in runtime/activation_op.cpp,
#          `std::min<std::int64_t>(blocks, 0x7fffffff)` -> `std::min<std::int64_t>(blocks, 32 * sm_count_)`,
#          `cmake --build build-dev --target moejit_cli`, `strip -o .carry/moejit_dp32 build-dev/moejit`
#   dp16   the same with 16 * sm_count_ (moejit_dp16); dp64, dp8 with 64 and 8 (one resident wave,
#          a static share a block); restore with `git checkout HEAD -- runtime`
# The dp64 ... dp8 ladder also tests the fifteenth session's suspect for striding's cost to silu:
# a ragged end, some SMs finishing their last blocks later than others, which grows with a
# block's length (passes a thread: dp64 ~4, dp32 ~8, dp16 ~16, dp8 ~31 at 32768 rows). If silu's
# loss grows with it, blocks whose lengths shrink towards the end of the grid (guided sizes) are
# the next design for the masked grid.
# Run: `timeout 560 bash bench/device/act26.sh; bash bench/device/pack_out.sh`.
source "$(dirname "$0")/common.sh"
echo "== dense silu and SituGLU: one chunk a thread (n) against 64, 32, 16 and 8 blocks an SM"
variants_ab "n dp64 dp32 dp16 dp8" ladder "" silu_2048,situ_3072 8192,32768
echo "== dense, the other kinds and widths: n against 32 and 16 blocks an SM"
variants_ab "n dp32 dp16" dense "" silu_7168,situ_2048,situ_7168,gelu_2048,gelu_tanh_2048,swiglu_oai_2880 8192,32768
echo "== ncu (clocks left alone): silu 2048 dense 32768 rows at each grid, masked T_max 8192 half full"
echo "   (sm__cycles_active min/avg/max against the elapsed cycles: how ragged each grid's end is)"
for case in "silu_2048 32768 n" "silu_2048 32768 dp64" "silu_2048 32768 dp32" "silu_2048 32768 dp8" "silu_2048_masked 8192 n"; do
  set -- $case
  timeout 90 ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy \
    --metrics sm__cycles_active.min,sm__cycles_active.avg,sm__cycles_active.max,gpc__cycles_elapsed.max,dram__bytes_read.sum,dram__bytes_write.sum \
    --kernel-name regex:activation --launch-skip 3 --launch-count 1 $B/moejit_$3 bench bench/specs/activation.json --op $1 --tokens $2 --calls 2 --replays 2 \
    > $OUT/ncu_$1_$3.txt 2>&1
  echo "$case: $(grep -E 'Duration|DRAM Throughput|Achieved Occupancy|Warp Cycles Per Issued|sm__cycles_active|gpc__cycles_elapsed|dram__bytes' $OUT/ncu_$1_$3.txt | tr -s ' ' | tr '\n' ';')"
done | tee $OUT/ncu.txt
