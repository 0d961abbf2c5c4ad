#!/usr/bin/env bash
# One GPU call (nvidia-h200), fourth session, issue 2: tanh without per-element branches; the
# masked layout's grids: flat list over MOEJIT_X_WAVES x resident blocks (.carry/moejit) and one
# grid row per expert (.carry/moejit_pe; waves 0 = the shipped 32 blocks per SM, else waves x
# resident blocks in all), beside the dense ops of the same run.
source "$(dirname "$0")/common.sh"
echo "== tanh_exhaustive"
nvcc -arch=sm_90a -I templates tests/gpu/tanh_exhaustive.cu -o /tmp/tanh_exhaustive && timeout 60 /tmp/tanh_exhaustive | tee $OUT/tanh.txt
echo "== [activation] tests"
timeout 300 $B/test_gpu "[activation]" > $OUT/test_gpu.txt 2>&1; echo "test_gpu exit $?"
grep -E "FAILED|signal|test cases|assertions|All tests" $OUT/test_gpu.txt | head -12
S=bench/specs/activation.json
for v in old new; do
  bin=$B/moejit; [ $v = old ] && bin=$B/moejit_old
  timeout 120 $bin bench $S --op situ_2048,situ_3072,situ_7168,silu_2048 --tokens 1,16,128,1024,8192,32768 > $OUT/dense_$v.txt 2>&1
done
M="--op situ_3072_masked,silu_2048_masked --tokens 16,256,2048,8192"
for round in 1 2; do
  for w in 1 4; do MOEJIT_X_WAVES=$w timeout 60 $B/moejit bench $S $M > $OUT/masked_flat$w.txt 2>&1; done
  for w in 0 4; do MOEJIT_X_WAVES=$w timeout 60 $B/moejit_pe bench $S $M > $OUT/masked_pe$w.txt 2>&1; done
done
echo "== dense (old | new)"
paste -d'|' $OUT/dense_old.txt $OUT/dense_new.txt | cut -c1-75,84-160 | grep -v device
for f in flat1 flat4 pe0 pe4; do echo "== masked $f"; grep masked $OUT/masked_$f.txt; done
