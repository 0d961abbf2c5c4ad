#!/usr/bin/env bash
# Tenth session (nvidia-h200): Kimi-K3 with the refill as ~40 instructions across the warp
# (warp_refill: one reduction and a ballot) -- w2 -- and the same with a 96-register budget on
# sm_90a, with which ptxas issues all 14 load vectors first (new); old = HEAD 51d1e41. The
# clock64 phases (diag50/51) of a diagnostic build of new at T=4 and 128.
source "$(dirname "$0")/common.sh"
routing_tests
ab_variants "old w2 new" kimi_k3 1,2,4,8,16,32,64,128,256,1024,4096,16384
inst_per_token old $B/moejit_old kimi_k3
inst_per_token new $B/moejit kimi_k3
I=$B/k3in
for T in 4 128; do
  mkdir -p $OUT/diag/t$T
  $B/moejit_diag_w2mb5 run bench/specs/routing.json --op kimi_k3 --in logits=$I/logits_$T.npy --in bias=$I/bias_$T.npy --out-dir $OUT/diag/t$T --repeat 500 >/dev/null 2>&1
done
python3 - <<'PY'
import numpy as np, os
out = os.environ.get("OUT", "/tmp/out")
for T in (4, 128):
    ids = np.load(f"{out}/diag/t{T}/ids.npy")
    r = ids[:, 3]
    for n in sorted(set(r.tolist())):
        s = ids[r == n]
        print(f"diag_w2mb5 T={T:3d} refills={n}: tokens {len(s):3d}  keys {s[:,0].mean():5.0f}  fill {s[:,8].mean():5.0f}  rounds {(s[:,1]-s[:,8]).mean():5.0f}  finish {s[:,2].mean():4.0f}  total {s[:,5].mean():5.0f}  reruns {int(s[:,4].sum())}")
PY
python3 bench/device/ab_table.py $OUT/bench.txt | tee $OUT/table.txt
