#!/usr/bin/env bash
# GPU call (nvidia-h200): programmatic dependent launch with the trigger after the wait (at most
# two kernels of a stream resident): the PDL chain test and the routing/activation cases, then
# the routers and activations with and without PDL in one run.
source "$(dirname "$0")/common.sh"
echo "== PDL chain + routing + activation tests"
timeout 300 $B/test_gpu "[routing],[activation]" > $OUT/test_gpu.txt 2>&1; echo "test_gpu exit $?"
grep -E "FAILED|signal|test cases|assertions|All tests" $OUT/test_gpu.txt | head -12
R=deepseek_v3,kimi_k2,kimi_k3,qwen3,glm45
A=silu_2048,silu_7168,situ_2048,situ_7168,gelu_2048
for v in plain pdl; do
  f=""; [ $v = pdl ] && f=--pdl
  echo "== routing, $v"
  timeout 60 $B/moejit bench bench/specs/routing.json --op $R --tokens 1,16,128,1024,16384 $f 2>&1 | grep -v "^device" | tee $OUT/routing_$v.txt
  echo "== activations, $v"
  timeout 60 $B/moejit bench bench/specs/activation.json --op $A --tokens 1,16,128,8192 $f 2>&1 | grep -v "^device" | tee $OUT/activation_$v.txt
done
