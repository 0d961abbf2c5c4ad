#!/usr/bin/env bash
# Builds, on this (Debian) machine, the binaries the GPU machine runs: a Release build of the
# moejit CLI and the [gpu] test binary, stripped into .carry/ (git-ignored), the folder the device
# tool carries; and the Python package for the GPU machine's python3 (3.12, with torch) in
# .carry/python/moejit: the module built against a CPython 3.12 here ($MOEJIT_GPU_PYTHON, default
# pyenv's 3.12), which imports in any 3.12.x (any later CPython too where CMake has the stable ABI).
# The GPU machine has no Debian -dev packages; these binaries need only libc/libstdc++,
# libnvrtc.so.13 and libnccl.so.2 there (rpath /usr/local/cuda/lib64), and dlopen libcuda.
set -euo pipefail
cd "$(dirname "$0")/../.."
gpu_python=${MOEJIT_GPU_PYTHON:-$(ls -d /root/.pyenv/versions/3.12*/bin/python3 2>/dev/null | head -1)}
python_args=(-DMOEJIT_BUILD_PYTHON=OFF)
if [ -n "$gpu_python" ] && [ -x "$gpu_python" ]; then
  # NOTE: a venv of that Python holding nanobind (PyPI): CMake asks it for nanobind's CMake files.
  [ -x build-dev/venv312/bin/python3 ] || "$gpu_python" -m venv build-dev/venv312
  build-dev/venv312/bin/python3 -c "import nanobind" 2>/dev/null ||
    build-dev/venv312/bin/python3 -m pip install -q --disable-pip-version-check -r python/requirements-build.txt
  python_args=(-DPython_EXECUTABLE="$PWD/build-dev/venv312/bin/python3" -UMOEJIT_BUILD_PYTHON)
else
  echo "build.sh: no CPython 3.12 here (set MOEJIT_GPU_PYTHON): the Python package is not built" >&2
fi
cmake -S . -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=Release -DMOEJIT_WERROR=ON "${python_args[@]}" >/dev/null
targets=(moejit_cli test_gpu moejit_tail_bench)
grep -q "^MOEJIT_BUILD_PYTHON:BOOL=ON" build-dev/CMakeCache.txt && targets+=(_moejit)
cmake --build build-dev --target "${targets[@]}" "$@"
mkdir -p .carry
strip -o .carry/moejit build-dev/moejit
strip -o .carry/test_gpu build-dev/test_gpu
strip -o .carry/moejit_tail_bench build-dev/moejit_tail_bench
if [[ " ${targets[*]} " == *" _moejit "* ]]; then
  rm -rf .carry/python && mkdir -p .carry/python/moejit
  cp python/moejit/*.py .carry/python/moejit/
  for so in build-dev/python/moejit/_moejit*.so; do strip -o ".carry/python/moejit/$(basename "$so")" "$so"; done
fi
# The commit the binaries were built at, for run.sh's first line: the GPU machine's copy of the
# tree may carry an older .git.
echo "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!bench/results' || echo '+changes') $(date -u +%FT%TZ)" > .carry/BUILT
du -sh .carry
