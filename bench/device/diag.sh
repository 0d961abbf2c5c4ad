#!/usr/bin/env bash
# Diagnostic call: the tp 1 tail test (stack on a crash), the tp 2 tests, the fused bench alone.
source "$(dirname "$0")/common.sh"
$B/moejit warmup specs/ --arch sm_90a -q | grep -E "^warmup"
echo "== tp 1"
timeout 60 $B/test_gpu "[latent_tail]~[tp2]" > $OUT/tp1.txt 2>&1; echo "exit $?"
grep -E "FAILED|signal|test cases|assertions|\(|SIG" $OUT/tp1.txt | head -30
echo "== tp 2"
timeout 150 $B/test_gpu "[tp2]" > $OUT/tp2.txt 2>&1; echo "exit $?"
grep -E "FAILED|signal|test cases|assertions|error|CUDA|path|with expansion|\(\+0x" $OUT/tp2.txt | head -40
echo "== fused bench"
timeout 40 $B/moejit_tail_bench --fused-only 2>&1 | tail -8
