#!/usr/bin/env bash
# Twelfth session's closing run (nvidia-h200) on the shipped tree (1733816: two activation kernels,
# the 32-bit one at 32 registers): every [activation] GPU test, the activation table beside torch
# eager and torch.compile (masked with the counts rotated and in L2 beside dense). Then the masked
# grid, n (shipped: 32 blocks an SM in all) against m (dense's grid for a half-full expert, capped
# at 64 blocks an SM), half full (moejit bench, beside dense at the same real rows) and with few
# rows per expert (moejit run --repeat, T_max 64 and 8192, counts 0-12: most blocks find no rows).
# $B/moejit_n is build.sh's moejit at 1733816, $B/moejit_m the same with the masked grid of
# runtime/activation_op.cpp replaced as results/2026-12-01-g/final18/NOTE.txt says.
source "$(dirname "$0")/common.sh"
gpu_tests "[activation]"
activation_beside_torch 12
echo "== masked grid: n against m, half full"
SPEC=bench/specs/activation.json BASE=none ab_variants "n m" \
  silu_2048_masked,situ_3072_masked 64,256,2048,8192 silu_2048,situ_3072 256,1024,8192,32768
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
echo "== masked grid: n against m, few rows an expert (moejit run --repeat 200, us per call)"
mkdir -p /tmp/low
python3 - <<'PY'
import numpy as np
for t in (64, 8192):
    x = np.random.default_rng(1).uniform(-4, 4, size=(8, t, 4096)).astype(np.float32)
    np.save(f"/tmp/low/x_{t}.npy", (x.view(np.uint32) >> 16).astype(np.uint16))
np.save("/tmp/low/counts.npy", np.array([3, 0, 7, 1, 12, 5, 0, 2], dtype=np.int32))
PY
for t in 64 8192; do
  for v in n m n m; do
    r=$(timeout 60 $B/moejit_$v run bench/specs/activation.json --op silu_2048_masked --in x=/tmp/low/x_$t.npy \
      --in expert_num_tokens=/tmp/low/counts.npy --out-dir /tmp/low/o --repeat 200 2>&1 | tail -1)
    echo "T_max $t $v: $r" | tee -a $OUT/low.txt
  done
done
