#!/usr/bin/env bash
# The closing activation GPU call of the fourth 2026-11-29 session (nvidia-h200): the activation
# table beside torch eager and torch.compile (SituGLU with the two-part tanh), and the routing
# table again with the re-measured crossover (runtime/routing_crossover.json) in the launcher.
source "$(dirname "$0")/common.sh"
echo "== activations beside torch"
timeout 300 python3 bench/activation_torch.py --moejit $B/moejit --json $OUT/activation.json 2>&1 | grep -v -E "^\\$|warn|^$" > $OUT/activation.txt; cat $OUT/activation.txt | tail -60
echo "== routing beside torch"
timeout 240 python3 bench/routing_torch.py --moejit $B/moejit --json $OUT/routing.json 2>&1 | grep -v -E "^\\$|warn|Online softmax|split the|important use|softmax\.$|^$|UserWarning" > $OUT/routing.txt; tail -34 $OUT/routing.txt
