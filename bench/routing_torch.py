#!/usr/bin/env python3
"""Routing side by side: moejit (`moejit bench`, which picks the kernel by the measured
crossover) and the torch version of each router (eager and torch.compile), in one script run,
timed alike (20 calls per CUDA graph, median of 7 replays, logits rotated past L2), against the
DRAM floor (logits + outputs over the copy bandwidth measured here). Also measures the
block/warp crossover of the single-group kernels and writes it as runtime/routing_crossover.json
data (--crossover FILE).

  python3 bench/routing_torch.py --moejit build/moejit [--json out.json] [--crossover out.json]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import torch

from graph_timing import CALLS, time_per_call_us

L2 = 60 * 1024 * 1024
SPEC = os.path.join(os.path.dirname(__file__), "specs", "routing.json")
TOKENS = [1, 16, 128, 1024, 4096, 16384]
CROSSOVER_TOKENS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
MODELS = {  # name: (E, K, groups, topk_group, scoring, bias, alpha)
    "deepseek_v3": (256, 8, 8, 4, "sigmoid", True, 2.5),
    "kimi_k2": (384, 8, 1, 1, "sigmoid", True, 2.827),
    "kimi_k3": (896, 16, 1, 1, "sigmoid", True, 1.0),
    "qwen3": (128, 8, 1, 1, "softmax", False, 1.0),
    "glm45": (160, 8, 1, 1, "sigmoid", True, 2.5),
}


def make_router(e, k, groups, topk_group, scoring, has_bias, alpha):
    def route(logits, bias):
        scores = logits.sigmoid() if scoring == "sigmoid" else logits.softmax(dim=-1)
        keys = scores + bias if has_bias else scores
        if groups > 1:
            t = keys.shape[0]
            g = keys.view(t, groups, -1).topk(2, dim=-1)[0].sum(dim=-1)
            keep = g.topk(topk_group, dim=-1, sorted=False)[1]
            mask = torch.zeros_like(g).scatter_(1, keep, 1.0)
            mask = mask.unsqueeze(-1).expand(t, groups, e // groups).reshape(t, e)
            keys = keys.masked_fill(mask == 0, float("-inf"))
        ids = keys.topk(k, dim=-1, sorted=True)[1]
        w = scores.gather(1, ids)
        w = w / (w.sum(dim=-1, keepdim=True) + 1e-20)
        return w * alpha, ids.to(torch.int32)
    return route


def moejit_bench(moejit, ops, tokens):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        cmd = [moejit, "bench", SPEC, "--op", ops, "--tokens", ",".join(map(str, tokens)), "--json", out]
        print("$", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            return json.load(f)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--moejit", required=True)
    p.add_argument("--json")
    p.add_argument("--crossover")
    a = p.parse_args()
    mj = moejit_bench(a.moejit, ",".join(MODELS), TOKENS)
    ours = {(r["op"], r["tokens"]): r for r in mj["results"]}
    copy = mj["copy_GBps"] * 1e9
    print(f"device {mj['device']}, copy bandwidth {mj['copy_GBps']:.0f} GB/s, torch {torch.__version__}")
    print(f"{'model':<12} {'T':>6} | {'moejit us':>9} {'x floor':>8} | {'eager us':>9} {'compile us':>10} | {'floor us':>8}")
    rows = []
    for name, (e, k, groups, tg, scoring, has_bias, alpha) in MODELS.items():
        route = make_router(e, k, groups, tg, scoring, has_bias, alpha)
        compiled = torch.compile(route, dynamic=True)
        bias = torch.randn(e, device="cuda") * 0.1
        for t in TOKENS:
            n = max(1, min(CALLS, -(-3 * L2 // (t * e * 4))))
            sets = [(torch.randn(t, e, device="cuda"), bias) for _ in range(n)]
            eager_us = time_per_call_us(route, sets)
            compile_us = time_per_call_us(compiled, sets)
            r = ours[(name, t)]
            floor = (t * e * 4 + t * k * 8 + e * 4) / copy * 1e6
            rows.append({"model": name, "tokens": t, "moejit_us": r["us_per_call"], "eager_us": eager_us,
                         "compile_us": compile_us, "floor_us": floor})
            print(f"{name:<12} {t:>6} | {r['us_per_call']:>9.2f} {r['us_per_call'] / floor:>7.2f}x | {eager_us:>9.2f} "
                  f"{compile_us:>10.2f} | {floor:>8.2f}", flush=True)
    # The crossover: the largest token count at which the block kernel is still faster.
    forced = ",".join(f"{m}_{v}" for m in MODELS for v in ("block", "warp"))
    cx = moejit_bench(a.moejit, forced, CROSSOVER_TOKENS)
    times = {(r["op"], r["tokens"]): r["us_per_call"] for r in cx["results"]}
    entries = []
    print("\nblock / warp kernels, us per call:")
    for m in MODELS:
        e, k, grouped = MODELS[m][0], MODELS[m][1], MODELS[m][2] > 1
        line, cross = [], 0
        for t in CROSSOVER_TOKENS:
            b, w = times[(f"{m}_block", t)], times[(f"{m}_warp", t)]
            line.append(f"T={t}: {b:.2f}/{w:.2f}")
            if b < w:
                cross = t
        entries.append({"num_experts": e, "topk": k, "grouped": grouped, "crossover_tokens": cross})
        print(f"  {m:<11} crossover {cross:>4} tokens  " + "  ".join(line))
    if a.crossover:
        with open(a.crossover, "w") as f:
            json.dump({"device": mj["device"], "entries": entries, "tokens": CROSSOVER_TOKENS,
                       "times_us": {f"{o} T={t}": v for (o, t), v in times.items()}}, f, indent=2)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": mj["device"], "copy_GBps": mj["copy_GBps"], "torch": torch.__version__, "rows": rows,
                       "moejit": mj}, f, indent=2)


if __name__ == "__main__":
    sys.exit(main())
