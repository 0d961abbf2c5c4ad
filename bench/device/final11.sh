#!/usr/bin/env bash
# The closing GPU call of the eighth session (nvidia-h200): every [gpu] test (multi-GPU cases
# skip on one GPU), the routing table beside torch eager / torch.compile with the block/warp
# crossover, cold warmup of every shipped and bench spec, and the `moejit run` test.
source "$(dirname "$0")/common.sh"
closing_checks
