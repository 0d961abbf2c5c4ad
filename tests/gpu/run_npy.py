#!/usr/bin/env python3
"""GPU test of `moejit run`: for each activation kind and layout (and a router), random inputs
as .npy files, the op run on the GPU and on the CPU reference (`--reference`) through the same
CLI path, outputs compared (numerics.md's activation test: equal but 1 ulp on at most 1e-3 of
the elements; routing ids exactly); masked layouts start from an --init output whose unwritten
rows must come back untouched. Registered with CTest (gpu.run_npy); exits 77 (skipped), saying
why, where there is no GPU or no NumPy.

  python3 tests/gpu/run_npy.py --moejit build/moejit
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from gpu_probe import no_gpu_reason  # noqa: E402

try:
    import numpy as np
except ImportError:  # skip_reason() says so
    np = None

SKIPPED = 77  # CTest's SKIP_RETURN_CODE for the [gpu] tests


def skip_reason():
    reason = no_gpu_reason()
    if reason:
        return reason + "; it runs on an H200"
    return "NumPy is not installed" if np is None else None


KINDS = {"silu": {}, "gelu": {}, "gelu_tanh": {}, "swiglu_oai": {"interleaved": True}, "situ": {"beta": 4.0, "linear_beta": 25.0}}


def bf16_bits(x):
    u = np.asarray(x, dtype=np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def run(moejit, spec, op, ins, out_dir, extra=()):
    cmd = [moejit, "run", spec, "--op", op, "--out-dir", out_dir, *extra]
    for name, path in ins.items():
        cmd += ["--in" if not name.startswith("init:") else "--init", f"{name.split(':')[-1]}={path}"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def ulp_mismatch(a, b):
    a = a.astype(np.int32)
    b = b.astype(np.int32)
    oa = np.where(a & 0x8000, -(a & 0x7FFF), a & 0x7FFF)
    ob = np.where(b & 0x8000, -(b & 0x7FFF), b & 0x7FFF)
    nan = lambda x: ((x & 0x7F80) == 0x7F80) & ((x & 0x7F) != 0)
    d = np.abs(oa - ob)
    d[nan(a) & nan(b)] = 0
    return d


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--moejit", required=True)
    a = p.parse_args()
    reason = skip_reason()
    if reason:
        print(f"SKIPPED: run_npy: {reason}")
        return SKIPPED
    rng = np.random.default_rng(7)
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for kind, extra in KINDS.items():
            for layout in ("dense", "masked"):
                op = {"op": "activation", "name": "act", "kind": kind, "d": 3072, "layout": layout, **extra}
                if layout == "masked":
                    op["num_experts"] = 4
                spec = os.path.join(tmp, f"{kind}-{layout}.json")
                json.dump({"op": op["op"], **{k: v for k, v in op.items() if k not in ("op", "name")}, "archs": ["sm_90a"]}, open(spec, "w"))
                t = 37
                shape = (4, t, 6144) if layout == "masked" else (t, 6144)
                x = rng.normal(0, 2, size=shape).astype(np.float32)
                x.flat[::97] = 0
                x.flat[::131] = np.inf
                ins = {"x": os.path.join(tmp, "x.npy")}
                np.save(ins["x"], bf16_bits(x))
                if layout == "masked":
                    counts = np.array([0, 5, t, 20], dtype=np.int32)
                    np.save(os.path.join(tmp, "counts.npy"), counts)
                    ins["expert_num_tokens"] = os.path.join(tmp, "counts.npy")
                    init = np.full((4, t, 3072), 0x3F80, dtype=np.uint16)  # 1.0
                    np.save(os.path.join(tmp, "init.npy"), init)
                    ins["init:out"] = os.path.join(tmp, "init.npy")
                gpu, ref = os.path.join(tmp, "gpu"), os.path.join(tmp, "ref")
                run(a.moejit, spec, "activation", ins, gpu)
                run(a.moejit, spec, "activation", ins, ref, ["--reference"])
                g, r = np.load(os.path.join(gpu, "out.npy")), np.load(os.path.join(ref, "out.npy"))
                d = ulp_mismatch(g, r)
                bad = (d > 1).sum() + max(0, (d == 1).sum() - d.size // 1000)
                if layout == "masked":
                    for e, c in enumerate(counts):
                        bad += int((g[e, c:] != 0x3F80).sum())
                status = "PASS" if bad == 0 else "FAIL"
                failures += bad != 0
                print(f"{status} run {kind:<10} {layout:<6} ({(d == 1).sum()} elements 1 ulp off of {d.size})")
        # A router through run: ids exactly.
        spec = os.path.join(tmp, "router.json")
        json.dump({"op": "routing", "num_experts": 896, "topk": 16, "scoring": "sigmoid", "bias": "fp32", "renormalize": True,
                   "archs": ["sm_90a"]}, open(spec, "w"))
        np.save(os.path.join(tmp, "logits.npy"), rng.normal(0, 2, size=(300, 896)).astype(np.float32))
        np.save(os.path.join(tmp, "bias.npy"), rng.normal(0, 0.5, size=(896,)).astype(np.float32))
        ins = {"logits": os.path.join(tmp, "logits.npy"), "bias": os.path.join(tmp, "bias.npy")}
        run(a.moejit, spec, "routing", ins, os.path.join(tmp, "rg"))
        run(a.moejit, spec, "routing", ins, os.path.join(tmp, "rr"), ["--reference"])
        ids_ok = (np.load(os.path.join(tmp, "rg", "ids.npy")) == np.load(os.path.join(tmp, "rr", "ids.npy"))).mean()
        w_err = np.abs(np.load(os.path.join(tmp, "rg", "weights.npy")) - np.load(os.path.join(tmp, "rr", "weights.npy"))).max()
        ok = ids_ok > 0.999 and w_err < 2e-5
        failures += not ok
        print(f"{'PASS' if ok else 'FAIL'} run routing 896/16: {ids_ok:.5f} of ids equal, max weight error {w_err:.2e}")
    print(f"run_npy: {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
