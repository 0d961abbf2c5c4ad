#!/usr/bin/env bash
# Builds act26.sh's variants on this machine into .carry/: moejit_n (the tree as it is) and
# moejit_dpK, the dense activation grid held to K blocks an SM, for K in 64 32 16 8. Leaves
# runtime/activation_op.cpp as it found it.
set -euo pipefail
cd "$(dirname "$0")/../.."
f=runtime/activation_op.cpp
line='std::min<std::int64_t>(blocks, 0x7fffffff)'
grep -qF "$line" $f || { echo "$f: the dense grid line has changed; edit this script" >&2; exit 1; }
bash bench/device/build.sh >/dev/null
cp .carry/moejit .carry/moejit_n
cp $f /tmp/activation_op.cpp.orig
trap 'cp /tmp/activation_op.cpp.orig $f; cmake --build build-dev --target moejit_cli >/dev/null' EXIT
for k in 64 32 16 8; do
  sed "s/$line/std::min<std::int64_t>(blocks, $k * sm_count_)/" /tmp/activation_op.cpp.orig > $f
  cmake --build build-dev --target moejit_cli >/dev/null
  strip -o .carry/moejit_dp$k build-dev/moejit
done
ls -la .carry
