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
