#!/usr/bin/env bash
# The closing GPU call of the fifth 2026-11-29 session (nvidia-h200), after final7.sh: the
# [routing] tests and the routing table beside torch with the crossover, on the shipped tree with
# the rescan refill chosen per slot count (kRefillOneFor).
source "$(dirname "$0")/common.sh"
routing_tests
routing_beside_torch
