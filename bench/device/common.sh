# Sourced by every script here (they run on the GPU machine from the repository root): never
# NVLink multicast, a private kernel cache, unbuffered Python, $OUT for what comes back and $B
# for the carried binaries (build.sh puts them in .carry/).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export MOEJIT_CACHE_DIR=${MOEJIT_CACHE_DIR:-/tmp/moejit-cache} PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=${B:-.carry}
# ncu_sass NAME OP: every SASS line of OP's warp routing kernel at T=16384 with its count per token
# ($OUT/NAME_sass.txt, by sass_summary.py; the CSV stays in /tmp), and the two summary lines.
ncu_sass() {
  timeout 150 ncu --section SourceCounters --kernel-name regex:routing_warp --launch-count 1 \
    --page source --csv --print-source sass $B/moejit bench bench/specs/routing.json --op $2 --tokens 16384 --calls 1 --replays 1 > /tmp/$1.csv 2>&1
  python3 bench/device/sass_summary.py /tmp/$1.csv 16384 0 > $OUT/$1_sass.txt
  head -2 $OUT/$1_sass.txt
}
# routing_tests [ENV=VALUE...]: the [routing] GPU tests ($OUT/tests.txt), their exit code and summary.
routing_tests() {
  echo "== [routing] tests $*"
  env "$@" timeout 240 $B/test_gpu "[routing]" > $OUT/tests.txt 2>&1; echo "exit $?"
  grep -E "FAILED|test cases|assertions|All tests" $OUT/tests.txt | head -6
}
# ab_old_new OPS TOKENS [OPS TOKENS ...]: three rounds of `moejit bench` of each OPS at its
# TOKENS with $B/moejit_old and $B/moejit in turn, as `### VARIANT ROUND` sections of
# $OUT/bench.txt (ab_table.py reads them).
ab_old_new() {
  for round in 1 2 3; do
    for v in old new; do
      local bin=$B/moejit; [ $v != new ] && bin=$B/moejit_$v
      echo "### $v $round" >> $OUT/bench.txt
      local args=("$@")
      for ((i = 0; i < ${#args[@]}; i += 2)); do
        timeout 90 $bin bench bench/specs/routing.json --op ${args[i]} --tokens ${args[i+1]} >> $OUT/bench.txt 2>&1
      done
    done
  done
}
# routing_beside_torch: bench/routing_torch.py with $B/moejit (the table beside torch eager and
# torch.compile, and the block/warp crossover) into $OUT/routing.{txt,json}, $OUT/crossover.json.
routing_beside_torch() {
  echo "== routing beside torch"
  timeout 240 python3 bench/routing_torch.py --moejit $B/moejit --json $OUT/routing.json --crossover $OUT/crossover.json 2>&1 |
    grep -v -E "^\\$|warn|Online softmax|split the|important use|softmax\.$|^$|UserWarning" > $OUT/routing.txt
  tail -40 $OUT/routing.txt
}
# ab_run NAME ROUND BIN SPEC OPS TOKENS [ENV=VALUE...]: one `moejit bench` of OPS (comma-separated)
# at TOKENS (space-separated) with BIN and the environment given, as section `### NAME ROUND` of
# $OUT/bench.txt (ab_table.py reads them).
ab_run() {
  local name=$1 round=$2 bin=$3 spec=$4 ops=$5 tokens=$6
  shift 6
  echo "### $name $round" >> $OUT/bench.txt
  env "$@" timeout 120 $bin bench $spec --op $ops --tokens $tokens >> $OUT/bench.txt 2>&1
}
