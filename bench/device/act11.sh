#!/usr/bin/env bash
# Eleventh session (nvidia-h200), issue 2, splitting act10's "new": r = HEAD + SituGLU's and
# swiglu_oai's sigmoid reciprocal by rcp_fast (exact for 1 <= y < 2^126, else __frcp_rn);
# r32 = r + 32-bit offsets only (calls of 2^31 input elements or more cut into launches; the
# masked kernel runs its expert's slice as a dense one); p = act9's pipe + rcp build (its dense
# silu 2048 ran 7% faster at large T than base: find out why). Beside base (HEAD 27a0d0e).
source "$(dirname "$0")/common.sh"
echo "== [activation] tests (r32)"
timeout 300 $B/test_gpu "[activation]" > $OUT/tests.txt 2>&1; echo "exit $?"
grep -E "FAILED|test cases|assertions|All tests" $OUT/tests.txt | head -6
SPEC=bench/specs/activation.json BASE=none ab_variants "base r r32 p" \
  situ_3072_masked,silu_2048_masked 64,256,2048,8192 \
  situ_3072,silu_2048 256,1024,8192,32768 \
  silu_3072,silu_7168,situ_2048,situ_7168,gelu_2048,gelu_tanh_2048,swiglu_oai_2880 1,16,128,32768
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
