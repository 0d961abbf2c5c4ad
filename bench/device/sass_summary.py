#!/usr/bin/env python3
"""Summarize an ncu `--page source --csv --print-source sass` dump: warp instructions executed
per token, by opcode, and the hottest SASS lines (TOP 0: every line, in address order, with its
count per token). COLUMN (default "Instructions Executed") picks another per-line counter, e.g.
"Warp Stall Sampling (All Samples)". Usage: sass_summary.py FILE.csv TOKENS [TOP [COLUMN]]"""
import collections
import csv
import sys

path, tokens = sys.argv[1], int(sys.argv[2])
top = int(sys.argv[3]) if len(sys.argv) > 3 else 30
col = sys.argv[4] if len(sys.argv) > 4 else "Instructions Executed"
lines = open(path, encoding="utf-8", errors="replace").read().splitlines()
start = next(i for i, l in enumerate(lines) if col in l and "Source" in l)
rows = list(csv.DictReader(lines[start:]))
total = 0
by_op = collections.Counter()
hot = []
for r in rows:
    try:
        n = int(float(r[col].replace(",", "")))
    except (ValueError, KeyError):
        continue
    src = r.get("Source", "").strip()
    op = src.split()[0] if src else "?"
    if op.startswith("@"):
        op = src.split()[1] if len(src.split()) > 1 else op
    op = op.split(".")[0]
    total += n
    by_op[op] += n
    hot.append((n, r.get("Address", ""), src))
print(f"{path}: {total / tokens:.0f} {col} per token")
print("by opcode (per token): " + ", ".join(f"{k} {v / tokens:.0f}" for k, v in by_op.most_common(24)))
for n, addr, src in (hot if top == 0 else sorted(hot, reverse=True)[:top]):
    print(f"  {n / tokens:7.2f} {addr} {src[:90]}")
