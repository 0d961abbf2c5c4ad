#!/usr/bin/env bash
# Twelfth session (nvidia-h200), issue 2, SituGLU at T = 16. o = base (HEAD 158f0ba + bench
# --hot) with SituGLU's and swiglu_oai's sigmoid range check once a chunk, after every value's
# fast path, the chunk redone with __frcp_rn where one was out of range (a branch a value was a
# scheduling barrier: SituGLU's tanh and sigmoid chains ran one after the other): 40-48
# registers for SituGLU. o2 = o on the scalar path only (the vector path keeps a branch a value:
# 32 registers). [activation] tests with both; then ncu's warp states at T = 16.
source "$(dirname "$0")/common.sh"
SPEC=bench/specs/activation.json
tests_of $B/test_gpu_o o "[activation]"
tests_of $B/test_gpu o2 "[activation]"
SPEC=$SPEC BASE=none ab_variants "base o o2" \
  situ_2048,situ_3072,situ_7168,swiglu_oai_2880 1,16,128,1024,32768 \
  situ_3072_masked 64,256,2048,8192 \
  silu_7168,gelu_2048 1,16
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
for v in base o2; do
  timeout 120 ncu --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy \
    --kernel-name regex:activation --launch-count 1 $B/moejit_$v bench $SPEC --op situ_7168 --tokens 16 --calls 1 --replays 1 > $OUT/ncu_$v.txt 2>&1
  echo "== ncu $v"; grep -E "Duration|Warp Cycles Per Issued|Stall|Issued Warp|No Eligible|Active Warps Per|Eligible Warps|Achieved Occupancy|Registers Per|Waves" $OUT/ncu_$v.txt | head -24
done
