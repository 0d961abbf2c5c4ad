#!/usr/bin/env python3
"""Experts: moejit's experts op (`moejit bench`) at decode (T = 1, 8, 32, 64) and prefill, with
uniform and skewed routing (every token's first slot on one expert), against its floor -- the
bytes of the experts a batch touches (moejit's `bytes`: the experts the batch's ids really hit,
plus x, ids, weights, y) over the streaming-read bandwidth of the same run -- and beside torch on
the same shapes, timed alike (common.py): `torch._grouped_mm` (sort, gather, two grouped GEMMs,
the activation, the router weight, a scatter-add; captured in a graph), the same function through
torch.compile with static shapes (the anchor), and, eagerly, the per-expert loop a user writes
(host syncs included: it cannot be captured). With moejit's Python package importable, each
kernel of the op too (CUPTI through torch.profiler, eager calls, uniform routing).

  PYTHONPATH=.carry/python python3 bench/bench_experts.py [--moejit .carry/moejit] [--json experts.json]
"""
import argparse
import json
import os
import sys

import common

SPEC = os.path.join(common.SPECS, "experts.json")
DECODE = [1, 8, 32, 64]
PREFILL = [512, 4096]
HEADERS = ["op", "inputs", "T", "moejit us", "% floor", "TFLOP/s", "compile us", "x compile", "grouped_mm us", "x grouped_mm",
           "loop us (eager)"]
KERNEL_HEADERS = ["op", "T", "path", "metadata us", "GEMM1 us", "GEMM2 us", "combine us"]
# The op's stages, by kernel name (common.kernel_name): what each launch of a call does.
STAGES = (("metadata", ("experts_meta_kernel", "experts_count_kernel", "experts_scan_kernel", "experts_rank_kernel",
                        "experts_gather_kernel")),
          ("GEMM1", ("experts_gemm1_kernel", "experts_prefill_kernel<1>")),
          ("GEMM2", ("experts_gemm2_kernel", "experts_gemm2_one_kernel", "experts_prefill_kernel<2>")),
          ("combine", ("experts_combine_kernel",)))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    common.add_common_args(p)
    p.add_argument("--spec", default=SPEC, help="experts benchmark spec (default: %(default)s)")
    p.add_argument("--tokens", type=common.token_list, default=DECODE + PREFILL, help="T, comma-separated (default: %(default)s)")
    p.add_argument("--ops", default="", help="ops of the spec (default: its standard-layout experts ops)")
    p.add_argument("--no-kernels", action="store_true", help="skip the per-kernel times (moejit's Python package)")
    return p.parse_args(argv)


def standard_ops(spec_path):
    with open(spec_path) as f:
        spec = json.load(f)
    return [o["name"] for o in spec["ops"] if o.get("op") == "experts" and o.get("layout", "standard") == "standard"]


def make_torch(op):
    """torch's experts for the op's canonical spec: (grouped_mm version, per-expert loop)."""
    import torch
    import torch.nn.functional as F
    act_spec = op["activation"]
    kind = act_spec["kind"]
    E, I = op["num_experts"], op["intermediate"]
    weight_on_input = op.get("apply_router_weight_on_input", False)

    def act(gu):
        if act_spec.get("interleaved", False):
            g, u = gu[..., 0::2], gu[..., 1::2]
        else:
            g, u = gu[..., :I], gu[..., I:]
        if kind == "silu":
            return F.silu(g) * u
        if kind == "gelu":
            return F.gelu(g) * u
        if kind == "gelu_tanh":
            return F.gelu(g, approximate="tanh") * u
        if kind == "swiglu_oai":
            limit, alpha = act_spec.get("limit", 7.0), act_spec.get("alpha", 1.702)
            g, u = g.clamp(max=limit), u.clamp(min=-limit, max=limit)
            return (u + 1) * (g * torch.sigmoid(alpha * g))
        beta, lb = act_spec.get("beta", 1.0), act_spec.get("linear_beta", 0.0)
        gf, uf = g.float(), u.float()
        v = lb * torch.tanh(uf / lb) if lb > 0 else uf
        return (beta * torch.tanh(gf / beta) * torch.sigmoid(gf) * v).to(gu.dtype)

    def grouped(x, ids, w, w13, w2):
        T, K = ids.shape
        flat = ids.reshape(-1)
        order = torch.argsort(flat, stable=True)
        token = order // K
        counts = torch.zeros(E, dtype=torch.int32, device=x.device).scatter_add_(0, flat, torch.ones_like(flat, dtype=torch.int32))
        offs = torch.cumsum(counts, 0, dtype=torch.int32)
        xs = x[token]
        if weight_on_input:
            xs = (xs * w.reshape(-1)[order, None]).to(x.dtype)
        h = act(torch._grouped_mm(xs, w13.transpose(1, 2), offs=offs))
        o = torch._grouped_mm(h, w2.transpose(1, 2), offs=offs)
        if not weight_on_input:
            o = o * w.reshape(-1)[order, None]
        return torch.zeros(x.shape, dtype=torch.float32, device=x.device).index_add_(0, token, o.float()).to(x.dtype)

    def loop(x, ids, w, w13, w2):
        y = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
        for e in ids.unique().tolist():
            tok, slot = (ids == e).nonzero(as_tuple=True)
            xs = x[tok]
            if weight_on_input:
                xs = (xs * w[tok, slot, None]).to(x.dtype)
            o = act(xs @ w13[e].T) @ w2[e].T
            if not weight_on_input:
                o = o * w[tok, slot, None]
            y.index_add_(0, tok, o.float())
        return y.to(x.dtype)
    return grouped, loop


def inputs_for(op, tokens, skewed, seed):
    import torch
    g = torch.Generator(device="cuda").manual_seed(seed)
    E, K, H = op["num_experts"], op["topk"], op["hidden"]
    x = torch.randn(tokens, H, device="cuda", dtype=torch.bfloat16, generator=g)
    ids = torch.rand(tokens, E, device="cuda", generator=g).argsort(dim=1)[:, :K]
    if skewed:  # slot 0 of every token on expert 0, the others distinct from it
        ids[:, 1:] = torch.where(ids[:, 1:] == 0, ids[:, :1], ids[:, 1:])
        ids[:, 0] = 0
    w = torch.rand(tokens, K, device="cuda", generator=g)
    return x, ids.contiguous(), w


def touched_bytes(op, tokens):
    """The weight bytes a call of `tokens` uniformly routed tokens reads: E (1 - (1 - K/E)^T) experts."""
    E, K, H, I = op["num_experts"], op["topk"], op["hidden"], op["intermediate"]
    return E * (1 - (1 - K / E) ** tokens) * 3 * H * I * 2


def stage_times(kernels):
    """{stage: us} of common.kernel_times' {kernel: us}, and the path ("one token", "decode" or
    "prefill") its kernels say the call took."""
    out = {}
    for stage, names in STAGES:
        picked = [us for k, us in kernels.items() if any(k == n or k.startswith(n + "<") for n in names)]
        out[stage] = sum(picked) if picked else None
    if any(k.startswith("experts_prefill_kernel") for k in kernels):
        path = "prefill"
    elif "experts_gemm2_one_kernel" in kernels:
        path = "one token"
    else:
        path = "decode"
    return out, path


def time_kernels(spec_path, op, tokens):
    """{T: common.kernel_times of moejit's op} (uniform routing), through moejit's Python package;
    {} with one line saying why where it does not import."""
    import torch
    try:
        import moejit
    except ImportError as e:
        print(f"  per-kernel times skipped: {e} (PYTHONPATH=.carry/python)", flush=True)
        return {}
    E, H, I = op["num_experts"], op["hidden"], op["intermediate"]
    w13 = torch.empty(E, 2 * I, H, device="cuda", dtype=torch.bfloat16).uniform_(-0.02, 0.02)
    w2 = torch.empty(E, H, I, device="cuda", dtype=torch.bfloat16).uniform_(-0.02, 0.02)
    fn = moejit.Context().load(moejit.load_spec(spec_path).op(op["_name"]))
    out = {}
    for t in tokens:
        x, ids, w = inputs_for(op, t, False, seed=t)
        ids = ids.to(torch.int64 if op.get("ids_dtype") == "int64" else torch.int32)
        y = torch.empty(t, H, device="cuda", dtype=torch.bfloat16)
        try:
            out[t] = common.kernel_times(lambda: fn(x=x, topk_ids=ids, topk_weights=w, w13=w13, w2=w2, y=y), "experts_")
        except Exception as e:  # noqa: BLE001 -- one failing call must not cost the rest of a one-shot GPU run
            print(f"  {op['_name']} T={t} kernels failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}", flush=True)
            continue
        print(f"  {op['_name']} T={t} kernels: " + ", ".join(f"{k} {us:.1f} us" for k, us in sorted(out[t].items())), flush=True)
    del w13, w2
    torch.cuda.empty_cache()
    return out


def time_torch(op, tokens, calls, replays):
    """{(T, inputs): {"grouped", "compile", "loop"}} for one op (its weights allocated once)."""
    import torch
    E, H, I = op["num_experts"], op["hidden"], op["intermediate"]
    w13 = torch.empty(E, 2 * I, H, device="cuda", dtype=torch.bfloat16).uniform_(-0.02, 0.02)
    w2 = torch.empty(E, H, I, device="cuda", dtype=torch.bfloat16).uniform_(-0.02, 0.02)
    grouped, loop = make_torch(op)
    compiled = common.compile_static(grouped)
    times = {}
    for t in tokens:
        for inputs in ("uniform", "skewed"):
            # The graph's calls rotate through routings whose experts span 3x the L2, as moejit's do
            # (each call routed afresh: the same ids every call would find their experts in L2).
            sets = [inputs_for(op, t, inputs == "skewed", seed=t + 7919 * i) + (w13, w2)
                    for i in range(common.set_count(touched_bytes(op, t), calls))]
            x, ids, w = sets[0][:3]
            label = f"torch {op['_name']} T={t} {inputs}"
            entry = {"grouped": common.try_time_us(label + " grouped_mm", grouped, sets, calls, replays),
                     "compile": common.try_time_us(label + " torch.compile", compiled, sets, calls, replays)}
            try:
                entry["loop"] = common.eager_us(lambda: loop(x, ids, w, w13, w2), 3 if t <= 64 else 1, 3)
            except Exception as e:  # noqa: BLE001
                print(f"  {label} loop failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}", flush=True)
                entry["loop"] = None
            times[(t, inputs)] = entry
            print(f"  {label}: grouped_mm {common.fmt_num(entry['grouped'])} us, compile {common.fmt_num(entry['compile'])} us, "
                  f"loop {common.fmt_num(entry['loop'])} us", flush=True)
    del w13, w2
    torch.cuda.empty_cache()
    return times


def rows_of(runs, torch_times, y):
    rows = []
    for run in runs:
        for r in run["results"]:
            t, us, inputs = r["tokens"], r["us_per_call"], r.get("inputs", "uniform")
            tt = torch_times.get(r["op"], {}).get((t, inputs), {})
            flops = r.get("flops") or 0
            rows.append({"op": r["op"], "inputs": inputs, "tokens": t, "moejit_us": us, "bytes": r["bytes"],
                         "floor_fraction": common.fraction(r["bytes"], us, y["read_GBps"]),
                         "tflops": flops / (us * 1e-6) / 1e12 if flops else None,
                         "compile_us": tt.get("compile"), "x_compile": tt["compile"] / us if tt.get("compile") else None,
                         "grouped_us": tt.get("grouped"), "x_grouped": tt["grouped"] / us if tt.get("grouped") else None,
                         "loop_us": tt.get("loop")})
    return rows


def kernel_rows(kernel_times):
    """One row per (op, T) of {op: {T: {kernel: us}}}: the path and each stage's us."""
    rows = []
    for op, by_t in kernel_times.items():
        for t, kernels in by_t.items():
            stages, path = stage_times(kernels)
            rows.append({"op": op, "tokens": t, "path": path, "stages_us": stages, "kernels_us": kernels})
    return rows


def kernel_table(rows):
    return common.markdown_table(KERNEL_HEADERS, [[r["op"], r["tokens"], r["path"]] + [common.fmt_num(r["stages_us"][s]) for s, _ in STAGES]
                                                  for r in rows])


def table(rows):
    cells = [[r["op"], r["inputs"], r["tokens"], common.fmt_num(r["moejit_us"]), common.fmt_pct(r["floor_fraction"]),
              common.fmt_num(r["tflops"], 0), common.fmt_num(r["compile_us"]), common.fmt_ratio(r["x_compile"]),
              common.fmt_num(r["grouped_us"]), common.fmt_ratio(r["x_grouped"]),
              common.fmt_num(r["loop_us"])] for r in rows]
    return common.markdown_table(HEADERS, cells)


def summary(rows, y):
    lines = [common.copy_line(y) + f"; streaming read {common.fmt_num(y['read_GBps'], 0)} GB/s"]
    for op in dict.fromkeys(r["op"] for r in rows):
        decode = [r for r in rows if r["op"] == op and r["inputs"] == "uniform" and r["tokens"] <= 64 and r["floor_fraction"]]
        if decode:
            worst = min(decode, key=lambda r: r["floor_fraction"])
            lines.append(f"{op}: decode T<=64 at least {common.fmt_pct(worst['floor_fraction'])} of the floor "
                         f"(T={worst['tokens']}: {common.fmt_num(worst['moejit_us'])} us)")
    return lines


def main(argv=None):
    a = parse_args(argv)
    print(common.stamp_line(common.run_stamp()), flush=True)
    ops = [o for o in a.ops.split(",") if o] or standard_ops(a.spec)
    bench = ["--calls", str(a.calls), "--replays", str(a.replays)]
    runs = [common.run_moejit_bench(a.moejit, a.spec, ops, a.tokens, bench + ["--inputs", inputs])
            for inputs in ("uniform", "skewed")]
    y = common.yardsticks(common.sm_copy_GBps(a.calls, a.replays), runs)
    torch_times, kernels = {}, {}
    specs = {r["op"]: dict(r.get("op_spec", {}), _name=r["op"]) for r in runs[0]["results"]}
    if not a.no_torch:
        for op in ops:
            torch_times[op] = time_torch(specs[op], a.tokens, a.calls, a.replays)
    if not a.no_kernels:
        for op in ops:
            kernels[op] = time_kernels(a.spec, specs[op], a.tokens)
    rows = rows_of(runs, torch_times, y)
    krows = kernel_rows({op: k for op, k in kernels.items() if k})
    print()
    print(common.yardstick_table(y))
    print(f"\nExperts, bf16, us per call (torch {common.torch_version()}; % floor = bytes of the touched experts + "
          "activations over the streaming-read bandwidth of this run / time; x compile, x grouped_mm = torch / moejit; "
          "compile = the grouped_mm version through torch.compile, static shapes)\n")
    print(table(rows))
    if krows:
        print("\nEach kernel, uniform routing (CUPTI, mean of 3 eager calls; under programmatic dependent launch a "
              "kernel's span starts before the one it waits for ends, so the spans overlap)\n")
        print(kernel_table(krows))
    lines = summary(rows, y)
    print("\n" + "\n".join(lines))
    common.write_json(a.json, {"driver": "bench_experts.py", "torch": common.torch_version(), "yardsticks": y,
                               "rows": rows, "kernels": krows, "summary": lines, "moejit": runs})
    return 0


if __name__ == "__main__":
    sys.exit(main())
