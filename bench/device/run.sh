#!/usr/bin/env bash
# Every table of bench/README.md, in one GPU call (device tool, nvidia-h200-x2: the latent tail
# times tp 2 there and tp 1 alone on one GPU):
#   here:   bash bench/device/build.sh
#   there:  timeout 560 bash bench/device/run.sh [latent_tail] [latent_tail_pdl] [routing] [activation] [experts] [experts_prefill]
# No argument runs latent_tail, routing, activation and experts; latent_tail_pdl (the tp 1 tail
# chained: MOEJIT_PDL=1) and experts_prefill (~300 s: the Python package in .carry/python drives
# it) are asked for by name. A cold warmup of a private kernel cache comes first (timed, then a
# warm start), then each driver (bench/bench_*.py, with the binaries build.sh put in .carry/)
# writes NAME.txt (its tables) and NAME.json into $OUT; the summary comes last. run.txt holds what
# this script printed and the warmup's output. More than 8 files in $OUT (what the device tool
# brings back) are packed into $OUT/out.tar, also when a timeout stops the run.
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export MOEJIT_CACHE_DIR=${MOEJIT_CACHE_DIR:-/tmp/moejit-bench-cache}
OUT=${OUT:-/tmp/out}
B=${B:-.carry}
BUDGET=${BUDGET:-540}  # seconds for everything, under the `timeout 560` around this script
mkdir -p "$OUT"
: > "$OUT/run.txt"

declare -A CAP=([warmup]=90 [latent_tail]=150 [latent_tail_pdl]=90 [routing]=230 [activation]=280 [experts]=300 [experts_prefill]=330)  # seconds a step may take
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(latent_tail routing activation experts)
for s in "${steps[@]}"; do
  [ -n "${CAP[$s]:-}" ] && [ "$s" != warmup ] || { echo "usage: $0 [latent_tail] [latent_tail_pdl] [routing] [activation] [experts] [experts_prefill]" >&2; exit 2; }
done

say() { echo "$@" | tee -a "$OUT/run.txt"; }
status=()  # "step exit seconds" of each step, for the summary
WARM="warmup: not run"
STEP_PID=

# run_step NAME CMD...: CMD under a timeout of NAME's cap or what is left of the budget, its
# output into $OUT/NAME.txt.
run_step() {
  local name=$1 left=$((BUDGET - SECONDS)) start=$SECONDS rc
  shift
  local cap=${CAP[$name]}
  [ $left -lt $cap ] && cap=$left
  if [ $cap -lt 20 ]; then
    say "== $name: skipped, ${left}s of the budget left"
    status+=("$name skipped -")
    return
  fi
  say "== $name (at most ${cap}s)"
  # NOTE: in the background and waited for, so that a signal to this script (the `timeout` around
  # it) runs the trap at once: `timeout` puts the step in a process group of its own.
  timeout $cap "$@" > "$OUT/$name.txt" 2>&1 &
  STEP_PID=$!
  wait $STEP_PID
  rc=$?
  STEP_PID=
  status+=("$name $rc $((SECONDS - start))")
  say "-- $name: exit $rc in $((SECONDS - start))s"
}

# The cache emptied, every shipped and bench spec compiled (cold), then again (all from disk).
WARMUP='rm -rf "$MOEJIT_CACHE_DIR"; for pass in cold warm; do echo "-- $pass"; "$0" warmup specs/ bench/specs/ --arch sm_90a -q; done'

pack() {
  local n
  n=$(find "$OUT" -type f ! -name out.tar | wc -l)
  [ "$n" -le 8 ] && return
  local tmp
  tmp=$(mktemp)
  (cd "$OUT" && tar cf "$tmp" --exclude=./out.tar . && find . -mindepth 1 -delete && mv "$tmp" out.tar)
  echo "$n files packed into $OUT/out.tar"
}

# warmup_lines FILE: the cold warmup's line and the warm pass's slowest warm start.
warmup_lines() {
  grep -m1 -E "^warmup:" "$1" | sed 's/^/cold /'
  awk '/^-- warm/ {warm = 1} warm && /^warm start:/ {for (i = 1; i < NF; i++) if ($(i + 1) == "ms" && $i > max) max = $i; n++}
       END {if (n) printf "warm start: at most %.1f ms a spec (%d specs)\n", max, n}' "$1"
}

summary() {
  say "== summary"
  {
    echo "| step | exit | seconds |"
    echo "|---|---:|---:|"
    for s in "${status[@]}"; do set -- $s; echo "| $1 | $2 | $3 |"; done
    echo "$WARM"
    python3 bench/common.py summary "$OUT"
  } | tee -a "$OUT/run.txt"
}

stopped() {
  say "run.sh: stopped by a signal after ${SECONDS}s"
  [ -n "$STEP_PID" ] && kill -TERM $STEP_PID 2>/dev/null && wait $STEP_PID
  summary
  pack
  exit 124
}
trap stopped TERM INT

built=$(cat "$B/BUILT" 2>/dev/null || echo "unknown (carry $B/BUILT, which build.sh writes)")
say "run.sh, $(date -u +%FT%TZ): ${steps[*]}; binaries built at $built"
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a "$OUT/run.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUT/run.txt"
run_step warmup bash -c "$WARMUP" "$B/moejit"
WARM=$(warmup_lines "$OUT/warmup.txt")
cat "$OUT/warmup.txt" >> "$OUT/run.txt" && rm "$OUT/warmup.txt"  # one file fewer: 8 come back unpacked
echo "$WARM"
for s in "${steps[@]}"; do
  case $s in
    latent_tail) run_step latent_tail python3 bench/bench_latent_tail.py --tail-bench $B/moejit_tail_bench --json "$OUT/latent_tail.json" ;;
    latent_tail_pdl) run_step latent_tail_pdl env MOEJIT_PDL=1 python3 bench/bench_latent_tail.py --tp 1 --tail-bench $B/moejit_tail_bench \
                       --json "$OUT/latent_tail_pdl.json" ;;
    routing) run_step routing python3 bench/bench_routing.py --moejit $B/moejit --json "$OUT/routing.json" --crossover "$OUT/crossover.json" ;;
    activation) run_step activation python3 bench/bench_activation.py --moejit $B/moejit --json "$OUT/activation.json" ;;
    experts) run_step experts env PYTHONPATH=$B/python python3 bench/bench_experts.py --moejit $B/moejit --tokens 1,8,32,64 \
               --json "$OUT/experts.json" ;;
    experts_prefill) run_step experts_prefill env PYTHONPATH=$B/python python3 bench/bench_experts_prefill.py --crossover 1,8,32,64,128,256,320,512 \
                       --json "$OUT/experts_prefill.json" ;;
  esac
done
nvidia-smi --query-gpu=index,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a "$OUT/run.txt"
summary
pack
