#!/usr/bin/env python3
"""Activations: moejit (`moejit bench`) beside torch's version of each gated activation --
torch.compile with static shapes (the anchor), torch.compile with a dynamic token dimension,
eager -- in one process, timed alike (common.py), bf16 `[T, 2d] -> [T, d]` rotated past L2,
against the SM copy measured in the same run. Then the masked layout `[E, T_max, 2d]` (8 and 256
experts; half full, the counts also kept in L2, and a few rows an expert as in decode) beside
dense at the same real rows (moejit only).

  python3 bench/bench_activation.py [--moejit .carry/moejit] [--json activation.json]
"""
import argparse
import os
import sys

import common

SPEC = os.path.join(common.SPECS, "activation.json")
DENSE = ["silu_2048", "silu_3072", "silu_7168", "situ_2048", "situ_3072", "situ_7168", "gelu_2048", "gelu_tanh_2048",
         "swiglu_oai_2880"]
TOKENS = [1, 16, 128, 1024, 8192, 32768]
# Masked: (ops, T_max list, --inputs). Half full, 8 experts: 256 ... 32768 real rows; 256 experts
# (DeepSeek-V3's layout): 2048 ... 32768; `few` is decode with a large T_max (0-12 rows an expert).
MASKED = [(["situ_3072_masked", "silu_2048_masked"], [64, 256, 2048, 8192], "half-full"),
          (["silu_2048_masked_e256"], [16, 64, 256], "half-full"),
          (["situ_3072_masked", "silu_2048_masked"], [2048, 8192], "few"),
          (["silu_2048_masked_e256"], [256], "few")]
FEW = [3, 0, 7, 1, 12, 5, 0, 2]  # expert e holds FEW[e % 8] rows under --inputs few (reference/activation.cpp)
HEADERS = ["op", "T", "moejit us", "% SM copy", "% HBM peak", "compile us", "x compile", "compile (dynamic T) us", "eager us"]
MASKED_HEADERS = ["op", "experts", "inputs", "T_max", "real rows", "masked us", "counts in L2 us", "dense us", "vs dense"]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    common.add_common_args(p)
    p.add_argument("--tokens", type=common.token_list, default=TOKENS, help="dense T, comma-separated (default: %(default)s)")
    p.add_argument("--ops", default=",".join(DENSE), help="dense ops of specs/activation.json (default: all nine)")
    p.add_argument("--no-masked", action="store_true", help="skip the masked layout")
    return p.parse_args(argv)


def make_activation(op):
    """torch's version of a gated activation, from the op's canonical spec (moejit's `op_spec`)."""
    import torch
    import torch.nn.functional as F
    kind, interleaved = op["kind"], op.get("interleaved", False)
    beta, linear_beta = op.get("beta", 1.0), op.get("linear_beta", 0.0)
    alpha, limit = op.get("alpha", 1.702), op.get("limit", 7.0)

    def act(x):
        if interleaved:
            g, u = x[..., 0::2], x[..., 1::2]
        else:
            d = x.shape[-1] // 2
            g, u = x[..., :d], x[..., d:]
        if kind == "silu":
            return F.silu(g) * u
        if kind == "gelu":
            return F.gelu(g) * u
        if kind == "gelu_tanh":
            return F.gelu(g, approximate="tanh") * u
        if kind == "swiglu_oai":
            g, u = g.clamp(max=limit), u.clamp(min=-limit, max=limit)
            return (u + 1) * (g * torch.sigmoid(alpha * g))
        g, u = g.float(), u.float()  # situ
        v = linear_beta * torch.tanh(u / linear_beta) if linear_beta > 0 else u
        return (beta * torch.tanh(g / beta) * torch.sigmoid(g) * v).to(x.dtype)
    return act


def time_torch(op, tokens, calls, replays):
    """us per call of torch's activation at each T: {T: {"compile", "dynamic", "eager"}}."""
    import torch
    act = make_activation(op)
    static, dynamic = common.compile_static(act), common.compile_dynamic(act)
    d = op["d"]
    times = {}
    for t in tokens:
        n = common.set_count(t * 2 * d * 2 + t * d * 2, calls)
        sets = [(torch.empty(t, 2 * d, device="cuda", dtype=torch.bfloat16).uniform_(-4, 4),) for _ in range(n)]
        label = f"torch {op['_name']} T={t}"
        times[t] = {"compile": common.try_time_us(label + " compile", static, sets, calls, replays),
                    "eager": common.try_time_us(label + " eager", act, sets, calls, replays)}
        for (x,) in sets:
            common.mark_tokens_dynamic(x)
        times[t]["dynamic"] = common.try_time_us(label + " compile (dynamic T)", dynamic, sets, calls, replays)
        del sets
        torch.cuda.empty_cache()
        print(f"  {label}: compile {common.fmt_num(times[t]['compile'])} us, dynamic T {common.fmt_num(times[t]['dynamic'])}, "
              f"eager {common.fmt_num(times[t]['eager'])}", flush=True)
    return times


def dense_rows(mj, ops, torch_times, y):
    rows = []
    for r in mj["results"]:
        if r["op"] not in ops:
            continue
        t, us = r["tokens"], r["us_per_call"]
        tt = torch_times.get(r["op"], {}).get(t, {})
        rows.append({"op": r["op"], "tokens": t, "moejit_us": us, "bytes": r["bytes"],
                     "copy_fraction": common.fraction(r["bytes"], us, y["torch_copy_GBps"]),
                     "peak_fraction": common.fraction(r["bytes"], us, y["hbm_peak_GBps"]),
                     "compile_us": tt.get("compile"), "x_compile": tt["compile"] / us if tt.get("compile") else None,
                     "dynamic_us": tt.get("dynamic"), "eager_us": tt.get("eager"),
                     "compile_copy_fraction": common.fraction(r["bytes"], tt.get("compile"), y["torch_copy_GBps"])})
    return rows


def dense_table(rows):
    cells = [[r["op"], r["tokens"], common.fmt_num(r["moejit_us"]), common.fmt_pct(r["copy_fraction"]),
              common.fmt_pct(r["peak_fraction"]), common.fmt_num(r["compile_us"]), common.fmt_ratio(r["x_compile"]),
              common.fmt_num(r["dynamic_us"]), common.fmt_num(r["eager_us"])] for r in rows]
    return common.markdown_table(HEADERS, cells)


def real_rows(experts, t_max, inputs):
    """Rows the masked op really holds under moejit bench's --inputs (reference/activation.cpp)."""
    inputs = inputs.removesuffix("+hint")
    if inputs == "few":
        return sum(min(FEW[e % 8], t_max) for e in range(experts))
    if inputs == "one-full":
        return t_max
    if inputs == "full":
        return experts * t_max
    return experts * (t_max // 2)


def masked_plan(dense_tokens):
    """The masked runs, and the dense T each needs (its real rows) that the dense table lacks."""
    extra = set()
    for ops, t_maxes, inputs in MASKED:
        experts = 256 if ops[0].endswith("e256") else 8
        extra |= {real_rows(experts, t, inputs) for t in t_maxes}
    return sorted(extra - set(dense_tokens))


def masked_rows(results):
    """Masked beside dense at the same real rows; `results` maps (op, T, hot, inputs) -> result."""
    dense = {(op, t): r["us_per_call"] for (op, t, hot, _), r in results.items() if "masked" not in op}
    rows = []
    for (op, t, hot, inputs), r in results.items():
        if "masked" not in op or (hot and not inputs.endswith("+hint")):
            continue
        experts = r.get("op_spec", {}).get("num_experts", 256 if op.endswith("e256") else 8)
        rows_real = real_rows(experts, t, inputs)
        cold = r["us_per_call"]
        in_l2 = results.get((op, t, True, inputs)) if not inputs.endswith("+hint") else r
        d = dense.get((op.split("_masked")[0], rows_real))
        rows.append({"op": op, "experts": experts, "inputs": inputs, "t_max": t, "real_rows": rows_real,
                     "masked_us": cold, "masked_hot_us": in_l2["us_per_call"] if in_l2 else None, "dense_us": d,
                     "vs_dense": cold / d - 1 if d else None})
    return rows


def masked_table(rows):
    cells = [[r["op"], r["experts"], r["inputs"], r["t_max"], r["real_rows"], common.fmt_num(r["masked_us"]),
              common.fmt_num(r["masked_hot_us"]), common.fmt_num(r["dense_us"]),
              "-" if r["vs_dense"] is None else f"{100 * r['vs_dense']:+.1f}%"] for r in rows]
    return common.markdown_table(MASKED_HEADERS, cells)


def summary(rows, masked, y):
    lines = [common.copy_line(y)]
    for op in dict.fromkeys(r["op"] for r in rows):
        mine = [r for r in rows if r["op"] == op]
        small = max((r["moejit_us"] for r in mine if r["tokens"] <= 16), default=None)
        big = max(mine, key=lambda r: r["tokens"])
        slower = [r["tokens"] for r in mine if r["x_compile"] is not None and r["x_compile"] < 1]
        lines.append(f"{op}: T<=16 at most {common.fmt_num(small)} us; T={big['tokens']} {common.fmt_pct(big['copy_fraction'])} "
                     f"of SM copy, {common.fmt_ratio(big['x_compile'])} compile"
                     + (f"; behind static compile at T={','.join(map(str, slower))}" if slower else ""))
    for inputs in ("half-full", "half-full+hint"):
        worst = [m for m in masked if m["vs_dense"] is not None and m["inputs"] == inputs and m["real_rows"] >= 1024]
        if worst:
            w = max(worst, key=lambda m: m["vs_dense"])
            lines.append(f"masked, {inputs}, >= 1024 real rows: at worst {100 * w['vs_dense']:+.1f}% against dense "
                         f"({w['op']}, {w['real_rows']} real rows)")
    return lines


def main(argv=None):
    a = parse_args(argv)
    print(common.stamp_line(common.run_stamp()), flush=True)
    ops = [o for o in a.ops.split(",") if o]
    bench = ["--calls", str(a.calls), "--replays", str(a.replays)]
    runs = [common.run_moejit_bench(a.moejit, SPEC, ops, a.tokens, bench)]
    if not a.no_masked:
        extra = masked_plan(a.tokens)
        runs.append(common.run_moejit_bench(a.moejit, SPEC, ["situ_3072", "silu_2048"], extra, bench))
        for masked_ops, t_maxes, inputs in MASKED:
            runs.append(common.run_moejit_bench(a.moejit, SPEC, masked_ops, t_maxes, bench + ["--inputs", inputs]))
            if inputs == "half-full":  # the counts kept in L2, as in a layer: the dispatch has just written them
                runs.append(common.run_moejit_bench(a.moejit, SPEC, masked_ops, t_maxes,
                                                    bench + ["--inputs", inputs, "--hot", "expert_num_tokens"]))
                # With the caller's hint of the rows an expert holds (LaunchHints::expected_rows).
                hinted = common.run_moejit_bench(a.moejit, SPEC, masked_ops, t_maxes,
                                                 bench + ["--inputs", inputs, "--hot", "expert_num_tokens", "--expected-rows"])
                for r in hinted["results"]:
                    r["inputs"] = r.get("inputs", inputs) + "+hint"
                runs.append(hinted)
    y = common.yardsticks(common.sm_copy_GBps(a.calls, a.replays), runs, common.graph_memcpy_GBps(a.calls, a.replays))
    torch_times = {}
    if not a.no_torch:
        specs = {r["op"]: dict(r.get("op_spec", {}), _name=r["op"]) for r in runs[0]["results"]}
        for op in ops:
            torch_times[op] = time_torch(specs[op], a.tokens, a.calls, a.replays)
    rows = dense_rows(runs[0], ops, torch_times, y)
    masked = [] if a.no_masked else masked_rows(common.by_op_tokens(*runs))
    print()
    print(common.yardstick_table(y))
    print(f"\nActivations, bf16 [T, 2d] -> [T, d], us per call (torch {common.torch_version()}; % SM copy = bytes / time "
          f"over torch's SM copy, above 100% where inputs fit in L2; x compile = static compile / moejit)\n")
    print(dense_table(rows))
    if masked:
        print("\nMasked [E, T_max, 2d] beside dense at the same real rows, us per call (+ = masked slower)\n")
        print(masked_table(masked))
    lines = summary(rows, masked, y)
    print("\n" + "\n".join(lines))
    common.write_json(a.json, {"driver": "bench_activation.py", "torch": common.torch_version(), "yardsticks": y,
                               "rows": rows, "masked": masked, "summary": lines, "moejit": runs})
    return 0


if __name__ == "__main__":
    sys.exit(main())
