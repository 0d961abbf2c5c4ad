#!/usr/bin/env bash
# Eleventh session (nvidia-h200), issue 2, splitting act10's "new": r = HEAD + SituGLU's and
# swiglu_oai's sigmoid reciprocal by rcp_fast (exact for 1 <= y < 2^126, else __frcp_rn);
# r32 = r + 32-bit offsets only (calls of 2^31 input elements or more cut into launches; the
# masked kernel runs its expert's slice as a dense one); p = act9's pipe + rcp build (its dense
# silu 2048 ran 7% faster at large T than base: find out why). Beside base (HEAD 27a0d0e).
source "$(dirname "$0")/common.sh"
activation_ab "base r r32 p"
