#!/usr/bin/env bash
# Twelfth session (nvidia-h200), issue 2, masked against dense per real row. base = HEAD 158f0ba
# + `moejit bench --hot`; g = base + the masked grid of dense for a half-full expert (capped at 32
# blocks an SM as before). Each variant's masked ops with the counts rotated like the inputs
# (`V`) and kept in L2 (`Vhot`: --hot expert_num_tokens, as after the dispatch and grouped GEMM
# that write and read them), dense at the same real rows. Then ncu's warp states of SituGLU and
# silu d 7168 at T = 16 (what the T = 16 time waits on).
source "$(dirname "$0")/common.sh"
SPEC=bench/specs/activation.json
echo "== [activation] tests (g)"
timeout 300 $B/test_gpu "[activation]" > $OUT/tests.txt 2>&1; echo "exit $?"
grep -E "FAILED|test cases|assertions|All tests" $OUT/tests.txt | head -6
for round in 1 2 3; do
  for v in base g; do
    bin=$B/moejit_$v
    echo "### $v $round" >> $OUT/bench.txt
    timeout 60 $bin bench $SPEC --op situ_3072_masked,silu_2048_masked --tokens 64,256,2048,8192 >> $OUT/bench.txt 2>&1
    timeout 60 $bin bench $SPEC --op situ_3072,silu_2048 --tokens 256,1024,8192,32768 >> $OUT/bench.txt 2>&1
    echo "### ${v}hot $round" >> $OUT/bench.txt
    timeout 60 $bin bench $SPEC --op situ_3072_masked,silu_2048_masked --tokens 64,256,2048,8192 --hot expert_num_tokens >> $OUT/bench.txt 2>&1
  done
done
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
for op in situ_7168 silu_7168; do
  timeout 120 ncu --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section LaunchStats \
    --kernel-name regex:activation --launch-skip 2 --launch-count 1 $B/moejit_g bench $SPEC --op $op --tokens 16 --calls 1 --replays 1 > $OUT/ncu_$op.txt 2>&1
  grep -E "Duration|Warp Cycles Per Issued|Stall|Issued Warp|No Eligible|Active Warps Per|Eligible Warps|Achieved Occupancy|Registers|Grid Size|Waves" $OUT/ncu_$op.txt | head -30
done
