#!/usr/bin/env bash
# One GPU call (nvidia-h200), fifth session, issue 3 experiments (temporary knobs, removed after):
# DeepSeek-V3's warp kernel held to 32 registers (MOEJIT_X_MINBLOCKS=16: 16 resident 4-warp
# blocks) and Kimi-K3's with 5, 6 or 8 cached keys per lane (MOEJIT_X_CACHE), beside 66d8ca7
# as it is, same build.
source "$(dirname "$0")/common.sh"
T=1,16,64,128,1024,4096,16384
for round in 1 2 3; do
  for v in base mb16 c5 c6 c8; do
    echo "### $v $round" >> $OUT/bench.txt
    case $v in
      base) timeout 90 $B/moejit bench bench/specs/routing.json --op deepseek_v3_warp,kimi_k3_warp --tokens $T >> $OUT/bench.txt 2>&1 ;;
      mb16) MOEJIT_X_MINBLOCKS=16 timeout 90 $B/moejit bench bench/specs/routing.json --op deepseek_v3_warp --tokens $T >> $OUT/bench.txt 2>&1 ;;
      c*) MOEJIT_X_CACHE=${v#c} timeout 90 $B/moejit bench bench/specs/routing.json --op kimi_k3_warp --tokens $T >> $OUT/bench.txt 2>&1 ;;
    esac
  done
done
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
