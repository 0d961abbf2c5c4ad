#!/usr/bin/env bash
# Fourteenth session (nvidia-h200), fourth run: do experts in flight at once, at the same offsets
# of slots a power of two apart (T_max 8192 x 8 KB rows = 64 MB), cost the masked kernel its
# DRAM efficiency? T_max 8200 (not a power of two) beside 8192 with the same kernel, and each
# expert starting at its own fraction of its rows (r).
# Variants (NOTE.txt):
#   n    400ba35
#   r    n + expert e's rows traversed from row rows * frac(e * 0.618) on, wrapping around
source "$(dirname "$0")/common.sh"
tests_of $B/test_gpu_r r "[activation]"
echo "== half full"
variants_ab "n r" half "" silu_2048_masked 64,2048,8192,8200 situ_3072_masked 8192 silu_2048_masked_e256 250,256
variants_ab "n" dense "" silu_2048 32768,32800 situ_3072 32768
