#!/usr/bin/env python3
"""MoE layer: moejit.MoELayer (routing -> experts -> the tp 1 latent tail where the spec has one,
each kernel chained to the one before it) beside its ops run one by one, through the Python package
on torch tensors, timed as common.py times every driver (N calls captured in one CUDA graph, median
of replays, input sets rotated until one graph's calls span 3 L2s): the layer; each op alone, and
their sum; and the ops one by one captured together in one graph ("sequence": the fair comparison,
the graph a caller would capture without the layer). Before the timing, the layer's output is
checked against the sequence's, bit for bit ("same bits").

Layers: each shipped spec's router with each standard-layout experts op MoELayer accepts (the same
top-k, id range and ids dtype), with the spec's tp 1 latent tail where its latent width is the
experts' hidden width; an experts op of a tp slice (named `_tpN`, N > 1) is left out: this is one
GPU. A T over the layer's max_tokens (a tail's 64) is skipped. Weights random bf16 with
gpu_inputs.py's magnitudes, allocated once a model and freed before the next; the routing logits
random fp32, each input set its own, so the calls of a graph route to other experts.

  PYTHONPATH=.carry/python python3 bench/bench_layer.py [--tokens 1,8,64,512] [--models deepseek-v3,kimi-k3] [--json layer.json]
"""
import argparse
import glob
import json
import os
import re
import sys
import time

import common

TOKENS = [1, 8, 64, 512]
SHIPPED = os.path.join(os.path.dirname(common.HERE), "specs")
EXPERT_WEIGHTS = ("w13", "w2", "b13", "b2")  # one copy for every input set: the ids pick which experts a call reads
RENAMED = {"topk_ids": "ids", "topk_weights": "weights", "routed": "y"}  # an op's tensor -> the input set's
HEADERS = ["layer", "T", "layer us", "router us", "experts us", "tail us", "sum us", "layer/sum", "saving us",
           "sequence us", "layer/sequence", "saving vs sequence us"]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", type=common.token_list, default=TOKENS, help="T, comma-separated (default: %(default)s)")
    p.add_argument("--models", default="",
                   help="spec names (deepseek-v3,...), comma-separated (default: every shipped one with a layer)")
    p.add_argument("--specs", default=SHIPPED, help="the folder of model specs (default: %(default)s)")
    p.add_argument("--json", metavar="FILE", help="write every figure here (rewritten after each model)")
    p.add_argument("--calls", type=int, default=common.CALLS, help="calls per CUDA graph (default: %(default)s)")
    p.add_argument("--replays", type=int, default=common.REPLAYS, help="graph replays, median taken (default: %(default)s)")
    return p.parse_args(argv)


# ---- which layers (from the spec files: no GPU, no moejit) ----------------------------------

def tp_slice(name):
    """N where an op is named for one rank's share of N GPUs (`experts_tp8`), else 1."""
    m = re.search(r"_tp(\d+)$", name)
    return int(m.group(1)) if m else 1


def layers_of(path):
    """[{"model", "spec", "router", "experts", "tail"}] of one spec file: MoELayer's rules
    (runtime/moe_layer.cpp: the experts standard, their top-k, id range and ids dtype the router's;
    a tail's latent width the experts' hidden width, bf16), one GPU (a tail of tp_size 1, no
    experts op of a tp slice); the first fitting tail joins. MoELayer itself has the last word."""
    with open(path) as f:
        spec = json.load(f)
    if "model" not in spec:
        return []
    ops = spec["ops"]
    routers = [o for o in ops if o["op"] == "routing"]
    tails = [o for o in ops if o["op"] == "latent_tail" and o["tp_size"] == 1]
    out = []
    for r in routers:
        for e in ops:
            if e["op"] != "experts" or e.get("layout", "standard") != "standard" or tp_slice(e["name"]) > 1:
                continue
            if (e["topk"] != r["topk"] or e.get("global_experts", e["num_experts"]) != r["num_experts"]
                    or e.get("ids_dtype", "int32") != r.get("ids_dtype", "int32")):
                continue
            tail = next((t for t in tails if t["latent"] == e["hidden"] and e.get("dtype", "bf16") == "bf16"), None)
            out.append({"model": spec["model"], "spec": path, "router": r["name"], "experts": e["name"],
                        "tail": tail["name"] if tail else None})
    return out


def all_layers(specs_dir, models=()):
    found = [lay for p in sorted(glob.glob(os.path.join(specs_dir, "*.json"))) for lay in layers_of(p)]
    if models:
        unknown = set(models) - {lay["model"] for lay in found}
        if unknown:
            raise SystemExit(f"no layer in {specs_dir} for {', '.join(sorted(unknown))}")
        found = [lay for lay in found if lay["model"] in models]
    return found


def label_of(layer):
    text = layer["model"] + ("" if layer["experts"] == "experts" else f"/{layer['experts']}")
    return text + (f"+{layer['tail']}" if layer["tail"] else "")


def touched_experts(num_experts, topk, tokens):
    """Expected distinct experts T tokens of K distinct uniform picks hit."""
    return num_experts * (1 - (1 - topk / num_experts) ** tokens)


# ---- rows, table, summary (no GPU) ----------------------------------------------------------

def row_of(layer, tokens, times, same_bits=None, sets=None):
    """One row of every figure from the times (us) of "layer", "router", "experts", "tail",
    "sequence" (None: failed, or no tail)."""
    parts = [times.get("router"), times.get("experts")] + ([times.get("tail")] if layer["tail"] else [])
    total = sum(parts) if all(p is not None for p in parts) else None
    us, seq = times.get("layer"), times.get("sequence")
    return {"layer": label_of(layer), "model": layer["model"], "router": layer["router"], "experts": layer["experts"],
            "tail": layer["tail"], "tokens": tokens, "layer_us": us, "router_us": times.get("router"),
            "experts_us": times.get("experts"), "tail_us": times.get("tail"), "sum_us": total,
            "layer_over_sum": us / total if us and total else None, "saving_us": total - us if us and total else None,
            "sequence_us": seq, "layer_over_sequence": us / seq if us and seq else None,
            "saving_vs_sequence_us": seq - us if us and seq else None, "same_bits": same_bits, "sets": sets or {}}


def table(rows):
    n, r = common.fmt_num, common.fmt_ratio
    cells = [[x["layer"], x["tokens"], n(x["layer_us"]), n(x["router_us"]), n(x["experts_us"]), n(x["tail_us"]),
              n(x["sum_us"]), r(x["layer_over_sum"]), n(x["saving_us"]), n(x["sequence_us"]),
              r(x["layer_over_sequence"]), n(x["saving_vs_sequence_us"])] for x in rows]
    return common.markdown_table(HEADERS, cells)


def summary(rows, skipped=()):
    lines = []
    for label in dict.fromkeys(x["layer"] for x in rows):
        mine = [x for x in rows if x["layer"] == label and x["saving_vs_sequence_us"] is not None]
        if not mine:
            lines.append(f"{label}: no figure")
            continue
        save = [x["saving_vs_sequence_us"] for x in mine]
        ratio = [x["layer_over_sequence"] for x in mine]
        bad = [str(x["tokens"]) for x in rows if x["layer"] == label and x["same_bits"] is False]
        span = f"T={mine[0]['tokens']}-{mine[-1]['tokens']}"
        lines.append(f"{label}: the layer saves {common.fmt_num(min(save))} to {common.fmt_num(max(save))} us a call over "
                     f"the sequence (layer/sequence {min(ratio):.3f}-{max(ratio):.3f}, {span})"
                     + (f"; output DIFFERS from the sequence at T={','.join(bad)}" if bad else ""))
    lines += [f"skipped: {s}" for s in skipped]
    return lines


# ---- the GPU side ---------------------------------------------------------------------------

def fill(t, name, gen):
    """gpu_inputs.make_arrays' magnitudes: weights ("w*") 0.05 N(0, 1), gamma 1 + 0.1 N(0, 1), the
    rest N(0, 1); filled in place a slice of ~1 GiB at a time (no temporary of the whole)."""
    mean, std = (1.0, 0.1) if name == "gamma" else (0.0, 0.05 if name.startswith("w") else 1.0)
    if t.numel() == 0 or not t.is_floating_point():
        return t.zero_()
    rows = max(1, (1 << 30) // t[0].nbytes) if t.dim() > 1 else t.shape[0]
    for i in range(0, t.shape[0], rows):
        t[i:i + rows].normal_(mean, std, generator=gen)
    return t


def tensor_for(torch, decl, tokens, gen):
    t = torch.empty(decl.shape_for(tokens), dtype=getattr(torch, decl.dtype), device="cuda")
    return fill(t, decl.name, gen) if decl.role == "input" else t


class Model:
    """One layer's ops on the GPU, the experts' weights, and its input sets at one T."""

    def __init__(self, torch, ctx, layer):
        import moejit
        self.torch, self.info = torch, layer
        spec = moejit.load_spec(layer["spec"])
        specs = {k: spec.op(layer[k]) if layer[k] else None for k in ("router", "experts", "tail")}
        self.layer = moejit.MoELayer(ctx, specs["router"], specs["experts"], specs["tail"])
        self.ops = {k: ctx.load(s) if s else None for k, s in specs.items()}
        self.gen = torch.Generator(device="cuda").manual_seed(0)
        decls = {d.name: d for d in self.ops["experts"].tensors()}
        self.weights = {n: tensor_for(torch, decls[n], 0, self.gen) for n in EXPERT_WEIGHTS if n in decls}
        self.topk = decls["topk_ids"].shape_for(1)[1]

    @staticmethod
    def weight_bytes(op_spec):
        return sum(d.nbytes(0) for d in op_spec.tensors() if d.name in EXPERT_WEIGHTS)

    def make_set(self, tokens):
        """{name: tensor} of one input set: every op's tensors (the outputs left empty), by the
        layer's names, the experts' weights shared, a tail's optional outputs unbound."""
        s = dict(self.weights)
        for op in [self.ops["router"], self.ops["experts"], self.ops["tail"], self.layer]:
            for d in op.tensors() if op else []:
                name = RENAMED.get(d.name, d.name)
                if name not in s and not d.optional:
                    s[name] = tensor_for(self.torch, d, tokens, self.gen)
        return s

    def args(self, which, s):
        op = self.layer if which == "layer" else self.ops[which]
        return tuple(s.get(RENAMED.get(d.name, d.name)) if not d.optional else None for d in op.tensors())

    def set_bytes(self, which, tokens):
        """The bytes one call reads and writes: its tensors, and the experts' weights the ids touch."""
        names = ["router", "experts", "tail"] if which == "layer" else [which]
        total = 0
        for n in names:
            op = self.ops[n]
            for d in op.tensors() if op else []:
                if d.name in EXPERT_WEIGHTS:
                    e = d.shape_for(tokens)[0]
                    total += d.nbytes(tokens) * touched_experts(e, self.topk, tokens) / e
                elif not d.optional:
                    total += d.nbytes(tokens)
        return int(total)

    def sequence(self, r, e, t=None):
        self.ops["router"](*r)
        out = self.ops["experts"](*e)
        return self.ops["tail"](*t) if t is not None else out


def measure(torch, model, tokens, calls, replays):
    """{"layer", "router", "experts", "tail", "sequence"} us, same bits, and the input sets of each."""
    which = ["layer", "router", "experts"] + (["tail"] if model.ops["tail"] else [])
    counts = {w: common.set_count(model.set_bytes(w, tokens), calls) for w in which}
    sets = [model.make_set(tokens) for _ in range(max(counts.values()))]
    for s in sets[:max(counts[w] for w in which[2:])]:  # ids, weights and y for the experts and the tail alone
        model.sequence(*[model.args(w, s) for w in which[1:]])
    s0 = sets[0]
    model.layer(*model.args("layer", s0))
    torch.cuda.synchronize()
    got = s0["out"].clone()
    model.sequence(*[model.args(w, s0) for w in which[1:]])
    torch.cuda.synchronize()
    final = s0["out"] if model.ops["tail"] else s0["y"]
    same = bool(torch.equal(got.view(torch.int16), final.view(torch.int16)))
    label = f"{label_of(model.info)} T={tokens}"
    times = {}
    for w in which:
        fn = model.layer if w == "layer" else model.ops[w]
        times[w] = common.try_time_us(f"{label} {w}", fn, [model.args(w, s) for s in sets[:counts[w]]], calls, replays)
    seq_sets = [tuple(model.args(w, s) for w in which[1:]) for s in sets[:counts["layer"]]]
    times["sequence"] = common.try_time_us(f"{label} sequence", model.sequence, seq_sets, calls, replays)
    counts["sequence"] = counts["layer"]
    del sets, seq_sets, got, final
    return times, same, counts


def run_model(torch, ctx, layer, tokens, a):
    """The rows of one layer at every T it takes, or a reason it was skipped."""
    import moejit
    spec = moejit.load_spec(layer["spec"])
    need = Model.weight_bytes(spec.op(layer["experts"]))
    free = torch.cuda.mem_get_info()[0]
    if need > 0.9 * free:
        return [], [f"{label_of(layer)}: its experts' weights ({need / 1e9:.1f} GB) do not fit ({free / 1e9:.1f} GB free)"]
    start = time.perf_counter()
    try:
        model = Model(torch, ctx, layer)
    except moejit.UsageError as e:
        return [], [f"{label_of(layer)}: MoELayer refuses it: {e}"]
    torch.cuda.synchronize()
    print(f"{label_of(layer)}: {need / 1e9:.1f} GB of weights in {time.perf_counter() - start:.1f} s", flush=True)
    rows, skipped = [], []
    for t in tokens:
        if model.layer.max_tokens and t > model.layer.max_tokens:
            skipped.append(f"{label_of(layer)} T={t}: over the layer's max_tokens ({model.layer.max_tokens})")
            continue
        times, same, counts = measure(torch, model, t, a.calls, a.replays)
        row = row_of(layer, t, times, same, counts)
        rows.append(row)
        f = common.fmt_num
        print(f"  T={t}: layer {f(row['layer_us'])} us; router {f(row['router_us'])} + experts {f(row['experts_us'])}"
              + (f" + tail {f(row['tail_us'])}" if layer["tail"] else "") + f" = {f(row['sum_us'])} us; sequence "
              f"{f(row['sequence_us'])} us; same bits: {'yes' if same else 'NO'}; sets {counts}", flush=True)
    del model
    torch.cuda.empty_cache()
    return rows, skipped


def warmup(ctx, layers):
    """Every contract of the layers' specs into the cache for this GPU, in parallel (cold: seconds;
    warm, as after run_tests.sh's `moejit warmup`: reads)."""
    import moejit
    arch = ctx.device.arch
    s = moejit.warmup(sorted({lay["spec"] for lay in layers}), archs=[arch] if arch in moejit.supported_archs() else None,
                      check=False)  # an op no layer uses may fail; one a layer needs fails again when it loads
    print(f"warmup: {s.contracts} contracts from {s.specs} specs: {s.compiled} compiled, {s.from_disk} from disk, "
          f"{s.in_memory} in memory, {s.failed} failed; {s.seconds:.2f} s on {s.threads} threads", flush=True)


def main(argv=None):
    a = parse_args(argv)
    print(common.stamp_line(common.run_stamp()), flush=True)
    layers = all_layers(a.specs, [m for m in a.models.split(",") if m])
    import torch
    import moejit
    ctx = moejit.Context()
    print(f"{ctx.device.name} ({ctx.device.arch}), torch {torch.__version__}; us per call, {a.calls} calls a graph, "
          f"median of {a.replays} replays; layers: {', '.join(label_of(lay) for lay in layers)}", flush=True)
    warmup(ctx, layers)
    rows, skipped = [], []
    doc = {"driver": "bench_layer.py", "torch": torch.__version__, "device": ctx.device.name, "arch": ctx.device.arch,
           "calls": a.calls, "replays": a.replays, "tokens": a.tokens, "layers": layers}
    for layer in layers:
        r, s = run_model(torch, ctx, layer, a.tokens, a)
        rows += r
        skipped += s
        for line in s:
            print(f"  skipped: {line}", flush=True)
        if a.json:
            with open(a.json, "w") as f:
                json.dump(dict(doc, rows=rows, summary=summary(rows, skipped)), f, indent=1)
    lines = summary(rows, skipped)
    print("\n" + "\n".join(lines))
    print("\nMoE layer, us per call: the layer; each op alone and their sum; the ops one by one in one graph (sequence); "
          "layer/x below 1x and a positive saving where the layer is faster\n")
    print(table(rows))
    common.write_json(a.json, dict(doc, rows=rows, summary=lines))
    return 0 if all(x["same_bits"] is not False for x in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
