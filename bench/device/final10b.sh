#!/usr/bin/env bash
# Seventh session, after final10.sh: the shared scores' array declared 16-byte aligned (its
# vector stores had relied on ptxas placing it so; the PTX differs only in that directive).
# The [routing] tests and one bench of the biased routers on the shipped tree.
source "$(dirname "$0")/common.sh"
routing_tests
ab_bench $B/moejit bench/specs/routing.json deepseek_v3,kimi_k3,glm45 1,128,16384
tail -12 $OUT/bench.txt
