#!/usr/bin/env bash
# Builds, on this (Debian) machine, the binaries the GPU machine runs: a Release build of the
# moejit CLI and the [gpu] test binary, stripped into .carry/ (git-ignored), the folder the device
# tool carries.
# The GPU machine has no Debian -dev packages; these binaries need only libc/libstdc++,
# libnvrtc.so.13 and libnccl.so.2 there (rpath /usr/local/cuda/lib64), and dlopen libcuda.
set -euo pipefail
cd "$(dirname "$0")/../.."
cmake -S . -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=Release -DMOEJIT_WERROR=ON >/dev/null
cmake --build build-dev --target moejit_cli test_gpu moejit_tail_bench "$@"
mkdir -p .carry
strip -o .carry/moejit build-dev/moejit
strip -o .carry/test_gpu build-dev/test_gpu
strip -o .carry/moejit_tail_bench build-dev/moejit_tail_bench
du -sh .carry
