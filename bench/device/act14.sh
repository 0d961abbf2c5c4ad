#!/usr/bin/env bash
# Twelfth session (nvidia-h200), issue 2's large-T lever (registers). n = the activation op as two
# kernels: 32-bit element offsets (every call below 2^31 input elements) held by
# __launch_bounds__ to 8 blocks an SM (32 registers) for silu, gelu_tanh and SituGLU, and a
# 64-bit one; before, one kernel held both paths behind a run-time flag and the 64-bit path's
# registers were the kernel's (silu 35-36, 6 blocks an SM). base = HEAD 18ccbb2's kernel (the
# final17 build). [activation] tests with n (the 2^31 cases run the 64-bit kernel).
source "$(dirname "$0")/common.sh"
activation_ab "base n" \
  silu_2048,silu_3072,silu_7168,situ_7168,gelu_2048,gelu_tanh_2048,swiglu_oai_2880 1,16,128,1024,32768 \
  silu_2048_masked,situ_3072_masked 64,2048,8192
