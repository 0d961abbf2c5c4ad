#!/usr/bin/env python3
"""Latent tail (Kimi-K3: H 7168, L 3584, a shared expert, bf16) on tp GPUs of this machine: moejit's
paths (`moejit_tail_bench`: fused, base, base striped; tp 1: base) beside the tail the way a user would write
it in torch (tp > 1: in-place NCCL all-reduces of the routed latent and of the shared-expert
output; then rms_norm and addmm; tp 1: rms_norm and addmm alone), in one run, timed alike (20 calls
per CUDA graph on each rank, rotating through enough copies of W_up and the inputs that the calls
read 3x the L2, median of 7 replays, max over ranks). Floor = the W_up bytes a rank reads (all of
W for the full base path, 1/tp for fused and striped) over the SM copy measured in the same run:
issue 28's floor; the inputs and the output add 2.3 MB to W's 51.4 at T = 64.

  python3 bench/bench_latent_tail.py [--tail-bench .carry/moejit_tail_bench] [--tp 1,2] [--json latent_tail.json]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

import common

H, L, EPS = 7168, 3584, 1e-5
TOKENS = [1, 4, 9, 16, 24, 32, 48, 64]  # both sides of each up-projection tile (8, 16, 32, 64 tokens)
PATHS = ["fused", "base", "base-striped"]
HEADERS = ["tp", "T", "fused us", "x floor", "base us", "x floor", "base striped us", "x floor", "torch us", "fused / base"]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tail-bench", default=".carry/moejit_tail_bench", help="moejit_tail_bench (default: %(default)s)")
    p.add_argument("--tp", type=common.token_list, default=None, help="TP sizes, comma-separated (default: each of 1, 2, 4, 8 the GPUs here hold; tp 1 is the base path alone)")
    p.add_argument("--tokens", type=common.token_list, default=TOKENS, help="comma-separated (default: %(default)s)")
    p.add_argument("--json", metavar="FILE", help="write every figure here")
    p.add_argument("--no-torch", action="store_true", help="moejit only: skip the torch anchor (not the yardstick)")
    return p.parse_args(argv)


def run_tail_bench(binary, tp, tokens):
    """moejit_tail_bench at this tp: its JSON lines (stderr), {(path, T): {"us", "w_bytes"}}."""
    fields = f'"tp_size": {tp}, "hidden": {H}, "latent": {L}, "max_tokens": {max(tokens)}'
    cmd = [binary, fields, *map(str, tokens)]
    print("$", " ".join(f"'{c}'" if " " in c else c for c in cmd), flush=True)
    run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if run.returncode != 0:
        sys.stdout.write(run.stdout + run.stderr)
        raise SystemExit(f"moejit_tail_bench failed (exit {run.returncode})")
    return parse_tail_lines(run.stderr)


def parse_tail_lines(text):
    out = {}
    for line in text.splitlines():
        if line.startswith('{"path"'):
            j = json.loads(line)
            out[(j["path"], j["tokens"])] = {"us": j["us"], "w_bytes": j["w_bytes"]}
    return out


def torch_tail_worker(rank, tp, tokens, port, calls, replays, result):
    import torch
    import torch.distributed as dist
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), NCCL_NVLS_ENABLE="0",
                      TORCH_SYMM_MEM_DISABLE_MULTICAST="1")  # never NVLink multicast
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=tp, device_id=torch.device("cuda", rank))

    def tail(routed, shared, gamma, w):
        if tp > 1:
            # In place, as an engine reduces the partials it owns; AVG keeps the inputs the same
            # from call to call (a SUM would double them every call) at a SUM's cost.
            dist.all_reduce(routed, op=dist.ReduceOp.AVG)
            dist.all_reduce(shared, op=dist.ReduceOp.AVG)
        z = torch.nn.functional.rms_norm(routed, (L,), gamma, EPS)
        return torch.addmm(shared, z, w.t())

    g = torch.Generator(device="cuda").manual_seed(1 + rank)
    times = {}
    for t in tokens:
        # performance.md: the calls of a graph rotate through copies that span 3x the L2
        per_set = 2 * (H * L + t * L + 2 * t * H + L)  # every rank reads all of W
        sets = []
        for _ in range(common.set_count(per_set, calls)):
            w = (torch.rand(H, L, device="cuda", generator=g) - 0.5).mul_(0.06).to(torch.bfloat16)
            gamma = torch.ones(L, device="cuda", dtype=torch.bfloat16)
            routed = torch.randn(t, L, device="cuda", generator=g).to(torch.bfloat16)
            shared = torch.randn(t, H, device="cuda", generator=g).to(torch.bfloat16)
            sets.append((routed, shared, gamma, w))
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for i in range(3):
                tail(*sets[i % len(sets)])
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for i in range(calls):
                tail(*sets[i % len(sets)])
        graph.replay()
        torch.cuda.synchronize()
        mine = []
        for _ in range(replays):
            dist.barrier()
            torch.cuda.synchronize()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            graph.replay()
            b.record()
            b.synchronize()
            mine.append(a.elapsed_time(b) * 1000 / calls)
        worst = torch.tensor([statistics.median(mine)], device="cuda")
        dist.all_reduce(worst, op=dist.ReduceOp.MAX)
        times[t] = worst.item()
        del graph, sets
        torch.cuda.empty_cache()
    if rank == 0:
        result.update(times)
    dist.destroy_process_group()


def time_torch(tp, tokens, calls, replays, port=29531):
    """The torch tail at this tp: {T: us}, max over ranks."""
    import torch.multiprocessing as mp
    with mp.Manager() as manager:
        result = manager.dict()
        mp.spawn(torch_tail_worker, args=(tp, tokens, port + tp, calls, replays, result), nprocs=tp)
        return dict(result)


def rows_of(tp, ours, torch_times, copy_GBps):
    rows = []
    for t in sorted({t for (_, t) in ours}):
        row = {"tp": tp, "tokens": t, "torch_us": torch_times.get(t)}
        for path in PATHS:
            r = ours.get((path, t))
            key = path.replace("-", "_")
            row[f"{key}_us"] = r["us"] if r else None
            floor = r["w_bytes"] / (copy_GBps * 1e9) * 1e6 if r and copy_GBps else None
            row[f"{key}_floor_us"] = floor
            row[f"{key}_x_floor"] = r["us"] / floor if floor else None
        row["fused_over_base"] = row["fused_us"] / row["base_us"] if row["fused_us"] and row["base_us"] else None
        rows.append(row)
    return rows


def table(rows):
    f, r = common.fmt_num, common.fmt_ratio
    cells = [[x["tp"], x["tokens"], f(x["fused_us"]), r(x["fused_x_floor"]), f(x["base_us"]), r(x["base_x_floor"]),
              f(x["base_striped_us"]), r(x["base_striped_x_floor"]), f(x["torch_us"]), common.fmt_num(x["fused_over_base"], 2)]
             for x in rows]
    return common.markdown_table(HEADERS, cells)


def summary(rows, copy_GBps):
    lines = [f"SM copy (torch copy_, the floors' yardstick): {common.fmt_num(copy_GBps, 0)} GB/s"]
    for tp in dict.fromkeys(x["tp"] for x in rows):
        mine = [x for x in rows if x["tp"] == tp and x["tokens"] <= 16 and x["fused_over_base"]]
        best_base = [x for x in rows if x["tp"] == tp and x["torch_us"] and (x["base_us"] or x["base_striped_us"])]
        behind = [x["tokens"] for x in best_base if min(v for v in (x["base_us"], x["base_striped_us"]) if v) > x["torch_us"]]
        parts = []
        if mine:
            parts.append(f"fused / base at T<=16 {min(x['fused_over_base'] for x in mine):.2f}-{max(x['fused_over_base'] for x in mine):.2f}")
        if behind:
            parts.append(f"base behind torch at T={','.join(map(str, behind))}")
        elif best_base and not mine:
            parts.append("base no slower than torch at every T")
        floors = [x["base_x_floor"] for x in rows if x["tp"] == tp and x["base_x_floor"]]
        if floors and not mine:
            parts.append(f"base {min(floors):.2f}-{max(floors):.2f}x its floor")
        if parts:
            lines.append(f"tp {tp}: " + "; ".join(parts))
    return lines


def gpu_count():
    import torch
    return torch.cuda.device_count()


def main(argv=None):
    a = parse_args(argv)
    print(common.stamp_line(common.run_stamp()), flush=True)
    n = gpu_count()
    tps = [tp for tp in (a.tp or [1, 2, 4, 8]) if tp <= n]
    if not tps:
        print(f"latent tail: skipped, {n} GPU(s) here and it needs at least {min(a.tp or [1])}")
        common.write_json(a.json, {"driver": "bench_latent_tail.py", "skipped": f"{n} GPU(s)",
                                   "summary": [f"skipped ({n} GPU)"]})
        return 0
    copy_GBps = common.sm_copy_GBps()
    rows = []
    for tp in tps:
        ours = run_tail_bench(a.tail_bench, tp, a.tokens)
        torch_times = {} if a.no_torch else time_torch(tp, a.tokens, common.CALLS, common.REPLAYS)
        rows += rows_of(tp, ours, torch_times, copy_GBps)
    print(f"\nLatent tail, H {H}, L {L}, bf16, us per call, max over ranks (torch {common.torch_version()}: tp > 1 NCCL all-reduce x2, "
          f"then rms_norm + addmm; x floor = us / (W_up bytes a rank reads / SM copy {copy_GBps:.0f} GB/s))\n")
    print(table(rows))
    lines = summary(rows, copy_GBps)
    print("\n" + "\n".join(lines))
    common.write_json(a.json, {"driver": "bench_latent_tail.py", "torch": common.torch_version(), "torch_copy_GBps": copy_GBps,
                               "rows": rows, "summary": lines})
    return 0


if __name__ == "__main__":
    sys.exit(main())
