#!/usr/bin/env bash
# Eighth session, second GPU call (nvidia-h200): ab30's changes plus tagged keys for Qwen3-like
# shapes (select_topk_tagged: slot in the key's low bits, no expert registers) and the best key
# taken from the first round's register. Variants: old (HEAD), e16 (rule 6 tested up front above
# 16 keys a lane, as before: Kimi-K3 lost 0.15 us at T=1 in ab30 and its registers went 79 -> 92),
# new (rule 6 after the selection everywhere). [routing] tests of `new` first.
source "$(dirname "$0")/common.sh"
routing_tests
ab_variants "old e16 new" deepseek_v3,qwen3,kimi_k2,kimi_k3,glm45 1,16,128,1024,4096,16384
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
for op in qwen3_warp kimi_k3_warp; do
  for v in old e16 new; do bin=$B/moejit; [ $v != new ] && bin=$B/moejit_$v; inst_per_token $v $bin $op; done
done | tee $OUT/inst.txt
