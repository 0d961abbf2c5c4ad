#!/usr/bin/env python3
"""Experts at prefill: moejit's prefill GEMMs (sm_90a: TMA, wgmma, warp-specialized) through the
Python package on torch tensors, uniform routing, bf16:

* each kernel of the op (CUPTI through torch.profiler over replays of a CUDA graph of N calls,
  filling 200 ms so that the clock beside them is sampled: each kernel at the clock back-to-back
  calls sustain) and the whole op (N calls in a CUDA graph, median of replays, as common.py times
  everything), in TFLOP/s of the two GEMMs' flops (6 T K H I), and as a fraction of the flops
  floor: the same flops at the rate torch's bf16 8192^3 matmul reaches in the same run
  (common.matmul_TFLOPs, timed as the op is);
* torch._grouped_mm on the same two GEMMs (rows already sorted by expert), its kernels timed as
  moejit's are (CUPTI over replays of a graph of N calls of each GEMM), in the same run;
* the SM clock the GPU held during each of those (nvidia-smi sampled every 50 ms: a 700 W H200 does
  not hold its boost clock on long bf16 GEMMs);
* with --crossover T,...: the whole op on both paths (MOEJIT_EXPERTS_PATH=decode / prefill) at
  those T, and the fewest rows an expert from which the prefill path is faster -- the value
  runtime/experts_crossover.json keeps (in the table of the GPU it ran on).

  PYTHONPATH=.carry/python python3 bench/bench_experts_prefill.py [--tokens 8192,16384] [--ops deepseek_v3]
      [--crossover 64,128,256,512,1024,2048] [--json FILE]
"""
import argparse
import json
import os
import sys

import common

SPEC = os.path.join(common.SPECS, "experts.json")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--spec", default=SPEC, help="experts benchmark spec (default: %(default)s)")
    p.add_argument("--ops", default="deepseek_v3,qwen3_30b_a3b,kimi_k3_tp8", help="ops of the spec (default: %(default)s)")
    p.add_argument("--tokens", type=common.token_list, default=[8192, 16384], help="T, comma-separated (default: %(default)s)")
    p.add_argument("--crossover", type=common.token_list, default=[], help="T at which to time both paths (default: none)")
    p.add_argument("--calls", type=int, default=common.CALLS, help="calls per CUDA graph (default: %(default)s)")
    p.add_argument("--replays", type=int, default=common.REPLAYS, help="graph replays, median taken (default: %(default)s)")
    p.add_argument("--json", metavar="FILE", help="write every figure here")
    return p.parse_args(argv)


def make_inputs(torch, op, tokens, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    E, K, H = op["num_experts"], op["topk"], op["hidden"]
    x = torch.randn(tokens, H, device="cuda", dtype=torch.bfloat16, generator=g)
    ids = torch.rand(tokens, E, device="cuda", generator=g).argsort(dim=1)[:, :K].to(torch.int32).contiguous()
    w = torch.rand(tokens, K, device="cuda", generator=g)
    return x, ids, w


def kernel_times(fn, match, calls, call_us, clock, method="graph"):
    """({kernel: us a call}, method) of fn's kernels whose names contain `match`: inside a graph of
    `calls` calls (common.graph_kernel_times), or -- where CUPTI reports no kernel of a graph, or
    `method` says so -- over eager calls filling the same 200 ms window; `clock` (common.Clock)
    samples the timed calls alone."""
    if method == "graph":
        times = common.graph_kernel_times(fn, match, calls, clock=clock)
        if times:
            return times, "graph"
        print("  CUPTI saw no kernel inside the graph: kernels timed over eager calls", flush=True)
    return common.kernel_times(fn, match, common.calls_for(call_us), clock=clock), "eager"


def main(argv=None):
    a = parse_args(argv)
    import torch
    import moejit

    with open(a.spec) as f:
        ops = {o["name"]: o for o in json.load(f)["ops"]}
    spec = moejit.load_spec(a.spec)
    contexts = {}
    for path in ("prefill", "decode"):
        os.environ["MOEJIT_EXPERTS_PATH"] = path
        contexts[path] = moejit.Context()
    os.environ.pop("MOEJIT_EXPERTS_PATH")
    dev = torch.cuda.get_device_name()
    stamp = common.run_stamp()
    print(common.stamp_line(stamp) + "; experts at prefill, uniform routing, bf16", flush=True)
    mclock = common.Clock()
    matmul = common.matmul_TFLOPs(calls=a.calls, replays=a.replays, clock=mclock)
    print(f"  flops yardstick: torch bf16 8192^3 matmul {matmul:.0f} TFLOP/s at {mclock.mhz()} MHz", flush=True)
    results = []
    for name in [n for n in a.ops.split(",") if n]:
        op = dict(ops[name])
        E, H, I, K = op["num_experts"], op["hidden"], op["intermediate"], op["topk"]
        w13 = torch.empty(E, 2 * I, H, device="cuda", dtype=torch.bfloat16).uniform_(-0.02, 0.02)
        w2 = torch.empty(E, H, I, device="cuda", dtype=torch.bfloat16).uniform_(-0.02, 0.02)
        loaded = {path: ctx.load(spec.op(name)) for path, ctx in contexts.items()}
        for t in sorted(set(a.tokens) | set(a.crossover)):
            x, ids, w = make_inputs(torch, op, t, seed=t)
            y = torch.empty(t, H, device="cuda", dtype=torch.bfloat16)
            flops = 6.0 * t * K * H * I
            # the launcher's measure (runtime/experts_op.cpp rows_per_expert): pairs over the experts they can hit, rounded up
            row = {"op": name, "T": t, "rows_per_expert": -(-t * K // min(E, t * K)), "flops": flops}

            def call(path):
                return lambda: loaded[path](x=x, topk_ids=ids, topk_weights=w, w13=w13, w2=w2, y=y)

            clock = common.Clock()
            row["prefill_us"] = common.time_us(lambda: call("prefill")(), [()], a.calls, a.replays, clock)
            row["clock_mhz"] = clock.mhz()
            if t in a.tokens:
                # Each kernel inside the op's graph, replayed for 200 ms or more so that the clock is sampled
                kclock = common.Clock()
                row["kernels_us"], row["kernels_method"] = kernel_times(call("prefill"), "experts_", a.calls, row["prefill_us"], kclock)
                row["kernels_clock_mhz"] = kclock.mhz()
            if t in a.crossover:
                row["decode_us"] = common.time_us(lambda: call("decode")(), [()], a.calls, a.replays)
            if t in a.tokens:
                # torch._grouped_mm on the same GEMMs, its rows sorted by expert beforehand
                flat = ids.reshape(-1).long()
                order = torch.argsort(flat, stable=True)
                counts = torch.bincount(flat, minlength=E)
                offs = torch.cumsum(counts, 0, dtype=torch.int32)
                xs = x[order // K].contiguous()
                h = torch.empty(t * K, I, device="cuda", dtype=torch.bfloat16).uniform_(-1, 1)
                # timed as moejit's kernels are (kernel_times: the same method, each GEMM its own graph)
                k = row["kernels_us"]
                gemms = [(lambda: torch._grouped_mm(xs, w13.transpose(1, 2), offs=offs), k.get("experts_prefill_kernel<1>")),
                         (lambda: torch._grouped_mm(h, w2.transpose(1, 2), offs=offs), k.get("experts_prefill_kernel<2>"))]
                tclock = common.Clock()
                row["grouped_mm_us"] = [
                    common.attempt(f"grouped_mm GEMM{i + 1}", lambda: sum(kernel_times(fn, "", a.calls, us, tclock, row["kernels_method"])[0].values()) or None)
                    for i, (fn, us) in enumerate(gemms)]
                row["torch_clock_mhz"] = tclock.mhz()
                del xs, h
            results.append(row)
            k = row.get("kernels_us", {})
            gemm_us = sum(v for n, v in k.items() if "prefill_kernel" in n)
            if k:
                print(f"  {name} T={t} kernels: " + ", ".join(f"{n} {v:.1f} us" for n, v in sorted(k.items())), flush=True)
            print(f"  {name} T={t}: op {row['prefill_us']:.1f} us" + (f", decode path {row['decode_us']:.1f} us" if "decode_us" in row else "")
                  + (f", GEMMs {gemm_us:.1f} us ({flops / gemm_us / 1e6:.0f} TFLOP/s)" if gemm_us else "")
                  + f", clock {row['clock_mhz']} MHz", flush=True)
            del x, ids, w, y
        del w13, w2, loaded
        torch.cuda.empty_cache()

    print()
    methods = "/".join(sorted({r["kernels_method"] for r in results if "kernels_method" in r})) or "graph"
    print(f"flops floor: torch bf16 8192^3 matmul at {matmul:.0f} TFLOP/s ({mclock.mhz()} MHz); SM MHz: the op's graph / its kernels "
          f"(CUPTI, {methods}) / grouped_mm's kernels (CUPTI, {methods})")
    headers = ["op", "T", "rows/expert", "op us", "op TFLOP/s", "op % matmul", "GEMM1 us", "GEMM2 us", "GEMMs TFLOP/s",
               "GEMMs % matmul", "other kernels us", "grouped_mm GEMMs us", "GEMMs x grouped_mm", "SM MHz (op / kernels / torch)"]
    table = []
    for r in results:
        if "kernels_us" not in r:
            continue
        k = r["kernels_us"]
        g1, g2 = k.get("experts_prefill_kernel<1>"), k.get("experts_prefill_kernel<2>")
        rest = sum(v for n, v in k.items() if "prefill_kernel" not in n)
        gemms = (g1 or 0) + (g2 or 0)
        tg = r["grouped_mm_us"]
        torch_gemms = tg[0] + tg[1] if None not in tg else None
        op_tflops = r["flops"] / r["prefill_us"] / 1e6
        gemm_tflops = r["flops"] / gemms / 1e6 if gemms else None
        table.append([r["op"], str(r["T"]), f"{r['rows_per_expert']:.0f}", common.fmt_num(r["prefill_us"]),
                      common.fmt_num(op_tflops, 0), common.fmt_pct(op_tflops / matmul), common.fmt_num(g1), common.fmt_num(g2),
                      common.fmt_num(gemm_tflops, 0), common.fmt_pct(gemm_tflops / matmul if gemm_tflops else None),
                      common.fmt_num(rest), common.fmt_num(torch_gemms),
                      common.fmt_ratio(torch_gemms / gemms if torch_gemms and gemms else None),
                      f"{r['clock_mhz']} / {r.get('kernels_clock_mhz')} / {r.get('torch_clock_mhz')}"])
    print(common.markdown_table(headers, table))
    cross = [r for r in results if "decode_us" in r]
    if cross:
        print()
        print(common.markdown_table(["op", "T", "rows/expert", "decode us", "prefill us", "prefill / decode"],
                                    [[r["op"], str(r["T"]), f"{r['rows_per_expert']:.0f}", common.fmt_num(r["decode_us"]),
                                      common.fmt_num(r["prefill_us"]), common.fmt_ratio(r["prefill_us"] / r["decode_us"])] for r in cross]))
        for name in dict.fromkeys(r["op"] for r in cross):
            wins = [r["rows_per_expert"] for r in cross if r["op"] == name and r["prefill_us"] < r["decode_us"]]
            loses = [r["rows_per_expert"] for r in cross if r["op"] == name and r["prefill_us"] >= r["decode_us"]]
            first = min((x for x in wins if all(x > y for y in loses)), default=None)
            print(f"{name}: prefill faster from {first:.0f} rows an expert" if first else f"{name}: prefill never faster at these T")
    if a.json:
        common.write_json(a.json, {"device": dev, "torch": torch.__version__, "stamp": stamp, "matmul_TFLOPs": matmul,
                                   "matmul_clock_mhz": mclock.mhz(), "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
