#!/usr/bin/env bash
# The tenth session's closing GPU call (nvidia-h200): every [gpu] test on the shipped tree (the
# lazy keys, kLazyFor), the routing table beside torch with the block/warp crossover, cold
# warmup of every shipped and bench spec, `moejit run` against --reference.
source "$(dirname "$0")/common.sh"
closing_checks
