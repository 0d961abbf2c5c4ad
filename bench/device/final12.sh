#!/usr/bin/env bash
# The closing GPU call of the ninth session (nvidia-h200) for the routing change (6bd6b32): every
# [gpu] test (multi-GPU cases skip on one GPU), the routing table beside torch eager /
# torch.compile with the block/warp crossover, cold warmup of every shipped and bench spec, and
# the `moejit run` test.
source "$(dirname "$0")/common.sh"
closing_checks
