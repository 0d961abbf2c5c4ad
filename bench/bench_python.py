#!/usr/bin/env python3
"""Python's cost per op call, eagerly: host time of `op(*tensors)` (checks, stream, launch) against
the C++ launch alone (Op::launch in a C++ loop), on torch tensors, with torch's current stream.
The issue's budget: at most 3 us on top of the C++ launch (inside a CUDA graph there is no Python).

    PYTHONPATH=.carry/python python3 bench/bench_python.py [--calls 100] [--batches 50] [--json python.json]

Each figure is the median over batches of `calls` back-to-back calls (host time; the GPU is
synchronized before each loop, so the launch queue never fills and blocks a call). Two measures of
the overhead:

* Python (recorded), the verdict's figure: the same call on the same CUDA tensors through a
  recording op (`moejit._moejit._RecordingOp`: Op::launch's checks, then a record in place of the
  launch; the torch fast path takes it as it takes the real op) minus that op's C++ loop. No GPU
  work, so it is Python's own cost, exactly.
* overhead: op(...) minus the C++ launch on the GPU, paired -- each batch times both loops back to
  back, alternating which goes first, and the figure is the median of the per-batch differences --
  a cross-check that moves with the shared machine's host (separate batches once read 13.8 us for
  the tail, then 4.7).
"""
import argparse
import pathlib
import statistics
import sys
import time

import common

ROOT = pathlib.Path(__file__).resolve().parents[1]
CASES = [  # spec, op, T
    (ROOT / "specs" / "kimi-k3.json", "router", 1),
    (ROOT / "specs" / "kimi-k3.json", "experts_act", 1),
    (ROOT / "specs" / "kimi-k3.json", "experts_act_masked", 1),
    (ROOT / "tests" / "python" / "specs" / "small.json", "experts", 8),
    (ROOT / "tests" / "python" / "specs" / "small.json", "tail", 8),
]
BUDGET_US = 3.0


def per_call_us(torch, fn, calls, batches):
    times = []
    for _ in range(batches):
        torch.cuda.synchronize()
        start = time.perf_counter_ns()
        fn(calls)
        times.append((time.perf_counter_ns() - start) / calls / 1000)
    torch.cuda.synchronize()
    return statistics.median(times)


def paired_us(torch, base, fn, calls, batches):
    """(median of base, median of fn, median of the per-batch fn - base), us per call: each batch
    times both loops back to back, base first in even batches and fn first in odd ones, the GPU
    synchronized before each loop."""
    a, b, diff = [], [], []
    for i in range(batches):
        t = {}
        for which in ((base, fn) if i % 2 == 0 else (fn, base)):
            torch.cuda.synchronize()
            start = time.perf_counter_ns()
            which(calls)
            t[which] = (time.perf_counter_ns() - start) / calls / 1000
        a.append(t[base])
        b.append(t[fn])
        diff.append(t[fn] - t[base])
    torch.cuda.synchronize()
    return statistics.median(a), statistics.median(b), statistics.median(diff)


def recording_twin(moejit, ctx, op_spec):
    """moejit.Op over a recording op of the same spec, on the same device: what op(...) runs, but
    for the launch."""
    return moejit.Op(moejit._moejit._RecordingOp(op_spec), ctx, op_spec)


def measure(torch, moejit, ctx, spec_path, name, tokens, calls, batches):
    from gpu_inputs import make_arrays, to_torch
    spec = moejit.load_spec(spec_path)
    op = ctx.load(spec.op(name))
    rec = recording_twin(moejit, ctx, spec.op(name))
    decls = {d.name: d for d in op.tensors()}
    named = {n: to_torch(torch, a, decls[n]) for n, a in make_arrays(op, tokens).items()}
    args = [named.get(d.name) for d in op.tensors()]  # None: an optional input left unbound
    stream = torch.cuda.current_stream().cuda_stream
    buffers = [(t.data_ptr(), t.nbytes) if t is not None else (0, 0) for t in args]

    def loops(o):
        def cpp(n):
            o._op._time_launches(buffers, tokens, stream, n)

        def call(n):
            for _ in range(n):
                o(*args)
        return cpp, call

    cpp, call = loops(op)
    rec_cpp, rec_call = loops(rec)

    def raw(n):
        for _ in range(n):
            op.launch(buffers, tokens, stream)

    registered = moejit.torch.register(op, f"bench_{name}")
    sig = moejit.torch._Signature(op)
    torch_args = [named.get(op.tensors()[i].name) for i in sig.arguments]

    def torch_op(n):
        for _ in range(n):
            registered(*torch_args)

    for fn in (cpp, raw, call, torch_op, rec_cpp, rec_call):  # warm (the first call of each op makes its fast path)
        fn(10)
    for o in (op, rec):  # both calls must take the C++ fast path, or the figures compare two different paths
        if o._fast is None or not o._fast(tuple(args), 0):
            raise SystemExit(f"{name}: the torch fast path refuses the call of {o._op!r}")
    row = {"op": f"{spec.model}/{name}", "T": tokens, "tensors": sum(t is not None for t in args)}
    row["cpp"], row["call"], row["overhead"] = paired_us(torch, cpp, call, calls, batches)
    row["rec_cpp"], row["rec_call"], row["python"] = paired_us(torch, rec_cpp, rec_call, calls, batches)
    for label, fn in (("raw", raw), ("torch_op", torch_op)):
        row[label] = per_call_us(torch, fn, calls, batches)
    row["recorded_launches"] = rec._op.last["count"]
    return row


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", type=int, default=100, help="calls a batch (default: %(default)s)")
    p.add_argument("--batches", type=int, default=50, help="batches, median taken (default: %(default)s)")
    p.add_argument("--json", metavar="FILE", help="write every figure here")
    return p.parse_args(argv)


def main(argv=None):
    a = parse_args(argv)
    print(common.stamp_line(common.run_stamp()), flush=True)
    import torch
    import moejit
    import moejit.torch
    sys.path.insert(0, str(ROOT / "tests" / "python"))
    ctx = moejit.Context()
    print(f"{ctx.device.name}, torch {torch.__version__}, Python {sys.version.split()[0]}; us per call, host time, "
          f"median of {a.batches} x {a.calls} calls; overhead: paired batches; Python: a recording op, no launch")
    print(f"{'op':<34} {'T':>4} {'n':>3} {'C++ launch':>10} {'launch()':>9} {'op(...)':>8} {'torch.ops':>9} "
          f"{'overhead':>8} {'Python':>7}")
    rows = []
    for spec_path, name, tokens in CASES:
        r = measure(torch, moejit, ctx, spec_path, name, tokens, a.calls, a.batches)
        rows.append(r)
        print(f"{r['op']:<34} {r['T']:>4} {r['tensors']:>3} {r['cpp']:>10.2f} {r['raw']:>9.2f} {r['call']:>8.2f} "
              f"{r['torch_op']:>9.2f} {r['overhead']:>8.2f} {r['python']:>7.2f}", flush=True)
    worst = max(r["python"] for r in rows)
    worst_launch = max(r["overhead"] for r in rows)
    verdict = "within" if worst <= BUDGET_US else "OVER"
    lines = [f"Python's cost of op(...), judged on the recording op (the same call, no launch): at most {worst:.2f} us "
             f"({verdict} the {BUDGET_US} us budget); op(...) over the C++ launch on the GPU, paired: at most "
             f"{worst_launch:.2f} us (the cross-check). torch.ops adds the dispatcher and allocates the outputs. "
             "Inside a CUDA graph: none (no Python runs)."]
    print(lines[0])
    common.write_json(a.json, {"driver": "bench_python.py", "torch": torch.__version__, "device": ctx.device.name,
                               "python": sys.version.split()[0], "calls": a.calls, "batches": a.batches, "budget_us": BUDGET_US,
                               "rows": rows, "summary": lines})
    return 0 if worst <= BUDGET_US else 1


if __name__ == "__main__":
    sys.exit(main())
