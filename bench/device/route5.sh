#!/usr/bin/env bash
# One GPU call (nvidia-h200), fourth session, issue 3: cached keys per lane in the warp kernel's
# split selection, by experts per lane (slots): vA 4 from 16 slots, 3 from 8, else 2 (shipped);
# vB 6 from 24, 4 from 16, 3 from 4; vC 5 from 24, 4 from 4. Kimi-K3 has 28 slots, Kimi-K2 12,
# DeepSeek-V3 8, GLM-4.5 5, Qwen3 4.
source "$(dirname "$0")/common.sh"
W=deepseek_v3_warp,kimi_k2_warp,kimi_k3_warp,qwen3_warp,glm45_warp
for round in 1 2 3; do
  for v in vA vB vC; do
    timeout 90 $B/moejit_$v bench bench/specs/routing.json --op $W --tokens 1024,4096,16384 > $OUT/warp_${v}_$round.txt 2>&1
  done
done
echo "== warp (vA | vB | vC), rounds 2 and 3"
for round in 2 3; do
paste -d'|' $OUT/warp_vA_$round.txt $OUT/warp_vB_$round.txt $OUT/warp_vC_$round.txt | grep -v "^device" | awk -F'|' '{printf "%-48s|%s|%s\n", substr($1,1,48), substr($2,31,18), substr($3,31,18)}'
done
