#!/usr/bin/env bash
# Packs everything under $OUT into $OUT/out.tar: the device tool brings back at most 8 files
# (act19/act20 lost their tables' files to that). Run it after the run's script, also when that
# timed out, e.g. `timeout 540 bash bench/device/act22.sh; bash bench/device/pack_out.sh`, then
# here: `tar xf FILES_AT/out.tar -C bench/results/DATE/RUN`.
set -euo pipefail
OUT=${OUT:-/tmp/out}
cd "$OUT"
tmp=$(mktemp)
tar cf "$tmp" --exclude=./out.tar .
find . -mindepth 1 -delete
mv "$tmp" out.tar
tar tf out.tar | grep -c -v '/$' | xargs printf '%s files in out.tar\n'
