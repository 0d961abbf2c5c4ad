#!/usr/bin/env bash
# Seventeenth session (nvidia-h200), a diagnostic for issue 2's masked target: how far from dense
# is masked silu / SituGLU when its grid is exactly one pass over half-full experts (the
# per-expert grid uncapped: results/2026-12-02-e/act29/uncapped.patch, built as .carry/moejit_u)
# -- i.e. a grid sized as if the counts were known at launch? And what does that grid cost with
# few rows an expert (decode)? s = the shipped build (.carry/moejit, copied to moejit_s).
# Run: `bash bench/device/build.sh` here, plus the u build the NOTE gives; there
# `timeout 400 bash bench/device/act29.sh; bash bench/device/pack_out.sh`.
source "$(dirname "$0")/common.sh"
cp $B/moejit $B/moejit_s
SECONDS=0
variants_ab "s u" half "" silu_2048_masked 2048,8192 situ_3072_masked 2048,8192 silu_2048_masked_e256 64,256 \
  silu_2048 8192,32768 situ_3072 8192,32768
echo "(${SECONDS}s)"
variants_ab "s u" few "--inputs few" silu_2048_masked 2048,8192 silu_2048_masked_e256 256
echo "(${SECONDS}s)"
