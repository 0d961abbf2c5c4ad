#!/usr/bin/env bash
# Eleventh session (nvidia-h200), issue 2. Masked layout: pipe = a thread's next group of chunks
# loaded before it computes the current one (masked kernels only: 58 registers); pipe16 = pipe
# with 16 blocks per SM in all instead of 32; spec = pipe whose first group is loaded before the
# expert's count arrives (an experiment: rows past the count are read for nothing). SituGLU at
# T = 1/16: rcp = pipe + the sigmoid's reciprocal by rcp_fast; blk = rcp + the scalar path's
# block size picked at run time (256/224/192 threads, fewest warps on the busiest SM). Each beside
# base (HEAD 27a0d0e); masked at T_max 64/256/2048/8192 (half full), dense at the same real rows.
source "$(dirname "$0")/common.sh"
activation_ab "base pipe pipe16 spec rcp blk" \
  situ_3072_masked,silu_2048_masked 64,256,2048,8192 \
  situ_3072,silu_2048 256,1024,8192,32768 \
  situ_7168,situ_2048,silu_7168,gelu_2048 1,16,128
