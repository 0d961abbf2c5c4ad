#!/usr/bin/env bash
# Eighth session, fourth GPU call (nvidia-h200): ab32 showed ptxas turning the rule-6 recheck
# after the selection into predicated loads issued on every row (GLM-4.5: 15 LDG a token instead
# of 10); now a loop it cannot if-convert. old / early (rule 6 up front) / new, [routing] tests of
# new first.
source "$(dirname "$0")/common.sh"
routing_tests
ab_variants "old early new" glm45,kimi_k2,kimi_k3,deepseek_v3,qwen3 1,16,128,16384
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
for op in glm45_warp kimi_k3_warp deepseek_v3_warp; do
  for v in old early new; do bin=$B/moejit; [ $v != new ] && bin=$B/moejit_$v; inst_per_token $v $bin $op; done
done | tee $OUT/inst.txt
