#!/usr/bin/env bash
# One GPU call (nvidia-h200-x2) that fits what was left of the device time: the latent-tail
# tests (tp 1 with a stack dump on a crash, tp 2), the benchmarks beside torch, and the run test.
source "$(dirname "$0")/common.sh"
$B/moejit warmup specs/ bench/specs/ --arch sm_90a -q | grep -E "^warmup"
echo "== latent tail tp 1"
timeout 45 $B/test_gpu "latent tail, tp 1, matches the reference" > $OUT/tail_tp1.txt 2>&1; echo "exit $?"
grep -E "FAILED|signal|test cases|assertions|\(\+0x|moejit" $OUT/tail_tp1.txt | head -30
echo "== latent tail tp 2"
timeout 110 $B/test_gpu "[tp2]" > $OUT/tail_tp2.txt 2>&1; echo "exit $?"
grep -E "FAILED|signal|test cases|assertions|with expansion|CHECK" $OUT/tail_tp2.txt | head -20
echo "== routing"
timeout 170 python3 bench/routing_torch.py --moejit $B/moejit --json $OUT/routing.json --crossover $OUT/crossover.json 2>&1 | grep -v "^\\$" | tee $OUT/routing.txt
echo "== activations"
timeout 110 python3 bench/activation_torch.py --quick --moejit $B/moejit --json $OUT/activation.json 2>&1 | grep -v "^\\$" | tee $OUT/activation.txt
echo "== latent tail bench"
timeout 60 $B/moejit_tail_bench 2> $OUT/tail.jsonl | tee $OUT/tail.txt
timeout 50 python3 bench/latent_tail_torch.py --tp 2 2>&1 | grep -E "torch" | tee -a $OUT/tail.txt
echo "== run"
timeout 30 python3 tests/gpu/run_npy.py --moejit $B/moejit 2>&1 | tail -12
