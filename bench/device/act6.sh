#!/usr/bin/env bash
# One GPU call (nvidia-h200), fourth session, issue 2: the masked layout's grid with 64 blocks per
# SM in all (.carry/moejit_t64) beside the shipped 32 (.carry/moejit), next to dense, alternating.
source "$(dirname "$0")/common.sh"
S=bench/specs/activation.json
for round in 1 2 3; do
  for v in t32 t64; do
    bin=$B/moejit; [ $v = t64 ] && bin=$B/moejit_t64
    timeout 60 $bin bench $S --op situ_3072_masked,silu_2048_masked --tokens 256,2048,8192 > $OUT/masked_${v}_$round.txt 2>&1
    timeout 60 $bin bench $S --op situ_3072,silu_2048 --tokens 1024,8192,32768 > $OUT/dense_${v}_$round.txt 2>&1
  done
done
for round in 2 3; do
  echo "== round $round: masked (t32 | t64), dense (t32 | t64)"
  paste -d'|' $OUT/masked_t32_$round.txt $OUT/masked_t64_$round.txt | grep -v "^device" | cut -c1-75,105-150
  paste -d'|' $OUT/dense_t32_$round.txt $OUT/dense_t64_$round.txt | grep -v "^device" | cut -c1-75,105-150
done
