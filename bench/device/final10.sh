#!/usr/bin/env bash
# The closing GPU call of the seventh session (nvidia-h200): every [gpu] test (multi-GPU cases
# skip on one GPU), the routing table beside torch eager / torch.compile with the block/warp
# crossover, cold warmup of every shipped and bench spec, and the `moejit run` test. The
# activation kernels did not change this session: their table stands from final9.sh.
source "$(dirname "$0")/common.sh"
closing_checks
