#!/usr/bin/env python3
"""Side-by-side table of `moejit bench` runs: FILE holds sections headed `### VARIANT ROUND`,
each followed by `moejit bench` output. Prints, per (op, T), the median us/call of each variant
over its rounds (round 1 is a warm-up and is dropped when there are more). Usage: ab_table.py FILE"""
import collections
import statistics
import sys

runs = collections.defaultdict(lambda: collections.defaultdict(list))  # (op, T) -> variant -> [(round, us)]
variants = []
variant = rnd = None
for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
    f = line.split()
    if line.startswith("### "):
        variant, rnd = f[1], int(f[2])
        if variant not in variants:
            variants.append(variant)
        continue
    if variant and len(f) >= 3 and f[1].isdigit():
        try:
            runs[(f[0], int(f[1]))][variant].append((rnd, float(f[2])))
        except ValueError:
            pass
print(f"{'op':<22}{'T':>7}" + "".join(f"{v:>10}" for v in variants))
for (op, t), per in runs.items():
    cells = []
    for v in variants:
        xs = per.get(v, [])
        kept = [us for r, us in xs if r > 1] or [us for r, us in xs]
        cells.append(f"{statistics.median(kept):>10.2f}" if kept else f"{'-':>10}")
    print(f"{op:<22}{t:>7}" + "".join(cells))
