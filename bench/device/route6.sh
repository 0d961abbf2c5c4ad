#!/usr/bin/env bash
# One GPU call (nvidia-h200), fourth session, issue 3: the warp kernel's selection with its cache
# seeded by a stable sorting network and the rounds unrolled for K <= 8 (.carry/moejit) beside
# ce95303 (.carry/moejit_old); the [routing] GPU tests first.
source "$(dirname "$0")/common.sh"
echo "== [routing] tests"
timeout 300 $B/test_gpu "[routing]" > $OUT/test_routing.txt 2>&1; echo "exit $?"
grep -E "FAILED|test cases|assertions|All tests" $OUT/test_routing.txt | head -8
W=deepseek_v3_warp,kimi_k2_warp,kimi_k3_warp,qwen3_warp,glm45_warp
for round in 1 2 3; do
  for v in old new; do
    bin=$B/moejit; [ $v != new ] && bin=$B/moejit_$v
    timeout 90 $bin bench bench/specs/routing.json --op $W --tokens 1,16,128,1024,4096,16384 > $OUT/warp_${v}_$round.txt 2>&1
  done
done
for round in 2 3; do
  echo "== warp (old | new), round $round"
  paste -d'|' $OUT/warp_old_$round.txt $OUT/warp_new_$round.txt | grep -v "^device" | awk -F'|' '{printf "%-48s|%s\n", substr($1,1,48), substr($2,31,18)}'
done
