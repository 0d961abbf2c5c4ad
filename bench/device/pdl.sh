#!/usr/bin/env bash
# GPU call (nvidia-h200) for programmatic dependent launch (Options::programmatic_launch,
# `moejit bench --pdl`): every [gpu] test (the PDL chain case included), the routers and the
# activations with and without PDL in one run, then the routing table beside torch (without PDL).
source "$(dirname "$0")/common.sh"
echo "== [gpu] tests"
timeout 300 $B/test_gpu > $OUT/test_gpu.txt 2>&1; echo "test_gpu exit $?"
grep -E "FAILED|signal|test cases|assertions|All tests" $OUT/test_gpu.txt | head -12
R=deepseek_v3,kimi_k2,kimi_k3,qwen3,glm45
A=silu_2048,silu_7168,situ_2048,situ_3072,situ_7168,gelu_2048,swiglu_oai_2880
for v in plain pdl; do
  f=""; [ $v = pdl ] && f=--pdl
  echo "== routing, $v"
  timeout 60 $B/moejit bench bench/specs/routing.json --op $R --tokens 1,16,128,1024,16384 $f 2>&1 | tee $OUT/routing_$v.txt
  echo "== activations, $v"
  timeout 90 $B/moejit bench bench/specs/activation.json --op $A --tokens 1,16,128,32768 $f 2>&1 | grep -v "^device" | tee $OUT/activation_$v.txt
done
echo "== routing beside torch (plain launches)"
timeout 200 python3 bench/routing_torch.py --moejit $B/moejit --json $OUT/routing.json 2>&1 | grep -v -E "^\\$|warn|Online softmax|split the|important use|softmax\.$|^$|block / warp|crossover" | tee $OUT/routing_torch.txt
