#!/usr/bin/env bash
# One GPU call (nvidia-h200), fifth session: the shipped routers with and without programmatic
# dependent launch (`moejit bench --pdl`), three rounds each, side by side (ab_table.py).
source "$(dirname "$0")/common.sh"
R=deepseek_v3,kimi_k2,kimi_k3,qwen3,glm45
for round in 1 2 3; do
  for v in plain pdl; do
    f=""; [ $v = pdl ] && f=--pdl
    echo "### $v $round" >> $OUT/bench.txt
    timeout 90 $B/moejit bench bench/specs/routing.json --op $R --tokens 1,16,128,1024,16384 $f >> $OUT/bench.txt 2>&1
  done
done
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
