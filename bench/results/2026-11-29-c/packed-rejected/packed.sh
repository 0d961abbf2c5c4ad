#!/usr/bin/env bash
# GPU call (nvidia-h200) for the packed warp routing kernel: the [routing] tests with at most 16
# experts per lane (.carry/test_gpu, the default) and with 32 (.carry/test_gpu_p32), then warp vs
# packed at large T for both builds (bench/specs/routing_packed*.json).
source "$(dirname "$0")/common.sh"
for v in p16 p32; do
  t=$B/test_gpu; [ $v = p32 ] && t=$B/test_gpu_p32
  echo "== [routing] tests, $v"
  timeout 200 $t "[routing]" > $OUT/test_routing_$v.txt 2>&1; echo "exit $?"
  grep -E "FAILED|test cases|assertions|All tests" $OUT/test_routing_$v.txt | head -8
done
T=128,256,512,1024,2048,4096,8192,16384
echo "== warp vs packed, at most 16 experts per lane"
timeout 120 $B/moejit bench bench/specs/routing_packed.json --tokens $T 2>&1 | tee $OUT/packed_p16.txt
echo "== warp vs packed, at most 32 experts per lane"
timeout 120 $B/moejit_p32 bench bench/specs/routing_packed.json --tokens $T 2>&1 | grep -v "^device" | tee $OUT/packed_p32.txt
timeout 60 $B/moejit_p32 bench bench/specs/routing_packed_k2.json --tokens $T 2>&1 | grep -v "^device" | tee -a $OUT/packed_p32.txt
