"""What the bench_*.py drivers share: performance.md's timing, the SM-copy yardstick, `moejit bench`,
the torch.compile anchors, tables and JSON.

torch is imported inside the functions that need a GPU, so `--help` and the offline test
(test_drivers.py) run on a machine without one.

  python3 bench/common.py summary OUT_DIR    # the summary lines of every driver's JSON in OUT_DIR
"""
import contextlib
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import types

CALLS, REPLAYS = 20, 7  # performance.md: N calls per CUDA graph, median of >= 5 replays
ROTATE_L2 = 3  # rotate input sets until one graph's calls span this many L2s
HERE = os.path.dirname(os.path.abspath(__file__))
SPECS = os.path.join(HERE, "specs")


# ---- arguments -------------------------------------------------------------------------------

def add_common_args(parser):
    parser.add_argument("--moejit", default=".carry/moejit", help="the moejit CLI (default: %(default)s)")
    parser.add_argument("--json", metavar="FILE", help="write every figure here")
    parser.add_argument("--calls", type=int, default=CALLS, help="calls per CUDA graph (default: %(default)s)")
    parser.add_argument("--replays", type=int, default=REPLAYS, help="graph replays, median taken (default: %(default)s)")
    parser.add_argument("--no-torch", action="store_true", help="moejit only: skip the torch anchors (not the yardstick)")
    return parser


def token_list(text):
    return [int(t) for t in text.split(",") if t]


# ---- moejit bench ----------------------------------------------------------------------------

RESULT_KEYS = ("op", "tokens", "us_per_call", "bytes")


def run_moejit_bench(moejit, spec, ops, tokens, extra=()):
    """`moejit bench SPEC --op OPS --tokens TOKENS --json FILE [extra]`: its JSON, plus "command"
    and "text" (what it printed). Prints the command and moejit's device line."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "bench.json")
        cmd = [moejit, "bench", spec, "--op", ",".join(ops), "--tokens", ",".join(map(str, tokens)), "--json", out, *extra]
        print("$", " ".join(cmd), flush=True)
        run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if run.returncode != 0:
            sys.stdout.write(run.stdout)
            raise SystemExit(f"moejit bench failed (exit {run.returncode})")
        with open(out) as f:
            data = load_moejit_json(f.read())
    data["command"] = " ".join(cmd).replace(out, "FILE")
    data["text"] = run.stdout
    print("  " + run.stdout.splitlines()[0] if run.stdout else "", flush=True)
    return data


def load_moejit_json(text):
    """`moejit bench --json`'s document, checked for what the drivers read."""
    data = json.loads(text)
    for key in ("device", "copy_GBps", "results"):
        if key not in data:
            raise ValueError(f"moejit bench JSON has no '{key}'")
    for r in data["results"]:
        missing = [k for k in RESULT_KEYS if k not in r]
        if missing:
            raise ValueError(f"moejit bench result {r.get('op')} has no {', '.join(missing)}")
    return data


def by_op_tokens(*runs):
    """(op, tokens, hot?, inputs) -> result, over the results of several `moejit bench` runs."""
    table = {}
    for run in runs:
        for r in run["results"]:
            table[(r["op"], r["tokens"], bool(r.get("hot")), r.get("inputs", ""))] = r
    return table


# ---- timing (performance.md) ----------------------------------------------------------------

def l2_bytes():
    import torch
    return getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 60 << 20) or (60 << 20)


def set_count(bytes_per_set, calls=CALLS):
    """How many input sets one graph rotates through so that its calls span ROTATE_L2 L2s (1 to calls);
    `bytes_per_set` may be fractional (an expected count of bytes)."""
    return int(max(1, min(calls, math.ceil(ROTATE_L2 * l2_bytes() / max(1, bytes_per_set)))))


def capture(fn, sets, calls=CALLS, keep=True):
    """`calls` calls of fn, rotating through `sets` (tuples of arguments), captured in one CUDA
    graph and replayed once; warmed up first on a side stream, so torch.compile compiles outside
    the capture. With `keep`, every call's outputs live as long as the graph (no call writes into
    another's L2-hot buffer); without, they are freed as captured and the graph's pool reuses them
    (an op whose outputs would not fit 20 times). Returns (graph, outputs)."""
    import torch
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for i in range(3):
            fn(*sets[i % len(sets)])
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    outputs = []
    with torch.cuda.graph(graph):
        for i in range(calls):
            out = fn(*sets[i % len(sets)])
            if keep:
                outputs.append(out)
            del out
    graph.replay()
    torch.cuda.synchronize()
    return graph, outputs


def replay_us(graph):
    """Microseconds of one replay of `graph`."""
    import torch
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    graph.replay()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) * 1000


def time_us(fn, sets, calls=CALLS, replays=REPLAYS, clock=None):
    """`calls` calls of fn, rotating through `sets` (tuples of arguments), captured in one CUDA
    graph; median microseconds per call over `replays` replays, which `clock` (a Clock) samples,
    opened around the replays alone (not the capture, when the GPU idles at its boost clock)."""
    graph, keep = capture(fn, sets, calls)
    with clock or contextlib.nullcontext():
        times = [replay_us(graph) / calls for _ in range(replays)]
    del graph, keep
    return statistics.median(times)


def graph_kernel_times(fn, match, calls=CALLS, window_us=200_000, least=REPLAYS, clock=None):
    """{kernel: mean device us a call} (CUPTI through torch.profiler) of the kernels whose names
    contain `match`, over replays of one CUDA graph of `calls` calls of fn: performance.md's timing
    kernel by kernel, each kernel at the clock the calls sustain back to back (eager calls leave
    gaps in which a power-capped GPU regains its clock). As many replays as fill `window_us` (at
    least `least`), which `clock` (a Clock) samples, opened around the replays alone. Outputs are
    not kept (capture's keep=False). {} where CUPTI reports no kernel of the graph."""
    import torch
    graph, _ = capture(fn, [()], calls, keep=False)
    replays = max(least, min(200, int(window_us / max(replay_us(graph), 1.0))))
    with _cuda_profile() as prof:
        with clock or contextlib.nullcontext():
            for _ in range(replays):
                graph.replay()
            torch.cuda.synchronize()
    del graph
    return _kernel_totals(prof, match, calls * replays)


def attempt(label, timing):
    """timing(), or None (and one line saying why) when it fails: one anchor that does not compile
    must not cost the rest of a one-shot GPU run."""
    try:
        return timing()
    except Exception as e:  # noqa: BLE001 -- torch.compile raises many kinds
        first = (str(e).strip().splitlines() or [""])[0][:200]
        print(f"  {label} failed: {type(e).__name__}: {first}", flush=True)
        return None


def try_time_us(label, fn, sets, calls=CALLS, replays=REPLAYS):
    """time_us, or None when fn fails (attempt)."""
    return attempt(label, lambda: time_us(fn, sets, calls, replays))


def kernel_times(fn, match, calls=3, clock=None):
    """{kernel: mean device us over `calls` eager calls of fn} (CUPTI through torch.profiler) of the
    kernels whose names contain `match`, named by kernel_name; `clock` (a Clock) opened around the
    calls alone."""
    import torch
    fn()
    torch.cuda.synchronize()
    with _cuda_profile() as prof:
        with clock or contextlib.nullcontext():
            for _ in range(calls):
                fn()
            torch.cuda.synchronize()
    return _kernel_totals(prof, match, calls)


def _cuda_profile():
    """torch.profiler over CUDA activity (CUPTI)."""
    import warnings

    from torch.profiler import ProfilerActivity, profile
    # NOTE: one profile, one cycle: its "Profiler clears events at the end of each cycle" warning does not apply.
    warnings.filterwarnings("ignore", message=".*Profiler clears events")
    return profile(activities=[ProfilerActivity.CUDA])


def _kernel_totals(prof, match, calls):
    """{kernel_name: device us a call} of a profile's kernels whose names contain `match`."""
    out = {}
    for evt in prof.key_averages():
        if match not in evt.key:
            continue
        total = getattr(evt, "device_time_total", None)
        if total is None:
            total = evt.cuda_time_total
        name = kernel_name(evt.key)
        out[name] = out.get(name, 0.0) + total / calls
    return out


def kernel_name(key):
    """A profiler key "void ns::f<ns::Config, 1, true>(Args)" as "f<1, true>": the function without
    namespaces, and its template arguments after the first (the generated config)."""
    base = key.replace("void ", "").split("(")[0]
    head, _, rest = base.partition("<")
    args = [a.strip() for a in rest[:-1].split(",")][1:] if rest else []
    return head.split("::")[-1] + (f"<{', '.join(args)}>" if args else "")


def sm_copy_GBps(calls=CALLS, replays=REPLAYS):
    """The yardstick: torch's eager `dst.copy_(src)` of 1 GiB, bytes read + written per second;
    `calls` back-to-back copies between two events, median of `replays`.
    NOTE: not captured in a graph. A contiguous copy_ is a cudaMemcpyAsync, which the driver runs
    as an SM kernel when launched eagerly, but which becomes a memcpy node on the copy engine
    (~2.75 TB/s on an H200) when captured: never a ceiling (graph_memcpy_GBps shows it)."""
    import torch
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").fill_(0x3C)
    dst = torch.empty_like(src)
    us = eager_us(lambda: dst.copy_(src), calls, replays, warmup=3)
    del src, dst
    torch.cuda.empty_cache()
    return 2 * (1 << 30) / (us * 1e-6) / 1e9


def eager_us(fn, calls=CALLS, replays=REPLAYS, warmup=2):
    """Median microseconds per call of `calls` eager calls of fn() between two events, over
    `replays` (for what a graph cannot capture, or must not: see sm_copy_GBps)."""
    import torch
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1000 / calls)
    return statistics.median(times)


def matmul_TFLOPs(n=8192, calls=CALLS, replays=REPLAYS, clock=None):
    """The flops yardstick (performance.md): torch's bf16 n x n x n matmul on random data, timed as
    everything is (calls in a graph, median of replays: the clock it sustains under the power cap
    included), in TFLOP/s; `clock` as time_us's."""
    import torch
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    us = time_us(lambda x, y: x @ y, [(a, b)], calls, replays, clock)
    del a, b
    torch.cuda.empty_cache()
    return 2.0 * n ** 3 / (us * 1e-6) / 1e12


class Clock:
    """The SM clock, sampled by nvidia-smi every 50 ms while `with` runs; median MHz (None where
    unavailable). A 700 W H200 does not hold its boost clock on long bf16 GEMMs. The window
    opens once sampling has started (nvidia-smi takes ~0.1-0.5 s to start), so a short window
    still gets the samples its length allows: time 200 ms or more for a median worth reading.
    Entered again, it adds the new window's samples to the ones before (one clock over the two
    GEMMs of a side, each timed on its own)."""

    def __init__(self):
        self.kept = []

    def __enter__(self):
        self.samples = []
        self.first = 0
        try:
            self.proc = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm", "--format=csv,noheader,nounits", "-lms", "50", "-i", "0"],
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        except OSError:
            self.proc = None
            return self
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        for _ in range(100):  # up to 2 s for the first sample
            if self.samples or self.proc.poll() is not None:
                break
            time.sleep(0.02)
        self.first = len(self.samples)
        return self

    def _read(self):
        for line in self.proc.stdout:
            if line.strip().isdigit():
                self.samples.append(int(line))

    def __exit__(self, *exc):
        if self.proc:
            self.proc.terminate()
            self.proc.wait()
            self.reader.join(timeout=1)
        self.kept += self.samples[self.first:] or self.samples  # all of them, where none fell inside
        return False

    def mhz(self):
        """The median of the samples taken inside the windows."""
        return statistics.median(self.kept) if self.kept else None


def calls_for(us, window_us=200_000, least=3, most=200):
    """Eager calls of an op taking `us` that fill a window of `window_us` (so that the Clock
    beside them samples it), at least `least`, at most `most`."""
    return max(least, min(most, int(window_us / us))) if us else least


_STAMP = {}


def run_stamp():
    """When and where this run happened (performance.md: record the GPU and the date): printed
    first by every driver and kept in its JSON (write_json adds it)."""
    if not _STAMP:
        import datetime
        _STAMP["date"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
        try:
            import torch
            _STAMP["gpu"] = torch.cuda.get_device_name() if torch.cuda.is_available() else None
            _STAMP["torch"] = torch.__version__
        except ImportError:
            _STAMP.update(gpu=None, torch=None)
    return dict(_STAMP)


def stamp_line(stamp):
    return f"run of {stamp['date']} (UTC) on {stamp['gpu'] or 'no GPU'}, torch {stamp['torch']}"


def graph_memcpy_GBps(calls=CALLS, replays=REPLAYS):
    """The same copy_ captured in a CUDA graph (a memcpy node, the copy engine): shown beside the
    yardstick so nobody takes it for one."""
    import torch
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").fill_(0x3C)
    dst = torch.empty_like(src)
    us = time_us(lambda s: dst.copy_(s), [(src,)], calls, replays)
    del src, dst
    torch.cuda.empty_cache()
    return 2 * (1 << 30) / (us * 1e-6) / 1e9


def yardsticks(torch_copy, moejit_runs=(), memcpy=None):
    """The figures every table is read against. moejit's own SM copy (`copy_GBps`, one per
    `moejit bench` run) is reported beside torch's, with the ratio (done when within 5%)."""
    copies = [r["copy_GBps"] for r in moejit_runs]
    first = moejit_runs[0] if moejit_runs else {}
    y = {"torch_copy_GBps": torch_copy,
         "moejit_copy_GBps": statistics.median(copies) if copies else None,
         "moejit_copy_GBps_runs": copies,
         "read_GBps": first.get("read_GBps"),
         "hbm_peak_GBps": first.get("hbm_peak_GBps"),
         "graph_memcpy_GBps": memcpy,
         "device": first.get("device"),
         "arch": first.get("arch")}
    y["moejit_over_torch_copy"] = y["moejit_copy_GBps"] / torch_copy if copies and torch_copy else None
    return y


def yardstick_table(y):
    ratio = y["moejit_over_torch_copy"]
    runs = y["moejit_copy_GBps_runs"]
    spread = f" ({min(runs):.0f}-{max(runs):.0f} over {len(runs)} runs)" if len(runs) > 1 else ""
    rows = [["torch eager copy_ (SM), the yardstick", fmt_num(y["torch_copy_GBps"], 0)],
            ["moejit copy (SM)", fmt_num(y["moejit_copy_GBps"], 0) + spread
             + (f", {ratio:.3f}x torch: {'within' if abs(ratio - 1) <= 0.05 else 'NOT within'} 5%" if ratio else "")],
            ["moejit streaming read", fmt_num(y["read_GBps"], 0)],
            ["HBM peak (device attributes)", fmt_num(y["hbm_peak_GBps"], 0)]]
    if y.get("graph_memcpy_GBps"):
        rows.append(["graph memcpy node (copy engine; never a ceiling)", fmt_num(y["graph_memcpy_GBps"], 0)])
    title = f"Yardsticks, GB/s (read + write for copies): {y.get('device') or 'device ?'} ({y.get('arch') or '?'})"
    return title + "\n\n" + markdown_table(["yardstick", "GB/s"], rows)


def copy_line(y):
    """One summary line: moejit's SM copy against torch's."""
    ratio = y["moejit_over_torch_copy"]
    verdict = "" if ratio is None else (" within 5%" if abs(ratio - 1) <= 0.05 else " NOT within 5%")
    return (f"SM copy: torch copy_ {fmt_num(y['torch_copy_GBps'], 0)} GB/s, moejit {fmt_num(y['moejit_copy_GBps'], 0)} GB/s "
            f"({'-' if ratio is None else f'{ratio:.3f}x'}{verdict}); HBM peak {fmt_num(y['hbm_peak_GBps'], 0)} GB/s")


def fraction(bytes_moved, us, gbps):
    """Achieved bandwidth over `gbps` (GB/s), or None."""
    if not gbps or not us:
        return None
    return bytes_moved / (us * 1e-6) / (gbps * 1e9)


# ---- the torch anchors ----------------------------------------------------------------------

def fresh(fn):
    """fn with a code object of its own. NOTE: torch.compile keeps compiled graphs, and its
    recompile limit (8), per code object; each anchor and shape family gets its own, so a static
    compile never picks up a graph compiled with a dynamic token dimension, or the reverse."""
    return types.FunctionType(fn.__code__.replace(), fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)


def compile_static(fn):
    """The anchor: torch.compile with static shapes ("x compile" always means this one)."""
    import torch
    return torch.compile(fresh(fn), dynamic=False)


def compile_dynamic(fn):
    """torch.compile for a dynamic token dimension: the caller marks dim 0 of each input dynamic
    (mark_tokens_dynamic); torch specializes T = 1 on its own."""
    import torch
    return torch.compile(fresh(fn))


def mark_tokens_dynamic(tensor):
    import torch
    if tensor.shape[0] > 1:  # a dimension of size 1 is always specialized
        torch._dynamo.mark_dynamic(tensor, 0)
    return tensor


def torch_version():
    import torch
    return torch.__version__


# ---- output ---------------------------------------------------------------------------------

def fmt_num(x, digits=None):
    if x is None:
        return "-"
    if digits is None:  # microseconds: 3 decimals below 1, 2 below 100, 1 below 1000
        digits = 3 if abs(x) < 1 else 2 if abs(x) < 100 else 1 if abs(x) < 1000 else 0
    return f"{x:.{digits}f}"


def fmt_pct(x):
    return "-" if x is None else f"{100 * x:.1f}%"


def fmt_ratio(x):
    return "-" if x is None else f"{x:.2f}x"


def markdown_table(headers, rows):
    """A GitHub table, numbers right-aligned: what the drivers print and bench/README.md holds."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    numeric = [i > 0 and all(_looks_numeric(r[i]) for r in cells) for i in range(len(headers))]

    def line(row):
        return "| " + " | ".join(c.rjust(w) if n else c.ljust(w) for c, w, n in zip(row, widths, numeric)) + " |"
    rule = "|" + "|".join(("-" * (w + 1) + ":") if n else ("-" * (w + 2)) for w, n in zip(widths, numeric)) + "|"
    return "\n".join([line(headers), rule] + [line(r) for r in cells])


def _looks_numeric(text):
    t = text.rstrip("%x").replace("/", "").replace(".", "").replace("-", "").replace("+", "")
    return t.isdigit() or text in ("-", "TBD")


def write_json(path, doc):
    if not path:
        return
    doc = dict(doc)
    doc.setdefault("stamp", run_stamp())
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"wrote {path}")


def summary(out_dir):
    """The summary lines each driver stored in its JSON, in run order."""
    lines = []
    for name in ("routing", "activation", "latent_tail", "latent_tail_pdl", "experts"):
        path = os.path.join(out_dir, f"{name}.json")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            doc = json.load(f)
        lines += [f"{name}: {s}" for s in doc.get("summary", [])]
    return lines


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "summary":
        print("\n".join(summary(sys.argv[2])))
    else:
        print(__doc__.strip())
