#!/usr/bin/env bash
# Tenth session (nvidia-h200): diag50's clock64 phases for three diagnostic builds (not in git):
# diag = HEAD, diag_ilp = the rescan as 4 chains (ab51), diag_warp = warp_refill (ab49); [8] is
# the cache fill's cycles (keys ready -> first round), so rounds = [1] - [8].
source "$(dirname "$0")/common.sh"
I=$B/k3in
for v in diag diag_ilp diag_warp; do
  for T in 4 128; do
    mkdir -p $OUT/$v/t$T
    echo "$v T=$T $($B/moejit_$v run bench/specs/routing.json --op kimi_k3 --in logits=$I/logits_$T.npy --in bias=$I/bias_$T.npy --out-dir $OUT/$v/t$T --repeat 500 2>&1 | tail -1)"
  done
done
python3 - <<'PY'
import numpy as np, os
out = os.environ.get("OUT", "/tmp/out")
for v in ("diag", "diag_ilp", "diag_warp"):
    for T in (4, 128):
        ids = np.load(f"{out}/{v}/t{T}/ids.npy")
        r = ids[:, 3]
        for n in sorted(set(r.tolist())):
            s = ids[r == n]
            print(f"{v:10s} T={T:3d} refills={n}: tokens {len(s):3d}  keys {s[:,0].mean():5.0f}  fill {s[:,8].mean():5.0f}  rounds {(s[:,1]-s[:,8]).mean():5.0f}  finish {s[:,2].mean():4.0f}  total {s[:,5].mean():5.0f}  reruns {int(s[:,4].sum())}")
PY
