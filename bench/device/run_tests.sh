#!/usr/bin/env bash
# The GPU checks, in one call (device tool; nvidia-h200-x2 runs the tp 2 cases too), with the
# binaries build.sh put in .carry/:
#   timeout 560 bash bench/device/run_tests.sh [tests|models|prefill-models|checks|python|--exhaustive]
# tests (the default): every [gpu] test but the experts at every shipped model's shape (~300 s
# alone: they fill and upload up to 59 GB of weights once a variant); models: those at decode and
# small prefill sizes; prefill-models: those at T = 512-16384, rows sampled (the shapes of at most
# 25 GB of weights, two fills each); checks:
# `moejit run` against --reference, a compute-sanitizer pass and `moejit check` of every shipped
# spec (more than one call's 600 s: `checks NAME...` checks only specs/NAME.json; kimi-k3 alone
# takes over 280 s); python: the Python package's
# tests (tests/python: every op against `moejit run`, MoELayer, torch.compile and CUDA graphs;
# build.sh puts the package in .carry/python), its per-call overhead (bench/bench_python.py) and
# MoELayer beside its ops one by one (bench/bench_layer.py: up to 59 GB of weights a model);
# --exhaustive: the exhaustive checks of the activation's tanh, reciprocal and division
# (tests/gpu/*.cu, built there with nvcc). One call each. Outputs into $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export MOEJIT_CACHE_DIR=${MOEJIT_CACHE_DIR:-/tmp/moejit-test-cache}
OUT=${OUT:-/tmp/out}
B=${B:-.carry}
mkdir -p "$OUT"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
$B/moejit warmup specs/ bench/specs/ --arch sm_90a -q | grep -E "^warmup"
what=${1:-tests}
models_case="experts of every shipped model*"
if [ "$what" = tests ]; then
  echo "== [gpu] tests but the experts and the layer"
  timeout 200 $B/test_gpu "~[experts]~[layer]" > "$OUT/test_gpu.txt" 2>&1; echo "test_gpu exit $?"
  grep -E "FAILED|SKIPPED|test cases|assertions" "$OUT/test_gpu.txt" | head -12
  echo "== [experts] and [layer] tests but the shipped models' shapes"
  timeout 330 $B/test_gpu "[experts]~$models_case,[layer]" -d yes > "$OUT/test_experts.txt" 2>&1; echo "test_gpu exit $?"
  grep -E "FAILED|test cases|assertions| s: " "$OUT/test_experts.txt" | head -20
elif [ "$what" = models ] || [ "$what" = prefill-models ]; then
  name="experts of every shipped model match*"
  [ "$what" = prefill-models ] && name="experts of every shipped model at prefill*"
  echo "== $name"
  timeout 540 $B/test_gpu "$name" -d yes > "$OUT/test_$what.txt" 2>&1; echo "test_gpu exit $?"
  grep -E "FAILED|test cases|assertions| s: " "$OUT/test_$what.txt" | head -20
elif [ "$what" = checks ]; then
  echo "== moejit run vs --reference"
  timeout 60 python3 tests/gpu/run_npy.py --moejit $B/moejit 2>&1 | tail -3
  echo "== compute-sanitizer memcheck"
  timeout 90 compute-sanitizer --tool memcheck $B/moejit check specs/kimi-k3.json --op router,experts_act_masked,tail_tp1,experts_tp8 --tokens 1,33 2>&1 | tail -3
  named="${*:2}"
  echo "== moejit check, ${named:-every shipped spec}"
  specs=()
  for name in "${@:2}"; do specs+=("specs/$name.json"); done
  [ ${#specs[@]} -gt 0 ] || specs=(specs/*.json)
  for s in "${specs[@]}"; do
    [ "$(basename "$s")" = schema.json ] && continue
    timeout $(( ${#specs[@]} == 1 ? 420 : 240 )) $B/moejit check "$s"; rc=$?; echo "$(basename "$s") exit $rc"
  done > "$OUT/check.txt" 2>&1
  grep -E "exit|^FAIL" "$OUT/check.txt" | head -20
elif [ "$what" = python ]; then
  if [ ! -d $B/python/moejit ]; then
    echo "no $B/python/moejit: bench/device/build.sh builds it where a CPython 3.12 is"
    exit 1
  fi
  echo "== Python package (tests/python)"
  PYTHONPATH=$B/python MOEJIT_CLI=$B/moejit timeout 360 python3 -m pytest -q -rs -p no:cacheprovider tests/python \
    > "$OUT/pytest.txt" 2>&1; echo "pytest exit $?"
  grep -E "passed|failed|^FAILED|^ERROR|^SKIPPED" "$OUT/pytest.txt" | tail -12
  echo "== Python's cost per call (bench/bench_python.py)"
  PYTHONPATH=$B/python timeout 120 python3 bench/bench_python.py --json "$OUT/python.json" 2>&1 | tee "$OUT/bench_python.txt" | tail -9
  echo "== MoELayer beside its ops one by one (bench/bench_layer.py)"
  PYTHONPATH=$B/python timeout 150 python3 bench/bench_layer.py --json "$OUT/layer.json" 2>&1 | tee "$OUT/bench_layer.txt" | tail -56
elif [ "$what" = --exhaustive ]; then
  echo "== exhaustive checks"
  for t in div_rcp_sweep tanh_exhaustive rcp_exhaustive; do
    nvcc -arch=sm_90a -I templates tests/gpu/$t.cu -o /tmp/$t && timeout 60 /tmp/$t | tee -a "$OUT/exhaustive.txt"
  done
fi
