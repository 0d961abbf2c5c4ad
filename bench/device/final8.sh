#!/usr/bin/env bash
# The closing GPU call of the fifth 2026-11-29 session (nvidia-h200), after final7.sh: the
# [routing] tests and the routing table beside torch with the crossover, on the shipped tree with
# the rescan refill chosen per slot count (kRefillOneFor).
source "$(dirname "$0")/common.sh"
echo "== [routing] tests"
timeout 240 $B/test_gpu "[routing]" > $OUT/tests.txt 2>&1; echo "exit $?"
grep -E "FAILED|test cases|assertions|All tests" $OUT/tests.txt | head -6
echo "== routing beside torch"
timeout 240 python3 bench/routing_torch.py --moejit $B/moejit --json $OUT/routing.json --crossover $OUT/crossover.json 2>&1 | grep -v -E "^\\$|warn|Online softmax|split the|important use|softmax\.$|^$|UserWarning" > $OUT/routing.txt; tail -40 $OUT/routing.txt
