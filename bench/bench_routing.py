#!/usr/bin/env python3
"""Routing: moejit (`moejit bench`, the kernel the launcher picks) beside torch's version of each
router -- torch.compile with static shapes (the anchor), torch.compile with a dynamic token
dimension, eager -- in one process, timed alike (common.py), fp32 logits rotated past L2. The
floor is the op's bytes (logits, bias, weights, ids) over the SM copy measured in the same run.
Then the block/warp crossover: each single-group kernel forced at T = 1 ... 1024, written as
runtime/routing_crossover.json's entries (--crossover FILE).

  python3 bench/bench_routing.py [--moejit .carry/moejit] [--json routing.json] [--crossover crossover.json]
"""
import argparse
import os
import sys

import common

SPEC = os.path.join(common.SPECS, "routing.json")
MODELS = {"deepseek_v3": "DeepSeek-V3", "kimi_k2": "Kimi-K2", "kimi_k3": "Kimi-K3", "qwen3": "Qwen3-30B-A3B",
          "glm45": "GLM-4.5"}
TOKENS = [1, 16, 128, 1024, 4096, 16384]
CROSSOVER_TOKENS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
HEADERS = ["model", "T", "moejit us", "% SM copy", "% HBM peak", "floor us", "x floor", "compile us", "x compile",
           "compile (dynamic T) us", "eager us"]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    common.add_common_args(p)
    p.add_argument("--tokens", type=common.token_list, default=TOKENS, help="comma-separated (default: %(default)s)")
    p.add_argument("--models", default=",".join(MODELS), help="comma-separated ops of specs/routing.json (default: all five)")
    p.add_argument("--crossover", metavar="FILE", help="write the block/warp crossover (runtime/routing_crossover.json's entries)")
    p.add_argument("--no-crossover", action="store_true", help="skip the crossover measurement")
    return p.parse_args(argv)


def make_router(op):
    """torch's version of a router, from the op's canonical spec (moejit's JSON `op_spec`)."""
    import torch
    e, k = op["num_experts"], op["topk"]
    groups, topk_group = op.get("n_group", 1), op.get("topk_group", 1)
    scoring, has_bias = op.get("scoring", "softmax"), op.get("bias", "none") != "none"
    renormalize, alpha = op.get("renormalize", False), op.get("routed_scaling_factor", 1.0)
    group_max = op.get("group_score") == "max"

    def route(logits, bias):
        if scoring == "sigmoid":
            scores = logits.sigmoid()
        elif scoring == "softmax":
            scores = logits.softmax(dim=-1)
        elif scoring == "sqrt_softplus":
            scores = torch.nn.functional.softplus(logits).sqrt()
        else:
            scores = logits
        keys = scores + bias if has_bias else scores
        if groups > 1 and topk_group < groups:
            t = keys.shape[0]
            per_group = keys.view(t, groups, -1)
            g = per_group.max(dim=-1)[0] if group_max else per_group.topk(2, dim=-1)[0].sum(dim=-1)
            keep = g.topk(topk_group, dim=-1, sorted=False)[1]
            mask = torch.zeros_like(g).scatter_(1, keep, 1.0)
            mask = mask.unsqueeze(-1).expand(t, groups, e // groups).reshape(t, e)
            keys = keys.masked_fill(mask == 0, float("-inf"))
        ids = keys.topk(k, dim=-1, sorted=True)[1]
        w = scores.gather(1, ids)
        if renormalize:
            w = w / (w.sum(dim=-1, keepdim=True) + 1e-20)
        return w * alpha, ids.to(torch.int32)
    return route


def time_torch(op, tokens, calls, replays):
    """us per call of torch's router at each T: {T: {"compile", "dynamic", "eager"}}."""
    import torch
    route = make_router(op)
    static, dynamic = common.compile_static(route), common.compile_dynamic(route)
    e = op["num_experts"]
    # The distributions `moejit bench` draws from (reference/routing.cpp): logits N(0, 2), bias N(0, 0.5).
    bias = torch.randn(e, device="cuda") * 0.5
    times = {}
    for t in tokens:
        sets = [(torch.randn(t, e, device="cuda") * 2, bias) for _ in range(common.set_count(t * e * 4, calls))]
        label = f"torch {op['_name']} T={t}"
        times[t] = {"compile": common.try_time_us(label + " compile", static, sets, calls, replays),
                    "eager": common.try_time_us(label + " eager", route, sets, calls, replays)}
        for logits, _ in sets:
            common.mark_tokens_dynamic(logits)
        times[t]["dynamic"] = common.try_time_us(label + " compile (dynamic T)", dynamic, sets, calls, replays)
        del sets
        print(f"  {label}: compile {common.fmt_num(times[t]['compile'])} us, dynamic T {common.fmt_num(times[t]['dynamic'])}, "
              f"eager {common.fmt_num(times[t]['eager'])}", flush=True)
    return times


def rows_of(mj, torch_times, y):
    """One row per (model, T): moejit's result beside torch's, against the floor."""
    rows = []
    for r in mj["results"]:
        t, op = r["tokens"], r["op"]
        tt = torch_times.get(op, {}).get(t, {})
        floor = r["bytes"] / (y["torch_copy_GBps"] * 1e9) * 1e6 if y["torch_copy_GBps"] else None
        us = r["us_per_call"]
        rows.append({"model": op, "tokens": t, "moejit_us": us, "bytes": r["bytes"],
                     "copy_fraction": common.fraction(r["bytes"], us, y["torch_copy_GBps"]),
                     "peak_fraction": common.fraction(r["bytes"], us, y["hbm_peak_GBps"]),
                     "floor_us": floor, "x_floor": us / floor if floor else None,
                     "compile_us": tt.get("compile"), "x_compile": tt["compile"] / us if tt.get("compile") else None,
                     "dynamic_us": tt.get("dynamic"), "eager_us": tt.get("eager")})
    return rows


def table(rows):
    cells = [[MODELS.get(r["model"], r["model"]), r["tokens"], common.fmt_num(r["moejit_us"]), common.fmt_pct(r["copy_fraction"]),
              common.fmt_pct(r["peak_fraction"]), common.fmt_num(r["floor_us"]), common.fmt_ratio(r["x_floor"]),
              common.fmt_num(r["compile_us"]), common.fmt_ratio(r["x_compile"]), common.fmt_num(r["dynamic_us"]),
              common.fmt_num(r["eager_us"])] for r in rows]
    return common.markdown_table(HEADERS, cells)


def crossover_of(cx, models):
    """The largest T at which the block kernel is still faster, per model, and the table of both."""
    times = {(r["op"], r["tokens"]): r["us_per_call"] for r in cx["results"]}
    spec = {r["op"]: r.get("op_spec", {}) for r in cx["results"]}
    entries, cells = [], []
    for m in models:
        line, cross = [], 0
        for t in CROSSOVER_TOKENS:
            b, w = times.get((f"{m}_block", t)), times.get((f"{m}_warp", t))
            line.append("-" if b is None or w is None else f"{b:.2f}/{w:.2f}")
            if b is not None and w is not None and b < w:
                cross = t
        op = spec.get(f"{m}_block", {})
        entries.append({"num_experts": op.get("num_experts"), "topk": op.get("topk"), "grouped": op.get("n_group", 1) > 1,
                        "crossover_tokens": cross, "note": MODELS.get(m, m)})
        cells.append([MODELS.get(m, m), cross] + line)
    headers = ["model", "crossover T"] + [f"T={t}" for t in CROSSOVER_TOKENS]
    return entries, times, common.markdown_table(headers, cells)


def summary(rows, y, entries):
    lines = [common.copy_line(y)]
    for m in dict.fromkeys(r["model"] for r in rows):
        mine = [r for r in rows if r["model"] == m]
        small = max((r["moejit_us"] for r in mine if r["tokens"] <= 128), default=None)
        big = max(mine, key=lambda r: r["tokens"])
        xs = [r["x_compile"] for r in mine if r["x_compile"]]
        lines.append(f"{MODELS.get(m, m)}: T<=128 at most {common.fmt_num(small)} us; T={big['tokens']} {common.fmt_num(big['moejit_us'])} us "
                     f"= {common.fmt_ratio(big['x_floor'])} floor; x compile {common.fmt_ratio(min(xs) if xs else None)}"
                     f"..{common.fmt_ratio(max(xs) if xs else None)}")
    if entries:
        lines.append("crossover T: " + ", ".join(f"{e['note']} {e['crossover_tokens']}" for e in entries))
    return lines


def main(argv=None):
    a = parse_args(argv)
    print(common.stamp_line(common.run_stamp()), flush=True)
    models = [m for m in a.models.split(",") if m]
    bench = ["--calls", str(a.calls), "--replays", str(a.replays)]
    mj = common.run_moejit_bench(a.moejit, SPEC, models, a.tokens, bench)
    cx = None if a.no_crossover else common.run_moejit_bench(
        a.moejit, SPEC, [f"{m}_{v}" for m in models for v in ("block", "warp")], CROSSOVER_TOKENS, bench)
    y = common.yardsticks(common.sm_copy_GBps(a.calls, a.replays), [mj] + ([cx] if cx else []),
                          common.graph_memcpy_GBps(a.calls, a.replays))
    torch_times = {}
    if not a.no_torch:
        ops = {r["op"]: dict(r.get("op_spec", {}), _name=r["op"]) for r in mj["results"]}
        for m in models:
            torch_times[m] = time_torch(ops[m], a.tokens, a.calls, a.replays)
    rows = rows_of(mj, torch_times, y)
    print()
    print(common.yardstick_table(y))
    print(f"\nRouting, fp32 logits, us per call (torch {common.torch_version()}; floor = bytes / torch's SM copy; "
          f"x floor = moejit / floor; x compile = static compile / moejit)\n")
    print(table(rows))
    entries = []
    if cx:
        entries, times, text = crossover_of(cx, models)
        print("\nThe single-group kernels forced, block / warp us per call; crossover T = the largest T at which "
              "block is faster (runtime/routing_crossover.json)\n")
        print(text)
        if a.crossover:
            common.write_json(a.crossover, {"device": y["device"], "command": cx["command"], "entries": entries,
                                            "tokens": CROSSOVER_TOKENS, "times_us": {f"{o} T={t}": v for (o, t), v in times.items()}})
    lines = summary(rows, y, entries)
    print("\n" + "\n".join(lines))
    common.write_json(a.json, {"driver": "bench_routing.py", "torch": common.torch_version(), "yardsticks": y, "rows": rows,
                               "crossover": entries, "summary": lines, "moejit": [mj] + ([cx] if cx else [])})
    return 0


if __name__ == "__main__":
    sys.exit(main())
