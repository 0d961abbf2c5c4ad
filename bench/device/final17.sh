#!/usr/bin/env bash
# Twelfth session's closing run (nvidia-h200), the shipped activations (SituGLU's scalar path and
# swiglu_oai take the sigmoid's range check once a chunk; the same SASS as act13's o2 for SituGLU
# and o for swiglu_oai): every [activation] GPU test (variant 1 now with sigmoid arguments whose
# result is subnormal, the reciprocal's slow path), then the activation table beside torch eager
# and torch.compile, masked with the counts rotated and in L2 beside dense at the same real rows.
source "$(dirname "$0")/common.sh"
gpu_tests "[activation]"
activation_beside_torch
