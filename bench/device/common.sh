# Sourced by every script here (they run on the GPU machine from the repository root): never
# NVLink multicast, a private kernel cache, unbuffered Python, $OUT for what comes back and $B
# for the carried binaries (build.sh puts them in .carry/).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export MOEJIT_CACHE_DIR=${MOEJIT_CACHE_DIR:-/tmp/moejit-cache} PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
B=${B:-.carry}
