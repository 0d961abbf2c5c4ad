#!/usr/bin/env bash
# Eleventh session (nvidia-h200), issue 2: new = 32-bit offsets only (the launcher cuts calls
# of 2^31 input elements or more into launches; the masked kernel runs its expert's slice as a
# dense one) + the reciprocals of silu, gelu_tanh, swiglu_oai and SituGLU by rcp_fast (exact for
# 1 <= y < 2^126, the rest takes __frcp_rn / __fdiv_rn): 28-32 registers for all kinds but gelu
# (8 blocks an SM where 36-40 gave 6). Beside base (HEAD 27a0d0e). Masked at T_max 64/256/2048/
# 8192 (half full), dense at the same real rows; every kind at T = 1/16/128.
source "$(dirname "$0")/common.sh"
activation_ab "base new"
