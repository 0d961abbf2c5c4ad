#!/usr/bin/env python3
"""Python's cost per op call, eagerly: host time of `op(*tensors)` (checks, stream, launch) against
the C++ launch alone (Op::launch in a C++ loop), on torch tensors, with torch's current stream.
The issue's budget: at most 3 us on top of the C++ launch (inside a CUDA graph there is no Python).

    PYTHONPATH=build/python python3 bench/bench_python.py [--calls 100] [--batches 50]

Each figure is the median over batches of `calls` back-to-back calls (host time; the GPU is
synchronized between batches, so the launch queue never fills and blocks a call).
"""
import argparse
import pathlib
import statistics
import sys
import time

import torch

import moejit
import moejit.torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "python"))
from gpu_inputs import make_arrays, to_torch  # noqa: E402

CASES = [  # spec, op, T
    (ROOT / "specs" / "kimi-k3.json", "router", 1),
    (ROOT / "specs" / "kimi-k3.json", "experts_act", 1),
    (ROOT / "specs" / "kimi-k3.json", "experts_act_masked", 1),
    (ROOT / "tests" / "python" / "specs" / "small.json", "experts", 8),
    (ROOT / "tests" / "python" / "specs" / "small.json", "tail", 8),
]
BUDGET_US = 3.0


def per_call_us(fn, calls, batches):
    times = []
    for _ in range(batches):
        torch.cuda.synchronize()
        start = time.perf_counter_ns()
        fn(calls)
        times.append((time.perf_counter_ns() - start) / calls / 1000)
    torch.cuda.synchronize()
    return statistics.median(times)


def measure(ctx, spec_path, name, tokens, calls, batches):
    spec = moejit.load_spec(spec_path)
    op = ctx.load(spec.op(name))
    decls = {d.name: d for d in op.tensors()}
    named = {n: to_torch(torch, a, decls[n]) for n, a in make_arrays(op, tokens).items()}
    args = [named.get(d.name) for d in op.tensors()]  # None: an optional input left unbound
    stream = torch.cuda.current_stream().cuda_stream
    buffers = [(t.data_ptr(), t.nbytes) if t is not None else (0, 0) for t in args]

    def cpp(n):
        op._op._time_launches(buffers, tokens, stream, n)

    def raw(n):
        for _ in range(n):
            op.launch(buffers, tokens, stream)

    def call(n):
        for _ in range(n):
            op(*args)

    registered = moejit.torch.register(op, f"bench_{name}")
    sig = moejit.torch._Signature(op)
    torch_args = [named.get(op.tensors()[i].name) for i in sig.arguments]

    def torch_op(n):
        for _ in range(n):
            registered(*torch_args)

    for fn in (cpp, raw, call, torch_op):  # warm
        fn(10)
    row = {"op": f"{spec.model}/{name}", "T": tokens, "tensors": sum(t is not None for t in args)}
    for label, fn in (("cpp", cpp), ("raw", raw), ("call", call), ("torch_op", torch_op)):
        row[label] = per_call_us(fn, calls, batches)
    row["overhead"] = row["call"] - row["cpp"]
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=100)
    p.add_argument("--batches", type=int, default=50)
    a = p.parse_args()
    ctx = moejit.Context()
    print(f"{ctx.device.name}, torch {torch.__version__}, Python {sys.version.split()[0]}; us per call, host time, "
          f"median of {a.batches} x {a.calls} calls")
    print(f"{'op':<34} {'T':>4} {'n':>3} {'C++ launch':>10} {'launch()':>9} {'op(...)':>8} {'torch.ops':>9} "
          f"{'overhead':>8}")
    worst = 0.0
    for spec_path, name, tokens in CASES:
        r = measure(ctx, spec_path, name, tokens, a.calls, a.batches)
        worst = max(worst, r["overhead"])
        print(f"{r['op']:<34} {r['T']:>4} {r['tensors']:>3} {r['cpp']:>10.2f} {r['raw']:>9.2f} {r['call']:>8.2f} "
              f"{r['torch_op']:>9.2f} {r['overhead']:>8.2f}")
    verdict = "within" if worst <= BUDGET_US else "OVER"
    print(f"Python overhead of op(...) over the C++ launch: at most {worst:.2f} us ({verdict} the {BUDGET_US} us budget); "
          "torch.ops adds the dispatcher and allocates the outputs. Inside a CUDA graph: none (no Python runs).")
    return 0 if worst <= BUDGET_US else 1


if __name__ == "__main__":
    sys.exit(main())
