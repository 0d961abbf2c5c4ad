#!/usr/bin/env bash
# One GPU call (nvidia-h200), fourth session, issue 3: the warp kernel's selection on 32-bit key
# halves (.carry/moejit) beside f43d565 (.carry/moejit_old) and the same with a fourth cached key
# from 12 experts per lane (.carry/moejit_c4); the block kernels (sigmoid by __frcp_rn) at small T.
source "$(dirname "$0")/common.sh"
echo "== [routing] tests"
timeout 300 $B/test_gpu "[routing]" > $OUT/test_routing.txt 2>&1; echo "exit $?"
grep -E "FAILED|test cases|assertions|All tests" $OUT/test_routing.txt | head -8
W=deepseek_v3_warp,kimi_k2_warp,kimi_k3_warp,qwen3_warp,glm45_warp
K=deepseek_v3_block,kimi_k2_block,kimi_k3_block,qwen3_block,glm45_block
for round in 1 2; do
  for v in old new c4; do
    bin=$B/moejit; [ $v != new ] && bin=$B/moejit_$v
    timeout 90 $bin bench bench/specs/routing.json --op $W --tokens 1024,4096,16384 > $OUT/warp_${v}.txt 2>&1
  done
  for v in old new; do
    bin=$B/moejit; [ $v != new ] && bin=$B/moejit_$v
    timeout 90 $bin bench bench/specs/routing.json --op $K --tokens 1,16,128 > $OUT/block_${v}.txt 2>&1
  done
done
echo "== warp (old | new | c4), round 2"
paste -d'|' $OUT/warp_old.txt $OUT/warp_new.txt $OUT/warp_c4.txt | grep -v "^device" | awk -F'|' '{printf "%-48s|%s|%s\n", substr($1,1,48), substr($2,31,18), substr($3,31,18)}'
echo "== block (old | new), round 2"
paste -d'|' $OUT/block_old.txt $OUT/block_new.txt | grep -v "^device" | awk -F'|' '{printf "%-48s|%s\n", substr($1,1,48), substr($2,31,18)}'
