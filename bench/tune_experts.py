#!/usr/bin/env python3
"""Times tile variants of experts ops side by side: the measurements behind the overrides kept
in compiler/ops/experts_rings.json and experts_prefill_tiles.json.

  python3 bench/tune_experts.py --moejit .carry/moejit --ops qwen3_30b_a3b,kimi_k3_tp8 --tokens 1,8 \\
      --grid "groups1=1,2,4,8 groups2=1,2,4,8" [--rounds 2] [--inputs uniform] [--json FILE]

Each op of --spec gets a variant for every point of the grid (fields of the spec's `tiles`,
README.md; a field the grid leaves out stays the compiler's, and a row group count takes the
compiler's K split with it: the spec sets them in pairs) beside the compiler's own tiles. A
variant the templates cannot take (`moejit validate`) is listed and dropped. The variants run as
the ops of one generated spec, warmed first, through `--rounds` runs of `moejit bench` in
alternating order; each table gives a variant's us in every round, its share of the same run's
streaming read, and the compiler's tiles' time over its own (x model: above 1 is faster). Prefill
fields (cols1, n2, band1, band2) act where the call takes the prefill GEMMs: set
MOEJIT_EXPERTS_PATH=prefill to time them at any T.
"""
import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

# The spec's `tiles` fields (spec/ops/experts.hpp), and the pairs it sets together.
FIELDS = ("groups1", "split1", "groups2", "split2", "ring1", "ring2", "ring_one", "cols1", "n2", "band1", "band2")
PAIRS = (("groups1", "split1"), ("groups2", "split2"))
MAX_VARIANTS = 64


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--moejit", default=".carry/moejit", help="the moejit CLI (default: %(default)s)")
    p.add_argument("--json", metavar="FILE", help="write every figure here")
    p.add_argument("--calls", type=int, default=common.CALLS, help="calls per CUDA graph (default: %(default)s)")
    p.add_argument("--replays", type=int, default=common.REPLAYS, help="graph replays, median taken (default: %(default)s)")
    p.add_argument("--spec", default=os.path.join(common.SPECS, "experts.json"), help="the spec whose ops are tuned (default: %(default)s)")
    p.add_argument("--ops", required=True, help="the ops to tune, comma-separated")
    p.add_argument("--tokens", type=common.token_list, default=[1, 8, 32, 64], help="token counts (default: 1,8,32,64)")
    p.add_argument("--grid", required=True, help='fields and values: "groups1=1,2,4 ring2=4,8"')
    p.add_argument("--rounds", type=int, default=2, help="runs of every variant, in alternating order (default: %(default)s)")
    p.add_argument("--inputs", default="uniform", choices=("uniform", "skewed"), help="routing (default: %(default)s)")
    p.add_argument("--arch", default="sm_90a", help="the arch whose tiles are the compiler's (default: %(default)s)")
    return p.parse_args(argv)


def parse_grid(text):
    """'groups1=1,2 ring2=8' -> {"groups1": [1, 2], "ring2": [8]}, fields in FIELDS order."""
    grid = {}
    for part in text.replace(";", " ").split():
        field, sep, values = part.partition("=")
        if not sep or field not in FIELDS:
            raise SystemExit(f"--grid: '{part}' is not FIELD=V1,V2,... with FIELD one of {', '.join(FIELDS)}")
        try:
            grid[field] = sorted({int(v) for v in values.split(",") if v})
        except ValueError:
            raise SystemExit(f"--grid: '{part}': the values are integers") from None
        if not grid[field]:
            raise SystemExit(f"--grid: '{part}' has no values")
    if not grid:
        raise SystemExit("--grid: no fields")
    return {f: grid[f] for f in FIELDS if f in grid}


def parse_contract_fields(text):
    """The tile fields of `moejit compile --emit contract`'s text (both contracts of an op)."""
    fields = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] in FIELDS:
            fields[parts[0]] = int(parts[1])
    return fields


def model_tiles(moejit, spec, op, arch):
    run = subprocess.run([moejit, "compile", spec, "--op", op, "--arch", arch, "--emit", "contract"], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    if run.returncode != 0:
        raise SystemExit(f"moejit compile {spec} --op {op} failed (exit {run.returncode}):\n{run.stdout}")
    return parse_contract_fields(run.stdout)


def variant_name(op, tiles):
    return op + "@" + ("+".join(f"{k}:{v}" for k, v in tiles.items()) if tiles else "model")


def variants(op, grid, model):
    """(name, tiles) for the compiler's tiles and for every point of the grid that differs from them;
    a point setting one field of a pair takes the other from `model`."""
    out = [(variant_name(op, {}), {})]
    seen = set()
    for point in itertools.product(*grid.values()):
        tiles = dict(zip(grid.keys(), point))
        for a, b in PAIRS:
            if (a in tiles) != (b in tiles):
                missing = b if a in tiles else a
                if missing in model:
                    tiles[missing] = model[missing]
        tiles = {f: tiles[f] for f in FIELDS if f in tiles}
        if all(model.get(f) == v for f, v in tiles.items()):
            continue  # the compiler's own
        key = tuple(tiles.items())
        if key not in seen:
            seen.add(key)
            out.append((variant_name(op, tiles), tiles))
    return out


def variant_ops(base_op, named_tiles, max_tokens):
    """The spec ops of the variants: the base op's JSON with its name, max_tokens (the workspaces
    every variant holds at once; not a contract field) and (where any) its tiles."""
    ops = []
    for name, tiles in named_tiles:
        op = {k: v for k, v in base_op.items() if k not in ("name", "tiles")}
        op["name"] = name
        op["max_tokens"] = max_tokens
        if tiles:
            op["tiles"] = tiles
        ops.append(op)
    return ops


def write_spec(path, ops, arch):
    with open(path, "w") as f:
        json.dump({"model": "tune", "archs": [arch], "ops": ops}, f, indent=1)


def validate(moejit, op, arch, tmp):
    """'' where moejit takes the op, else its one-line error."""
    path = os.path.join(tmp, "one.json")
    write_spec(path, [op], arch)
    run = subprocess.run([moejit, "validate", path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if run.returncode == 0:
        return ""
    return run.stdout.strip().splitlines()[-1] if run.stdout.strip() else f"exit {run.returncode}"


def rows_of(runs, names_by_op, tokens):
    """One row a (op, T, variant): us a round, the mean, its share of each round's streaming read,
    and the model's mean over its own."""
    rows = []
    for op, names in names_by_op.items():
        for t in tokens:
            timed = {}
            for name in names:
                us, read = [], []
                for run in runs:
                    r = next((r for r in run["results"] if r["op"] == name and r["tokens"] == t), None)
                    if r is None:
                        continue
                    us.append(r["us_per_call"])
                    read.append(common.fraction(r["bytes"], r["us_per_call"], run.get("read_GBps")))
                if us:
                    timed[name] = (us, read)
            model = timed.get(names[0])
            for name, (us, read) in timed.items():
                mean = statistics.mean(us)
                rows.append({"op": op, "tokens": t, "variant": name, "tiles": name.split("@", 1)[1], "us": us, "mean_us": mean,
                             "read_fraction": min((x for x in read if x is not None), default=None),
                             "x_model": statistics.mean(model[0]) / mean if model else None,
                             "faster_every_round": bool(model) and name != names[0] and all(a < b for a, b in zip(us, model[0]))})
    return rows


HEADERS = ["op", "T", "tiles", "us (each round)", "% read", "x model"]


def table(rows):
    cells = []
    for op_t in dict.fromkeys((r["op"], r["tokens"]) for r in rows):
        mine = sorted((r for r in rows if (r["op"], r["tokens"]) == op_t), key=lambda r: r["mean_us"])
        for r in mine:
            cells.append([r["op"], r["tokens"], r["tiles"] + (" *" if r["faster_every_round"] else ""),
                          " / ".join(common.fmt_num(u) for u in r["us"]), common.fmt_pct(r["read_fraction"]), common.fmt_ratio(r["x_model"])])
    return common.markdown_table(HEADERS, cells)


def summary(rows):
    lines = []
    for op_t in dict.fromkeys((r["op"], r["tokens"]) for r in rows):
        mine = [r for r in rows if (r["op"], r["tokens"]) == op_t]
        best = min(mine, key=lambda r: r["mean_us"])
        model = next((r for r in mine if r["tiles"] == "model"), None)
        verdict = "the compiler's tiles are the fastest" if best is model else (
            f"best {best['tiles']} ({common.fmt_ratio(best['x_model'])} the compiler's"
            + ("; faster in every round)" if best["faster_every_round"] else "; not faster in every round)"))
        lines.append(f"{op_t[0]} T={op_t[1]}: {verdict}")
    return lines


def main(argv=None):
    a = parse_args(argv)
    print(common.stamp_line(common.run_stamp()), flush=True)
    grid = parse_grid(a.grid)
    with open(a.spec) as f:
        spec = json.load(f)
    by_name = {op.get("name"): op for op in spec["ops"]}
    ops, names_by_op, dropped = [], {}, []
    with tempfile.TemporaryDirectory() as tmp:
        for op_name in [o for o in a.ops.split(",") if o]:
            if op_name not in by_name or by_name[op_name].get("op") != "experts":
                raise SystemExit(f"--ops: {a.spec} has no experts op '{op_name}'")
            model = model_tiles(a.moejit, a.spec, op_name, a.arch)
            named = variants(op_name, grid, model)
            if len(named) > MAX_VARIANTS:
                raise SystemExit(f"{op_name}: {len(named)} variants, more than {MAX_VARIANTS}: narrow the grid")
            print(f"{op_name}: the compiler's tiles {model}", flush=True)
            kept = []
            for op in variant_ops(by_name[op_name], named, max(a.tokens)):
                why = validate(a.moejit, op, a.arch, tmp)
                if why:
                    dropped.append((op["name"], why))
                else:
                    kept.append(op)
            ops += kept
            names_by_op[op_name] = [op["name"] for op in kept]
        for name, why in dropped:
            print(f"dropped {name}: {why}", flush=True)
        path = os.path.join(tmp, "tune.json")
        write_spec(path, ops, a.arch)
        warm = subprocess.run([a.moejit, "warmup", path, "--arch", a.arch, "-q"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        print(warm.stdout.strip(), flush=True)
        if warm.returncode != 0:
            raise SystemExit(f"moejit warmup failed (exit {warm.returncode})")
        names = [op["name"] for op in ops]
        bench = ["--calls", str(a.calls), "--replays", str(a.replays), "--inputs", a.inputs]
        runs = [common.run_moejit_bench(a.moejit, path, names if r % 2 == 0 else names[::-1], a.tokens, bench) for r in range(a.rounds)]
    rows = rows_of(runs, names_by_op, a.tokens)
    print(table(rows))
    print()
    for line in summary(rows):
        print(line)
    if a.json:
        common.write_json(a.json, {"stamp": common.run_stamp(), "grid": grid, "inputs": a.inputs, "dropped": dropped,
                                   "commands": [r["command"] for r in runs], "read_GBps": [r.get("read_GBps") for r in runs],
                                   "rows": rows, "summary": summary(rows)})


if __name__ == "__main__":
    main()
