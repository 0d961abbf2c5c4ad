#!/usr/bin/env bash
# Tenth session (nvidia-h200): where a Kimi-K3 token that refills spends its extra time. A
# diagnostic build (not in git) writes, per token, clock64 deltas of its phases into the first
# ids: [0] start -> keys (loads and key math), [1] the selection (cache fill, rounds, a rerun),
# [2] the finish, [3] refills, [4] exact rerun, [5] total, [6] block, [7] warp. Inputs: the
# bench's own (bench/device: .carry/k3in, same Rng as `moejit bench`); `moejit run --repeat`
# (L2-warm inputs) prints the median per call; the last call's ids are kept.
source "$(dirname "$0")/common.sh"
D=$B/moejit_diag; I=$B/k3in
for T in 2 4 8 64 128; do
  mkdir -p $OUT/t$T
  echo "T=$T $($D run bench/specs/routing.json --op kimi_k3 --in logits=$I/logits_$T.npy --in bias=$I/bias_$T.npy --out-dir $OUT/t$T --repeat 500 2>&1 | tail -1)"
  echo "T=$T old $($B/moejit_old run bench/specs/routing.json --op kimi_k3 --in logits=$I/logits_$T.npy --in bias=$I/bias_$T.npy --out-dir /tmp/o$T --repeat 500 2>&1 | tail -1)"
done
echo "swap: T=4 logits, T=8 bias: $($B/moejit_old run bench/specs/routing.json --op kimi_k3 --in logits=$I/logits_4.npy --in bias=$I/bias_8.npy --out-dir /tmp/s1 --repeat 500 2>&1 | tail -1)"
echo "swap: T=8 logits, T=4 bias: $($B/moejit_old run bench/specs/routing.json --op kimi_k3 --in logits=$I/logits_8.npy --in bias=$I/bias_4.npy --out-dir /tmp/s2 --repeat 500 2>&1 | tail -1)"
python3 - <<'PY'
import numpy as np, os
out = os.environ.get("OUT", "/tmp/out")
for T in (2, 4, 8, 64, 128):
    ids = np.load(f"{out}/t{T}/ids.npy")
    print(f"T={T}: keys/select/finish/refills/rerun/total/block/warp per token")
    for t in range(min(T, 8)):
        print("   ", t, ids[t, :8].tolist())
    r = ids[:, 3]
    for n in sorted(set(r.tolist())):
        sel = ids[r == n]
        print(f"   refills={n}: tokens {len(sel)}  mean keys {sel[:,0].mean():.0f} select {sel[:,1].mean():.0f} finish {sel[:,2].mean():.0f} total {sel[:,5].mean():.0f} max total {sel[:,5].max()}")
    print("   reruns", int(ids[:, 4].sum()))
PY
