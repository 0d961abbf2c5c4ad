#!/usr/bin/env python3
"""Summarize the clock64 phases a diagnostic routing build (not in git; diag50.sh says what it
writes) leaves in the first ids of each token: per refill count, the mean cycles of each phase.
[0] start -> keys, [1] selection, [2] finish, [3] refills, [4] exact rerun, [5] total, [6] block,
[7] warp, [8] the cache fill (keys ready -> first round; diag51's builds and later -- diag50's left
an expert there: pass --no-fill).
Usage: k3_phases.py LABEL IDS.npy [TOKENS_TO_LIST] [--no-fill]"""
import sys

import numpy as np

args = [a for a in sys.argv[1:] if a != "--no-fill"]
label, path = args[0], args[1]
listed = int(args[2]) if len(args) > 2 else 0
ids = np.load(path)
if "--no-fill" in sys.argv:
    ids[:, 8] = 0
for t in range(min(listed, len(ids))):
    print(f"{label} token {t}: {ids[t, :9].tolist()}")
for n in sorted(set(ids[:, 3].tolist())):
    s = ids[ids[:, 3] == n]
    print(f"{label} refills={n}: tokens {len(s):3d}  keys {s[:, 0].mean():5.0f}  fill {s[:, 8].mean():5.0f}  "
          f"rounds {(s[:, 1] - s[:, 8]).mean():5.0f}  select {s[:, 1].mean():5.0f}  finish {s[:, 2].mean():4.0f}  "
          f"total {s[:, 5].mean():5.0f} (max {s[:, 5].max()})  reruns {int(s[:, 4].sum())}")
