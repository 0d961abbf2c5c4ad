#!/usr/bin/env bash
# Eighth session, first GPU call (nvidia-h200): routing keys without a finite test (orderable + 3,
# invalid = NaN wraps to class 2), rule 6 settled after the selection (non-softmax), the
# softmax max and sum without a test per logit, group ranks by 64-bit compares; beside HEAD
# (old). [routing] tests first (variant 2 now has NaNs with a sign and payload, and non-finite
# bias entries), then the A/B table, then ncu instruction counts per token.
source "$(dirname "$0")/common.sh"
routing_tests
ab_old_new deepseek_v3,qwen3,kimi_k2,kimi_k3,glm45 1,16,128,1024,4096,16384
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
for op in deepseek_v3_warp qwen3_warp kimi_k3_warp glm45_warp; do
  for v in old new; do bin=$B/moejit; [ $v = old ] && bin=$B/moejit_old; inst_per_token $v $bin $op; done
done | tee $OUT/inst.txt
