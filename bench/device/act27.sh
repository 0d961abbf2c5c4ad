#!/usr/bin/env bash
# Sixteenth session (nvidia-h200): the dense grid of SituGLU and erf gelu held to 32 blocks an SM
# (runtime/activation_op.cpp dense_blocks_cap, after act26). Builds: n (the tree before, 8de8141:
# `bash bench/device/build_act26.sh` left it as .carry/moejit_n), c (this tree: bash
# bench/device/build.sh -> .carry/moejit, copied to .carry/moejit_c; .carry/test_gpu).
# 1. every [activation] GPU test, with the new case that makes dense SituGLU and gelu stride;
# 2. n against c where the cap starts to bind (T 2048 / 4096; 8192 and 32768 ran as act26 dp32);
# 3. the activation table beside torch eager and torch.compile (with 256 experts masked).
# Run: `timeout 580 bash bench/device/act27.sh; bash bench/device/pack_out.sh`.
source "$(dirname "$0")/common.sh"
cp $B/moejit $B/moejit_c
SECONDS=0
gpu_tests "[activation]"
echo "(${SECONDS}s)"
echo "== dense n against c where the cap starts to bind"
variants_ab "n c" cap "" situ_2048,situ_3072,situ_7168,gelu_2048 2048,4096 silu_2048 4096
echo "(${SECONDS}s)"
activation_beside_torch 60
echo "(${SECONDS}s)"
