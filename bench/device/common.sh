# Sourced by every script here (they run on the GPU machine from the repository root): never
# NVLink multicast, a private kernel cache, unbuffered Python, $OUT for what comes back and $B
# for the carried binaries (build.sh puts them in .carry/).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export MOEJIT_CACHE_DIR=${MOEJIT_CACHE_DIR:-/tmp/moejit-cache} PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=${B:-.carry}
# ncu_sass NAME OP [BIN]: every SASS line of OP's warp routing kernel at T=16384 with its count per token
# ($OUT/NAME_sass.txt, by sass_summary.py; the CSV stays in /tmp), and the two summary lines.
# BIN (optional third argument): the binary to profile ($B/moejit).
ncu_sass() {
  timeout 150 ncu --section SourceCounters --kernel-name regex:routing_warp --launch-count 1 \
    --page source --csv --print-source sass ${3:-$B/moejit} bench bench/specs/routing.json --op $2 --tokens 16384 --calls 1 --replays 1 > /tmp/$1.csv 2>&1
  python3 bench/device/sass_summary.py /tmp/$1.csv 16384 0 > $OUT/$1_sass.txt
  head -2 $OUT/$1_sass.txt
}
# routing_tests [ENV=VALUE...]: the [routing] GPU tests ($OUT/tests.txt), their exit code and summary.
routing_tests() {
  echo "== [routing] tests $*"
  env "$@" timeout 240 $B/test_gpu "[routing]" > $OUT/tests.txt 2>&1; echo "exit $?"
  grep -E "FAILED|test cases|assertions|All tests" $OUT/tests.txt | head -6
}
# ab_bench BIN SPEC OPS TOKENS [ENV=VALUE...]: one `moejit bench` of OPS (comma-separated) at
# TOKENS (space- or comma-separated) with BIN, the environment given and $BENCH_ARGS (more
# options, e.g. --inputs few), appended to $BENCH_TXT ($OUT/bench.txt).
ab_bench() {
  local bin=$1 spec=$2 ops=$3 tokens=$4
  shift 4
  env "$@" timeout 60 $bin bench $spec --op $ops --tokens $tokens ${BENCH_ARGS:-} >> ${BENCH_TXT:-$OUT/bench.txt} 2>&1
}
# ab_run NAME ROUND BIN SPEC OPS TOKENS [ENV=VALUE...]: ab_bench as section `### NAME ROUND` of
# $OUT/bench.txt (ab_table.py reads them).
ab_run() {
  echo "### $1 $2" >> $OUT/bench.txt
  shift 2
  ab_bench "$@"
}
# ab_variants "V1 V2 ..." OPS TOKENS [OPS TOKENS ...] (TOKENS comma-separated): three rounds of
# SPEC's (the routing bench spec's) OPS at their TOKENS with each variant's binary in turn
# ($B/moejit for the variant named BASE, `new` by default, else $B/moejit_V), as `### V ROUND`
# sections.
ab_variants() {
  local variants=$1 spec=${SPEC:-bench/specs/routing.json} base=${BASE:-new}
  shift
  local args=("$@")
  for round in 1 2 3; do
    for v in $variants; do
      local bin=$B/moejit; [ $v != $base ] && bin=$B/moejit_$v
      echo "### $v $round" >> ${BENCH_TXT:-$OUT/bench.txt}
      for ((i = 0; i < ${#args[@]}; i += 2)); do ab_bench $bin $spec ${args[i]} ${args[i+1]}; done
    done
  done
}
# ab_old_new OPS TOKENS [OPS TOKENS ...]: ab_variants with $B/moejit_old and $B/moejit.
ab_old_new() { ab_variants "old new" "$@"; }
# gpu_tests [FILTER]: the [gpu] tests (all, or FILTER) into $OUT/test_gpu.txt, exit code and summary.
gpu_tests() {
  echo "== [gpu] tests $*"
  timeout 300 $B/test_gpu "$@" > $OUT/test_gpu.txt 2>&1; echo "test_gpu exit $?"
  grep -E "FAILED|signal|test cases|assertions|All tests" $OUT/test_gpu.txt | head -12
}
# routing_beside_torch: bench/routing_torch.py with $B/moejit (the table beside torch eager and
# torch.compile, and the block/warp crossover) into $OUT/routing.{txt,json}, $OUT/crossover.json.
routing_beside_torch() {
  echo "== routing beside torch"
  timeout 240 python3 bench/routing_torch.py --moejit $B/moejit --json $OUT/routing.json --crossover $OUT/crossover.json 2>&1 |
    grep -v -E "^\\$|warn|Online softmax|split the|important use|softmax\.$|^$|UserWarning" > $OUT/routing.txt
  tail -40 $OUT/routing.txt
}
# inst_per_token NAME BIN OP [TOKENS]: warp instructions per token of OP's warp routing kernel
# (ncu: all, ALU pipe, FMA pipe, FMA-heavy pipe) at TOKENS (16384), one line tagged NAME.
inst_per_token() {
  local name=$1 bin=$2 op=$3 t=${4:-16384}
  timeout 120 ncu --metrics smsp__inst_executed.sum,sm__inst_executed_pipe_alu.sum,sm__inst_executed_pipe_fma.sum,sm__inst_executed_pipe_fmaheavy.sum \
    --kernel-name regex:routing_warp --launch-count 1 $bin bench bench/specs/routing.json --op $op --tokens $t --calls 1 --replays 1 2>&1 |
    awk -v n=$name -v op=$op -v t=$t '/smsp__inst_executed.sum/{a=$NF} /pipe_alu.sum/{b=$NF} /pipe_fma.sum/{c=$NF} /pipe_fmaheavy.sum/{d=$NF}
      END {gsub(",","",a); gsub(",","",b); gsub(",","",c); gsub(",","",d);
           printf "%-6s %-18s inst/token %6.1f  alu %6.1f  fma %6.1f  fmaheavy %6.1f\n", n, op, a/t, b/t, c/t, d/t}'
}
# closing_checks: every [gpu] test, the routing table beside torch with the crossover, cold warmup
# of every shipped and bench spec, and `moejit run` against --reference (a session's closing run).
closing_checks() {
  gpu_tests
  routing_beside_torch
  $B/moejit warmup specs/ bench/specs/ --arch sm_90a -q | grep -E "^warmup" | tee $OUT/warmup.txt
  echo "== moejit run vs --reference"
  timeout 60 python3 tests/gpu/run_npy.py --moejit $B/moejit 2>&1 | tail -2
}
# k3_run BIN T OUTDIR [LOGITS_T BIAS_T]: `moejit run --repeat 500` of Kimi-K3's router on the
# bench's own inputs for T ($B/k3in, bench/device/k3_inputs.cpp; the bias of another T if given),
# the last call's outputs into OUTDIR; prints the median per call.
k3_run() {
  local bin=$1 t=$2 dir=$3 lt=${4:-$2} bt=${5:-$2}
  mkdir -p $dir
  $bin run bench/specs/routing.json --op kimi_k3 --in logits=$B/k3in/logits_$lt.npy --in bias=$B/k3in/bias_$bt.npy \
    --out-dir $dir --repeat 500 2>&1 | tail -1
}
# activation_ab "V1 V2 ..." [OPS TOKENS ...]: every [activation] GPU test ($OUT/tests.txt, exit
# code and summary), then ab_variants of the activation bench spec with $B/moejit_V for each
# variant: OPS at TOKENS (comma-separated), by default masked at T_max 64/256/2048/8192 (8
# experts half full), dense at the same real rows and every kind at T = 1/16/128/32768; the
# side-by-side table into $OUT/table.txt.
activation_ab() {
  local variants=$1
  shift
  local args=("$@")
  [ ${#args[@]} -eq 0 ] && args=(situ_3072_masked,silu_2048_masked 64,256,2048,8192
    situ_3072,silu_2048 256,1024,8192,32768
    silu_3072,silu_7168,situ_2048,situ_7168,gelu_2048,gelu_tanh_2048,swiglu_oai_2880 1,16,128,32768)
  echo "== [activation] tests"
  timeout 300 $B/test_gpu "[activation]" > $OUT/tests.txt 2>&1; echo "exit $?"
  grep -E "FAILED|test cases|assertions|All tests" $OUT/tests.txt | head -6
  SPEC=bench/specs/activation.json BASE=none ab_variants "$variants" "${args[@]}"
  python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
}
# tests_of BIN NAME FILTER: BIN's tests matching FILTER into $OUT/tests_NAME.txt, exit code and summary.
tests_of() {
  echo "== $3 tests ($2)"
  timeout 300 $1 "$3" > $OUT/tests_$2.txt 2>&1; echo "exit $?"
  grep -E "FAILED|test cases|assertions|All tests" $OUT/tests_$2.txt | head -6
}
# activation_beside_torch [LINES]: bench/activation_torch.py with $B/moejit (the table beside torch
# eager and torch.compile, masked against dense) into $OUT/activation.{txt,json}; its last LINES (52).
activation_beside_torch() {
  echo "== activations beside torch"
  timeout 400 python3 bench/activation_torch.py --moejit $B/moejit --json $OUT/activation.json 2>&1 |
    grep -v -E "^\\$|warn|UserWarning" > $OUT/activation.txt
  tail -${1:-52} $OUT/activation.txt
}
# variants_ab "V1 V2 ..." NAME "OPTIONS" OPS TOKENS [OPS TOKENS ...]: ab_variants of the activation
# bench spec with $B/moejit_V for each variant and the bench OPTIONS given (e.g. "--inputs few"; ""
# for none) into $OUT/NAME.txt, and its side-by-side table into $OUT/NAME_table.txt.
variants_ab() {
  local variants=$1 name=$2 options=$3
  shift 3
  SPEC=bench/specs/activation.json BASE=none BENCH_TXT=$OUT/$name.txt BENCH_ARGS="$options" ab_variants "$variants" "$@"
  python3 bench/device/ab_table.py $OUT/$name.txt | tee $OUT/${name}_table.txt
}
