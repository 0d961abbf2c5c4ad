#!/usr/bin/env bash
# One GPU call (nvidia-h200), fourth session, issue 2: tanh_accurate against tanhf on every fp32
# input; the [routing] and [activation] GPU tests; SituGLU's shorter tanh and the masked layout's
# flat grid (.carry/moejit) beside the build before them (.carry/moejit_old), alternating.
source "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
echo "== tanh_exhaustive"
nvcc -arch=sm_90a -I templates tests/gpu/tanh_exhaustive.cu -o /tmp/tanh_exhaustive && timeout 60 /tmp/tanh_exhaustive | tee $OUT/tanh.txt
echo "== [routing],[activation] tests"
timeout 300 $B/test_gpu "[routing],[activation]" > $OUT/test_gpu.txt 2>&1; echo "test_gpu exit $?"
grep -E "FAILED|signal|test cases|assertions|All tests" $OUT/test_gpu.txt | head -12
OPS=situ_2048,situ_3072,situ_7168,silu_2048,silu_7168
for round in 1 2; do
  for v in old new; do
    bin=$B/moejit; [ $v = old ] && bin=$B/moejit_old
    timeout 120 $bin bench bench/specs/activation.json --op $OPS --tokens 1,16,128,1024,8192,32768 > $OUT/ab_${v}_$round.txt 2>&1
    timeout 60 $bin bench bench/specs/activation.json --op situ_3072_masked,silu_2048_masked --tokens 16,256,2048,8192 >> $OUT/ab_${v}_$round.txt 2>&1
  done
done
echo "== A/B (old | new, round 2)"
paste -d'|' $OUT/ab_old_2.txt $OUT/ab_new_2.txt | cut -c1-200
