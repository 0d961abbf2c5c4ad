#!/usr/bin/env bash
# A/B of moejit builds in one device call: each named git revision built here, then one command
# run over every build in alternating rounds there (builds drift together with the machine, so
# only figures of the same call are compared).
#   here:   bash bench/device/ab.sh build NAME=REV...
#           each REV's Release moejit, test_gpu and moejit_tail_bench, stripped into .carry/ab/NAME
#           (worktrees under ${AB_TREES:-/tmp/moejit-ab}; carry .carry/ab)
#   there:  bash bench/device/ab.sh run ROUNDS NAME... -- CMD [ARG...]
#           CMD with every {bin} replaced by .carry/ab/NAME, ROUNDS times over the NAMEs in turn, each
#           build with a kernel cache of its own (compiled before the first round), under
#           NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# e.g.  bash bench/device/ab.sh run 2 main variant -- '{bin}/moejit' bench bench/specs/experts.json --op qwen3_30b_a3b --tokens 1
set -uo pipefail
cd "$(dirname "$0")/../.."
usage() { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 1 ] || usage
mode=$1
shift
if [ "$mode" = build ]; then
  set -e
  [ $# -ge 1 ] || usage
  root=$PWD
  for spec in "$@"; do
    name=${spec%%=*} rev=${spec#*=}
    [ "$name" != "$spec" ] && [ -n "$name" ] || usage
    tree=${AB_TREES:-/tmp/moejit-ab}/$name
    [ -d "$tree" ] || git worktree add -f --detach "$tree" "$rev" >/dev/null
    git -C "$tree" checkout -q --detach "$rev"
    cmake -S "$tree" -B "$tree/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMOEJIT_BUILD_PYTHON=OFF -DMOEJIT_BUILD_TESTS=ON >/dev/null
    cmake --build "$tree/build" --target moejit_cli test_gpu moejit_tail_bench >/dev/null
    mkdir -p "$root/.carry/ab/$name"
    for bin in moejit test_gpu moejit_tail_bench; do strip -o "$root/.carry/ab/$name/$bin" "$tree/build/$bin"; done
    echo "$name: $(git -C "$tree" log -1 --format='%h %s' | cut -c1-100)"
  done
  du -sh "$root/.carry/ab"
elif [ "$mode" = run ]; then
  [ $# -ge 4 ] || usage
  rounds=$1
  shift
  names=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do names+=("$1"); shift; done
  [ $# -ge 2 ] && [ ${#names[@]} -ge 1 ] || usage
  shift
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  run_one() {  # NAME: the command with {bin} -> .carry/ab/NAME, in NAME's own cache
    local args=() a
    for a in "${@:2}"; do args+=("${a//\{bin\}/.carry/ab/$1}"); done
    MOEJIT_CACHE_DIR=/tmp/moejit-ab-cache/$1 "${args[@]}"
  }
  for n in "${names[@]}"; do [ -d ".carry/ab/$n" ] || { echo "ab.sh: no build .carry/ab/$n" >&2; exit 2; }; done
  for n in "${names[@]}"; do run_one "$n" "$@" >/dev/null 2>&1; done  # compile each build's kernels first
  for ((r = 1; r <= rounds; ++r)); do
    for n in "${names[@]}"; do
      echo "== $n, round $r"
      run_one "$n" "$@"
    done
  done
else
  usage
fi
