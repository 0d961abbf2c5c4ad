#!/usr/bin/env bash
# Seventeenth session's closing run (nvidia-h200): no kernel changed (the session fixed bad-input
# handling, the spec parser's limits and the public API's LatentMoE constructor), so this checks
# the host side on a GPU: every [gpu] test; `moejit check` of every shipped spec; cold warmup of
# every shipped and bench spec, then the same warmup again (all hits, warm start a spec);
# `moejit run` against --reference; `moejit bench` of one spec, and its --tokens checks (now
# before the driver). Run: `bash bench/device/build.sh` here, then
# `timeout 560 bash bench/device/final20.sh; bash bench/device/pack_out.sh` there.
source "$(dirname "$0")/common.sh"
SECONDS=0
gpu_tests
echo "(${SECONDS}s)"
export MOEJIT_CACHE_DIR=/tmp/moejit-final20
rm -rf $MOEJIT_CACHE_DIR
echo "== cold warmup, then warm"
for pass in cold warm; do
  echo "-- $pass" | tee -a $OUT/warmup.txt
  $B/moejit warmup specs/ bench/specs/ --arch sm_90a -q 2>&1 | grep -E "^(warmup|warm start)" | tee -a $OUT/warmup.txt
done
echo "== moejit check, every shipped spec"
for s in specs/*.json; do
  [ "$(basename $s)" = schema.json ] && continue
  timeout 120 $B/moejit check $s > $OUT/check_$(basename $s .json).txt 2>&1; echo "$(basename $s) exit $?"
done
echo "== moejit run vs --reference"
timeout 60 python3 tests/gpu/run_npy.py --moejit $B/moejit 2>&1 | tail -2
echo "== moejit bench (one spec) and its bad --tokens"
timeout 60 $B/moejit bench specs/kimi-k3.json --op experts_act --tokens 1,16,8192 2>&1 | tail -5
for t in -1 0 1,,2; do $B/moejit bench specs/kimi-k3.json --op experts_act --tokens=$t 2>&1 | head -1; echo "  --tokens=$t exit ${PIPESTATUS[0]}"; done
echo "(${SECONDS}s)"
