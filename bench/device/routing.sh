#!/usr/bin/env bash
# One GPU call (nvidia-h200) for issue 3: routing tests + probe (routing_probe.sh, no ncu), then
# the side-by-side routing benchmark with torch and the block/warp crossover measurement.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export MOEJIT_CACHE_DIR=/tmp/moejit-cache PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
B=${B:-.carry}
NO_NCU=1 bash bench/device/routing_probe.sh
echo "== routing beside torch"
timeout 240 python3 bench/routing_torch.py --moejit $B/moejit --json $OUT/routing.json --crossover $OUT/crossover.json 2>&1 | grep -v "^\\$" | tee $OUT/routing.txt
