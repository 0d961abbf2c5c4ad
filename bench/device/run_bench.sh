#!/usr/bin/env bash
# On the GPU machine (device tool, nvidia-h200-x2), from the repository root with .carry/
# carried: every benchmark side by side with torch, in one run. Results go to $OUT.
source "$(dirname "$0")/common.sh"
$B/moejit warmup specs/ bench/specs/ --arch sm_90a -q > /dev/null
echo "== latent tail, tp 2 (moejit paths, then torch + NCCL)"
timeout 120 $B/moejit_tail_bench 2> $OUT/tail.jsonl | tee $OUT/tail.txt
timeout 120 python3 bench/latent_tail_torch.py --tp 2 2>&1 | grep -v Warning | tee -a $OUT/tail.txt
echo "== routing"
timeout 240 python3 bench/routing_torch.py --moejit $B/moejit --json $OUT/routing.json --crossover $OUT/crossover.json 2>&1 | grep -v "^\\$" | tee $OUT/routing.txt
echo "== activations"
timeout 220 python3 bench/activation_torch.py --moejit $B/moejit --json $OUT/activation.json 2>&1 | grep -v "^\\$" | tee $OUT/activation.txt
