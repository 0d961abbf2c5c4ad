#!/usr/bin/env bash
# Prepared in the fifteenth session, NOT YET RUN (no device time left), ~5 minutes of device time.
# act23 found dense SituGLU 3072 3.8% / 4.4% faster at 8192 / 32768 rows when its grid is held to
# 32 blocks an SM (each thread striding over ~8 chunks) instead of one chunk a thread, while silu
# lost 5.7% at 32768 (bench/results/2026-12-02-c/act23). Which kinds and widths gain, and at what
# cap? The answer decides a per-kind dense grid (the compute-heavy kinds capped, silu not).
#   n      the shipped tree (bash bench/device/build.sh; cp .carry/moejit .carry/moejit_n)
#   dp32   n with the dense grid held to 32 blocks an SM -- in runtime/activation_op.cpp,
#          `std::min<std::int64_t>(blocks, 0x7fffffff)` -> `std::min<std::int64_t>(blocks, 32 * sm_count_)`,
#          `cmake --build build-dev --target moejit_cli`, `strip -o .carry/moejit_dp32 build-dev/moejit`
#   dp16   the same with 16 * sm_count_ (moejit_dp16); restore with `git checkout HEAD -- runtime`
# Run: `timeout 560 bash bench/device/act26.sh; bash bench/device/pack_out.sh`.
source "$(dirname "$0")/common.sh"
D=silu_2048,silu_7168,situ_2048,situ_3072,situ_7168,gelu_2048,gelu_tanh_2048,swiglu_oai_2880
echo "== dense, every kind: one chunk a thread (n) against 32 and 16 blocks an SM"
variants_ab "n dp32 dp16" dense "" $D 8192,32768
