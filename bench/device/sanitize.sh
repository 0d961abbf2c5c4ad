#!/usr/bin/env bash
# Sixteenth session (nvidia-h200): compute-sanitizer over `moejit check` (GPU against the CPU
# reference, random inputs): memcheck of the activation bench spec at T 1 / 33 / 4500 (4500 rows
# make dense SituGLU and gelu 2048 stride past their 32 blocks an SM; masked ops are T_max there)
# and of every shipped spec at 1 / 7 / 33; racecheck and synccheck of the routers (shared memory,
# barriers) at 1 / 7 / 129. Multi-GPU ops skip on one GPU.
# Run: `bash bench/device/build.sh` here, `timeout 560 bash bench/device/sanitize.sh; bash
# bench/device/pack_out.sh` there.
source "$(dirname "$0")/common.sh"
SECONDS=0
san() {  # NAME TOOL SPEC TOKENS
  timeout 150 compute-sanitizer --tool $2 --error-exitcode 9 $B/moejit check $3 --tokens $4 > $OUT/san_$1.txt 2>&1
  echo "$1 ($2, $3, T $4): exit $? -- $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|failed|FAIL' $OUT/san_$1.txt | sort | uniq -c | tr -s ' ' | tr '\n' ';') (${SECONDS}s)"
}
{
  san act_mem memcheck bench/specs/activation.json 1,33,4500
  for s in specs/*.json; do n=$(basename $s .json); [ $n = schema ] || san ${n}_mem memcheck $s 1,7,33; done
  san route_race racecheck bench/specs/routing.json 1,7,129
  san route_sync synccheck bench/specs/routing.json 1,7,129
  san k3_race racecheck specs/kimi-k3.json 1,7,129
} | tee $OUT/sanitize.txt
