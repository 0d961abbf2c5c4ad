#!/usr/bin/env bash
# Eighth session (nvidia-h200): what grows Kimi-K3's time from T=16 to T=128 (3.45 -> 3.85 us)?
# The same router without a bias (no 128 warps reading the same 3.5 KB), with bf16 logits (half
# the row bytes), and with top-8 instead of 16 (half the rounds), beside it.
source "$(dirname "$0")/common.sh"
cat > /tmp/k3diag.json <<'J'
{"model": "k3diag", "ops": [
 {"name": "k3", "op": "routing", "num_experts": 896, "topk": 16, "scoring": "sigmoid", "bias": "fp32", "renormalize": true},
 {"name": "k3_nobias", "op": "routing", "num_experts": 896, "topk": 16, "scoring": "sigmoid", "renormalize": true},
 {"name": "k3_bf16", "op": "routing", "num_experts": 896, "topk": 16, "scoring": "sigmoid", "bias": "fp32", "renormalize": true, "logits_dtype": "bf16"},
 {"name": "k3_top8", "op": "routing", "num_experts": 896, "topk": 8, "scoring": "sigmoid", "bias": "fp32", "renormalize": true}]}
J
for r in 1 2 3; do
  echo "### new $r" >> $OUT/bench.txt
  timeout 60 $B/moejit bench /tmp/k3diag.json --op k3,k3_nobias,k3_bf16,k3_top8 --tokens 1,16,64,128,256 >> $OUT/bench.txt 2>&1
done
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
