#!/usr/bin/env bash
# Sixteenth session (nvidia-h200), last call: streaming cache hints on the activation's 16- and
# 8-byte loads and stores (ld.global.cs / st.global.cs: evict first in L1 and L2), for dense and
# masked. act26's ncu found the masked grid's DRAM throughput lower than dense's one pass while
# the SMs are busy (83.5% against 89.3%); does evict-first change that, or dense?
#   n   the tree (d422c5a): bash bench/device/build.sh; cp .carry/moejit .carry/moejit_n
#   cs  n with templates/common.cuh's load_vec / store_vec through __ldcs / __stcs
#       (results/2026-12-02-d/act28/cs.patch)
# Run: `timeout 240 bash bench/device/act28.sh; bash bench/device/pack_out.sh`.
source "$(dirname "$0")/common.sh"
variants_ab "n cs" half "" silu_2048,situ_3072 8192,32768 silu_2048_masked,situ_3072_masked 2048,8192
variants_ab "n cs" few "--inputs few" silu_2048_masked 8192
