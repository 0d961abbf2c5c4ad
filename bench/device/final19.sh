#!/usr/bin/env bash
# Sixteenth session's closing run (nvidia-h200) on the shipped tree (396f0aa: dense SituGLU and
# erf gelu held to 32 blocks an SM): every [gpu] test; cold warmup of every shipped and bench spec
# into an empty cache, then the same warmup again (all hits), each printing every spec's warm
# start from the disk cache; `moejit run` against
# --reference. Run: `bash bench/device/build.sh` here, then
# `timeout 560 bash bench/device/final19.sh; bash bench/device/pack_out.sh` there.
source "$(dirname "$0")/common.sh"
SECONDS=0
gpu_tests
echo "(${SECONDS}s)"
export MOEJIT_CACHE_DIR=/tmp/moejit-final19
rm -rf $MOEJIT_CACHE_DIR
echo "== cold warmup, then warm"
for pass in cold warm; do
  echo "-- $pass" | tee -a $OUT/warmup.txt
  $B/moejit warmup specs/ bench/specs/ --arch sm_90a -q 2>&1 | grep -E "^(warmup|warm start)" | tee -a $OUT/warmup.txt
done
echo "== moejit run vs --reference"
timeout 60 python3 tests/gpu/run_npy.py --moejit $B/moejit 2>&1 | tail -2
echo "(${SECONDS}s)"
