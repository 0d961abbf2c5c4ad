#!/usr/bin/env python3
"""Activations side by side: moejit (through `moejit bench`) and the torch versions a user would
otherwise pick (eager and torch.compile), in one script run on one GPU, timed alike
(performance.md: N calls captured in one CUDA graph, median of replays, inputs rotated past L2),
with the device-to-device copy bandwidth measured in the same run.

  python3 bench/activation_torch.py --moejit build/moejit [--quick] [--json out.json]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F

from graph_timing import CALLS, copy_bandwidth, time_per_call_us

L2 = 60 * 1024 * 1024
BETA, LINEAR_BETA = 4.0, 25.0
SPEC = os.path.join(os.path.dirname(__file__), "specs", "activation.json")


def silu_and_mul(x):
    d = x.shape[-1] // 2
    return F.silu(x[..., :d]) * x[..., d:]


def situ_and_mul(x):
    d = x.shape[-1] // 2
    g, u = x[..., :d].float(), x[..., d:].float()
    return (BETA * torch.tanh(g / BETA) * torch.sigmoid(g) * (LINEAR_BETA * torch.tanh(u / LINEAR_BETA))).to(x.dtype)


DENSE_OPS = "silu_2048,silu_3072,silu_7168,situ_2048,situ_3072,situ_7168,gelu_2048,gelu_tanh_2048,swiglu_oai_2880"
MASKED_OPS = "situ_3072_masked,silu_2048_masked"
MASKED_TOKENS = [64, 256, 2048, 8192]  # rows per expert; 8 experts half full = 256, 1024, 8192, 32768 real rows
MASKED_E256 = "silu_2048_masked_e256"  # DeepSeek-V3's masked shape: 256 experts
E256_TOKENS = [16, 64, 256]  # half full = 2048, 8192, 32768 real rows
EXPERTS = {"situ_3072_masked": 8, "silu_2048_masked": 8, MASKED_E256: 256}


def moejit_bench(moejit, ops, tokens, extra=()):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "bench.json")
        cmd = [moejit, "bench", SPEC, "--op", ops, "--tokens", ",".join(map(str, tokens)), "--json", out, *extra]
        print("$", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)
        with open(out) as f:
            return json.load(f)


def moejit_results(moejit, tokens):
    dense = moejit_bench(moejit, DENSE_OPS, tokens)
    # Masked with the counts rotated like the inputs, and kept in L2 (--hot) as in a layer, where
    # the dispatch writes them and the grouped GEMM reads them just before; dense at 256 rows too.
    masked = moejit_bench(moejit, MASKED_OPS, MASKED_TOKENS)
    hot = moejit_bench(moejit, MASKED_OPS, MASKED_TOKENS, ["--hot", "expert_num_tokens"])
    e256 = moejit_bench(moejit, MASKED_E256, E256_TOKENS)
    e256_hot = moejit_bench(moejit, MASKED_E256, E256_TOKENS, ["--hot", "expert_num_tokens"])
    extra = moejit_bench(moejit, "situ_3072,silu_2048", [8 * MASKED_TOKENS[0] // 2])
    extra_e256 = moejit_bench(moejit, "silu_2048", [256 * E256_TOKENS[0] // 2])
    dense["results"] += masked["results"] + hot["results"] + e256["results"] + e256_hot["results"]
    dense["dense_extra"] = extra["results"] + extra_e256["results"]
    return dense


def masked_against_dense(mj):
    """Masked (half-full experts) beside dense at the same real rows, us per call."""
    dense = {(r["op"], r["tokens"]): r["us_per_call"] for r in mj["results"] + mj["dense_extra"] if "masked" not in r["op"]}
    rows = []
    for r in mj["results"]:
        if "masked" not in r["op"] or r.get("hot"):
            continue
        hot = next(h for h in mj["results"] if h["op"] == r["op"] and h["tokens"] == r["tokens"] and h.get("hot"))
        real = EXPERTS[r["op"]] * r["tokens"] // 2
        d = dense.get((r["op"].split("_masked")[0], real))
        if d is None:
            continue
        rows.append({"op": r["op"], "t_max": r["tokens"], "real_rows": real, "masked_us": r["us_per_call"],
                     "masked_hot_us": hot["us_per_call"], "dense_us": d})
        print(f"  {r['op']:<21} {real:>6} real rows: masked {r['us_per_call']:>8.2f} us ({100 * (r['us_per_call'] / d - 1):+5.1f}%), "
              f"counts in L2 {hot['us_per_call']:>8.2f} ({100 * (hot['us_per_call'] / d - 1):+5.1f}%), dense {d:>8.2f}")
    return rows


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--moejit", required=True)
    p.add_argument("--quick", action="store_true", help="fewer shapes")
    p.add_argument("--json")
    a = p.parse_args()
    tokens = [1, 16, 1024, 32768] if a.quick else [1, 16, 128, 1024, 8192, 32768]
    widths = [2048, 3072, 7168]

    mj = moejit_results(a.moejit, tokens)
    ours = {(r["op"], r["tokens"]): r for r in mj["results"]}
    copy = copy_bandwidth()
    print(f"torch {torch.__version__}; copy bandwidth in this run: torch {copy / 1e9:.0f} GB/s, "
          f"moejit bench {mj['copy_GBps']:.0f} GB/s; device {mj['device']}", flush=True)

    compiled = {"silu": torch.compile(silu_and_mul), "situ": torch.compile(situ_and_mul)}
    eager = {"silu": silu_and_mul, "situ": situ_and_mul}
    rows = []
    header = (f"{'op':<6} {'d':>5} {'T':>6} | {'moejit us':>10} {'%copy':>6} | {'eager us':>9} | "
              f"{'compile us':>10} {'%copy':>6} | {'x compile':>9}")
    print(header)
    for kind in ("silu", "situ"):
        for d in widths:
            for t in tokens:
                bytes_moved = t * d * 2 * 3
                n = max(1, min(CALLS, -(-3 * L2 // (t * 2 * d * 2 + t * d * 2))))
                sets = [torch.empty(t, 2 * d, device="cuda", dtype=torch.bfloat16).uniform_(-4, 4) for _ in range(n)]
                torch._dynamo.mark_dynamic(sets[0], 0) if t > 1 else None
                e = time_per_call_us(eager[kind], [(x,) for x in sets])
                c = time_per_call_us(compiled[kind], [(x,) for x in sets])
                m = ours[(f"{kind}_{d}", t)]
                row = {"op": kind, "d": d, "tokens": t, "bytes": bytes_moved, "moejit_us": m["us_per_call"],
                       "moejit_copy_fraction": m["copy_fraction"], "eager_us": e, "compile_us": c,
                       "compile_copy_fraction": bytes_moved / (c * 1e-6) / copy}
                rows.append(row)
                print(f"{kind:<6} {d:>5} {t:>6} | {m['us_per_call']:>10.2f} {100 * m['copy_fraction']:>5.1f}% | "
                      f"{e:>9.2f} | {c:>10.2f} {100 * row['compile_copy_fraction']:>5.1f}% | {c / m['us_per_call']:>8.2f}x",
                      flush=True)
                del sets
    others = [r for r in mj["results"] if not any(r["op"] == f"{k}_{d}" for k in ("silu", "situ") for d in widths)]
    print("\nother moejit activation ops (bytes counted over real rows for masked layouts):")
    for r in others:
        hot = " (counts in L2)" if r.get("hot") else ""
        print(f"  {r['op']:<18} T={r['tokens']:>6} {r['us_per_call']:>9.2f} us {100 * r['copy_fraction']:>6.1f}% of copy{hot}")
    print("\nmasked, experts half full, against dense at the same real rows (+ = slower than dense):")
    masked_rows = masked_against_dense(mj)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": mj["device"], "torch": torch.__version__, "copy_GBps_torch": copy / 1e9,
                       "copy_GBps_moejit": mj["copy_GBps"], "rows": rows, "masked_against_dense": masked_rows, "moejit": mj}, f, indent=2)


if __name__ == "__main__":
    sys.exit(main())
