#!/usr/bin/env python3
"""What of the bench drivers runs without a GPU or torch: arguments, reading `moejit bench --json`
(a hand-written sample of its format below), the rows and tables each driver builds from it, the
summary, and run.sh's argument check.

  python3 bench/test_drivers.py
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_activation  # noqa: E402
import bench_latent_tail  # noqa: E402
import bench_layer  # noqa: E402
import bench_python  # noqa: E402
import bench_routing  # noqa: E402
import common  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

# `moejit bench --json`, as the lead specified it (one result of each family; the numbers are made up).
SAMPLE = """{
  "spec": "bench/specs/routing.json", "device": "NVIDIA H200", "arch": "sm_90a",
  "copy_GBps": 4190.0, "read_GBps": 4500.0, "hbm_peak_GBps": 4917.0,
  "load_ms": 1.2, "calls": 20, "replays": 7,
  "results": [
    {"op": "deepseek_v3", "family": "routing",
     "op_spec": {"op": "routing", "num_experts": 256, "topk": 8, "n_group": 8, "topk_group": 4, "scoring": "sigmoid",
                 "bias": "fp32", "renormalize": true, "routed_scaling_factor": 2.5, "logits_dtype": "fp32",
                 "ids_dtype": "int32", "single_group_kernel": "auto", "group_score": "top2_sum"},
     "tokens": 16384, "us_per_call": 15.0, "bytes": 17826816, "GBps": 1188.5, "copy_fraction": 0.2837,
     "peak_fraction": 0.2417, "hot": [], "inputs": "normal"},
    {"op": "silu_2048_masked", "family": "activation",
     "op_spec": {"op": "activation", "kind": "silu", "layout": "masked", "d": 2048, "dtype": "bf16", "out_dtype": "bf16",
                 "interleaved": false, "num_experts": 8},
     "tokens": 64, "us_per_call": 3.0, "bytes": 3145760, "GBps": 1048.6, "copy_fraction": 0.25, "peak_fraction": 0.21,
     "hot": ["expert_num_tokens"], "inputs": "half-full"}
  ]
}"""


def fake_run(family_results, copy=4190.0):
    return {"device": "NVIDIA H200", "arch": "sm_90a", "copy_GBps": copy, "read_GBps": 4500.0, "hbm_peak_GBps": 4917.0,
            "results": family_results}


def result(op, tokens, us, nbytes, op_spec=None, hot=(), inputs="normal"):
    return {"op": op, "family": "x", "op_spec": op_spec or {}, "tokens": tokens, "us_per_call": us, "bytes": nbytes,
            "hot": list(hot), "inputs": inputs}


class Common(unittest.TestCase):
    def test_sample_reads(self):
        data = common.load_moejit_json(SAMPLE)
        self.assertEqual(data["hbm_peak_GBps"], 4917.0)
        self.assertEqual(len(data["results"]), 2)
        table = common.by_op_tokens(data)
        self.assertIn(("silu_2048_masked", 64, True, "half-full"), table)

    def test_missing_field_is_an_error(self):
        doc = json.loads(SAMPLE)
        del doc["results"][0]["bytes"]
        with self.assertRaises(ValueError):
            common.load_moejit_json(json.dumps(doc))
        with self.assertRaises(ValueError):
            common.load_moejit_json('{"device": "x", "results": []}')

    def test_yardsticks(self):
        y = common.yardsticks(4000.0, [fake_run([], 4100.0), fake_run([], 4300.0)], 2750.0)
        self.assertAlmostEqual(y["moejit_copy_GBps"], 4200.0)
        self.assertAlmostEqual(y["moejit_over_torch_copy"], 1.05)
        text = common.yardstick_table(y)
        self.assertIn("within 5%", text)
        self.assertIn("never a ceiling", text)
        self.assertIn("NOT within", common.copy_line(common.yardsticks(4000.0, [fake_run([], 3700.0)])))
        no_new_fields = common.yardsticks(4000.0, [{"device": "d", "copy_GBps": 4000.0}])
        self.assertIn("| -", common.yardstick_table(no_new_fields))  # the old format: read and peak unknown

    def test_markdown_table(self):
        text = common.markdown_table(["op", "T", "us"], [["silu", 1, "1.25"], ["situ_7168", 32768, "-"]])
        lines = text.splitlines()
        self.assertEqual(len({len(line) for line in lines}), 1)
        self.assertTrue(lines[1].endswith("-:|"))
        self.assertIn("| situ_7168 |", lines[3])

    def test_formats(self):
        self.assertEqual(common.fmt_num(1.234), "1.23")
        self.assertEqual(common.fmt_num(0.0042), "0.004")
        self.assertEqual(common.fmt_num(123.45), "123.5")
        self.assertEqual(common.fmt_num(1234.5), "1234")
        self.assertEqual(common.fmt_num(None), "-")
        self.assertEqual(common.fmt_pct(0.5), "50.0%")
        self.assertEqual(common.fmt_ratio(2.0), "2.00x")

    def test_fresh_gives_a_new_code_object(self):
        def make(k):
            def f(x):
                return x * k
            return f
        f = make(3)
        g = common.fresh(f)
        self.assertIsNot(f.__code__, g.__code__)
        self.assertEqual(g(2), 6)

    def test_a_failing_anchor_is_none(self):
        self.assertIsNone(common.try_time_us("anchor", lambda: 1 / 0, [()]))

    def test_summary_reads_each_driver(self):
        with tempfile.TemporaryDirectory() as tmp:
            for name in ("routing", "activation"):
                with open(os.path.join(tmp, f"{name}.json"), "w") as f:
                    json.dump({"summary": [f"{name} line"]}, f)
            self.assertEqual(common.summary(tmp), ["routing: routing line", "activation: activation line"])


    def test_set_count_takes_fractional_bytes(self):
        # bench_experts's touched_bytes is an expected count (E (1 - (1 - K/E)^T) experts' bytes)
        l2 = common.l2_bytes
        common.l2_bytes = lambda: 50 << 20
        try:
            n = common.set_count(75.5e6, 20)
            self.assertIsInstance(n, int)
            self.assertEqual(n, 3)  # 150 MiB over 75.5 MB, rounded up
            self.assertEqual(common.set_count(1e12, 20), 1)
            self.assertEqual(common.set_count(1.0, 20), 20)
            self.assertEqual(list(range(common.set_count(3.3e6, 20))), list(range(20)))
        finally:
            common.l2_bytes = l2

    def test_calls_fill_the_clock_window(self):
        self.assertEqual(common.calls_for(12000), 16)  # 192 ms of a 12 ms op
        self.assertEqual(common.calls_for(100000), 3)  # at least 3
        self.assertEqual(common.calls_for(100), 200)  # at most 200
        self.assertEqual(common.calls_for(None), 3)

    def test_clock_keeps_each_windows_samples(self):
        clock = common.Clock()
        self.assertIsNone(clock.mhz())
        # two windows, each with a sample from before it opened (nvidia-smi's first, at idle)
        for window in ([1980, 1400, 1410], [1980, 1430]):
            clock.samples, clock.first, clock.proc = list(window), 1, None
            clock.__exit__(None, None, None)
        self.assertEqual(clock.kept, [1400, 1410, 1430])
        self.assertEqual(clock.mhz(), 1410)
        clock.samples, clock.first = [1700], 1  # none inside: the window's samples all the same
        clock.__exit__(None, None, None)
        self.assertEqual(clock.kept[-1], 1700)

    def test_json_records_the_date_and_gpu(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "out.json")
            common.write_json(path, {"rows": []})
            with open(path) as f:
                stamp = json.load(f)["stamp"]
        self.assertRegex(stamp["date"], r"^\d{4}-\d{2}-\d{2}$")
        self.assertIn("gpu", stamp)
        self.assertIn(stamp["date"], common.stamp_line(stamp))


class Routing(unittest.TestCase):
    def setUp(self):
        spec = json.loads(SAMPLE)["results"][0]["op_spec"]
        self.mj = fake_run([result(m, t, 2.0 + t / 1000, t * 256 * 4 + t * 8 * 8 + 256 * 4, spec)
                            for m in bench_routing.MODELS for t in bench_routing.TOKENS])
        self.torch = {m: {t: {"compile": 30.0, "dynamic": 40.0, "eager": 50.0} for t in bench_routing.TOKENS}
                      for m in bench_routing.MODELS}
        self.y = common.yardsticks(4000.0, [self.mj])

    def test_args(self):
        a = bench_routing.parse_args([])
        self.assertEqual(a.moejit, ".carry/moejit")
        self.assertEqual(a.tokens, [1, 16, 128, 1024, 4096, 16384])
        self.assertEqual(bench_routing.parse_args(["--tokens", "1,8"]).tokens, [1, 8])

    def test_spec_has_every_op(self):
        with open(os.path.join(HERE, "specs", "routing.json")) as f:
            names = {o["name"] for o in json.load(f)["ops"]}
        wanted = {f"{m}{v}" for m in bench_routing.MODELS for v in ("", "_block", "_warp")}
        self.assertEqual(wanted - names, set())

    def test_rows_and_table(self):
        rows = bench_routing.rows_of(self.mj, self.torch, self.y)
        self.assertEqual(len(rows), 30)
        r = next(r for r in rows if r["model"] == "kimi_k3" and r["tokens"] == 16384)
        self.assertAlmostEqual(r["floor_us"], r["bytes"] / 4000e9 * 1e6)
        self.assertAlmostEqual(r["x_floor"], r["moejit_us"] / r["floor_us"])
        self.assertAlmostEqual(r["x_compile"], 30.0 / r["moejit_us"])
        self.assertAlmostEqual(r["peak_fraction"], r["bytes"] / (r["moejit_us"] * 1e-6) / 4917e9)
        lines = bench_routing.table(rows).splitlines()
        self.assertEqual(len(lines), 32)
        self.assertEqual(lines[0].count("|"), len(bench_routing.HEADERS) + 1)
        self.assertIn("Kimi-K3", lines[-1 - 2 * 6])
        self.assertTrue(bench_routing.summary(rows, self.y, [])[1].startswith("DeepSeek-V3: T<=128 at most"))

    def test_rows_without_torch(self):
        rows = bench_routing.rows_of(self.mj, {}, self.y)
        self.assertIsNone(rows[0]["x_compile"])
        self.assertRegex(bench_routing.table(rows).splitlines()[2], r"\| +- \| +- \|$")

    def test_crossover(self):
        spec = json.loads(SAMPLE)["results"][0]["op_spec"]
        res = []
        for t in bench_routing.CROSSOVER_TOKENS:
            res.append(result("deepseek_v3_block", t, 1.0 if t <= 4 else 9.0, 1, spec))
            res.append(result("deepseek_v3_warp", t, 2.0, 1, spec))
        entries, times, text = bench_routing.crossover_of(fake_run(res), ["deepseek_v3"])
        self.assertEqual(entries[0]["crossover_tokens"], 4)
        self.assertEqual((entries[0]["num_experts"], entries[0]["topk"], entries[0]["grouped"]), (256, 8, True))
        self.assertIn("1.00/2.00", text)
        self.assertEqual(len(times), 22)


class Activation(unittest.TestCase):
    def test_args(self):
        a = bench_activation.parse_args([])
        self.assertEqual(a.tokens, [1, 16, 128, 1024, 8192, 32768])
        self.assertEqual(len(a.ops.split(",")), 9)

    def test_real_rows_and_plan(self):
        self.assertEqual(bench_activation.real_rows(8, 64, "half-full"), 256)
        self.assertEqual(bench_activation.real_rows(256, 16, "half-full"), 2048)
        self.assertEqual(bench_activation.real_rows(8, 2048, "few"), 30)
        self.assertEqual(bench_activation.real_rows(256, 256, "few"), 960)
        self.assertEqual(bench_activation.real_rows(8, 4, "few"), 3 + 0 + 4 + 1 + 4 + 4 + 0 + 2)
        self.assertEqual(bench_activation.masked_plan(bench_activation.TOKENS), [30, 256, 960, 2048])

    def test_spec_has_every_op(self):
        with open(os.path.join(HERE, "specs", "activation.json")) as f:
            names = {o["name"] for o in json.load(f)["ops"]}
        wanted = set(bench_activation.DENSE) | {o for ops, _, _ in bench_activation.MASKED for o in ops}
        self.assertEqual(wanted - names, set())

    def test_rows_and_tables(self):
        dense = [result(op, t, 1.0 + t / 100, 6 * t * 2048, {"kind": "silu", "d": 2048}, inputs="uniform")
                 for op in ("silu_2048", "situ_3072") for t in bench_activation.TOKENS + [30, 256, 960, 2048]]
        masked = [result("silu_2048_masked", 64, 4.0, 1, {"num_experts": 8}, inputs="half-full"),
                  result("silu_2048_masked", 64, 3.5, 1, {"num_experts": 8}, hot=["expert_num_tokens"], inputs="half-full"),
                  result("silu_2048_masked", 512, 9.0, 1, {"num_experts": 8}, inputs="half-full"),
                  result("silu_2048_masked", 512, 8.0, 1, {"num_experts": 8}, hot=["expert_num_tokens"], inputs="half-full+hint"),
                  result("silu_2048_masked_e256", 256, 5.0, 1, {"num_experts": 256}, inputs="few")]
        y = common.yardsticks(4000.0, [fake_run(dense)])
        torch_times = {"silu_2048": {t: {"compile": 10.0, "dynamic": 20.0, "eager": 30.0} for t in bench_activation.TOKENS}}
        rows = bench_activation.dense_rows(fake_run(dense), ["silu_2048"], torch_times, y)
        self.assertEqual(len(rows), 10)  # every T of the run, the dense extras included
        self.assertEqual(rows[0]["x_compile"], 10.0 / rows[0]["moejit_us"])
        lines = bench_activation.dense_table(rows).splitlines()
        self.assertEqual(lines[0].count("|"), len(bench_activation.HEADERS) + 1)
        m = bench_activation.masked_rows(common.by_op_tokens(fake_run(dense), fake_run(masked)))
        self.assertEqual(len(m), 4)
        half = next(r for r in m if r["inputs"] == "half-full" and r["t_max"] == 64)
        self.assertEqual((half["real_rows"], half["dense_us"], half["masked_hot_us"]), (256, 1.0 + 256 / 100, 3.5))
        few = next(r for r in m if r["inputs"] == "few")
        self.assertEqual((few["real_rows"], few["dense_us"]), (960, 1.0 + 960 / 100))
        self.assertIn("+", bench_activation.masked_table(m))
        hinted = next(r for r in m if r["inputs"] == "half-full+hint")
        self.assertEqual((hinted["real_rows"], hinted["masked_us"], hinted["dense_us"]), (2048, 8.0, 1.0 + 2048 / 100))
        lines = bench_activation.summary(rows, m, y)
        self.assertIn("masked, half-full, >= 1024 real rows: at worst", lines[-2])
        self.assertIn("masked, half-full+hint, >= 1024 real rows: at worst", lines[-1])


class LatentTail(unittest.TestCase):
    def test_rows_and_table(self):
        text = "NCCL INFO noise\n" + "\n".join(
            json.dumps({"path": p, "tp": 2, "tokens": t, "us": us + t, "w_bytes": wb})
            for p, us, wb in (("base", 40.0, 51380224), ("base-striped", 36.0, 25690112), ("fused", 19.0, 25690112))
            for t in (1, 4, 16, 64))
        ours = bench_latent_tail.parse_tail_lines(text)
        self.assertEqual(len(ours), 12)
        rows = bench_latent_tail.rows_of(2, ours, {1: 43.0, 4: 45.0, 16: 44.0, 64: 53.0}, 4000.0)
        self.assertEqual([r["tokens"] for r in rows], [1, 4, 16, 64])
        self.assertAlmostEqual(rows[0]["fused_floor_us"], 25690112 / 4000e9 * 1e6)
        self.assertAlmostEqual(rows[0]["fused_over_base"], 20.0 / 41.0)
        lines = bench_latent_tail.table(rows).splitlines()
        self.assertEqual(lines[0].count("|"), len(bench_latent_tail.HEADERS) + 1)
        s = bench_latent_tail.summary(rows, 4000.0)
        self.assertIn("tp 2: fused / base at T<=16", s[1])
        self.assertIn("base behind torch at T=16,64", s[1])
        # tp 1 has the base path alone: its lead over torch and its floor.
        one = bench_latent_tail.parse_tail_lines("\n".join(
            json.dumps({"path": "base", "tp": 1, "tokens": t, "us": 15.0 + t / 8, "w_bytes": 51380224}) for t in (1, 64)))
        rows = bench_latent_tail.rows_of(1, one, {1: 27.5, 64: 26.7}, 4000.0)
        self.assertIsNone(rows[0]["fused_us"])
        s = bench_latent_tail.summary(rows, 4000.0)
        self.assertIn("tp 1: base no slower than torch at every T; base 1.18-1.79x its floor", s[1])

    def test_args(self):
        a = bench_latent_tail.parse_args(["--tp", "2,4"])
        self.assertEqual(a.tp, [2, 4])
        self.assertEqual(a.tokens, [1, 4, 9, 16, 24, 32, 48, 64])


class Layer(unittest.TestCase):
    def test_args(self):
        a = bench_layer.parse_args([])
        self.assertEqual(a.tokens, [1, 8, 64, 512])
        self.assertEqual((a.calls, a.replays, a.models), (common.CALLS, common.REPLAYS, ""))

    def test_shipped_layers(self):
        layers = bench_layer.all_layers(bench_layer.SHIPPED)
        by_model = {lay["model"]: lay for lay in layers}
        self.assertEqual(len(by_model), len(layers), "one layer a shipped spec")
        self.assertIn("deepseek-v3", by_model)
        self.assertIn("gpt-oss-120b", by_model)
        k3 = by_model["kimi-k3"]
        self.assertEqual((k3["router"], k3["experts"], k3["tail"]), ("router", "experts_tp1", "tail_tp1"))
        self.assertEqual(bench_layer.label_of(k3), "kimi-k3/experts_tp1+tail_tp1")
        self.assertEqual(bench_layer.label_of(by_model["qwen3-30b-a3b"]), "qwen3-30b-a3b")
        self.assertTrue(all(lay["tail"] is None for m, lay in by_model.items() if m != "kimi-k3"))
        self.assertEqual([lay["model"] for lay in bench_layer.all_layers(bench_layer.SHIPPED, ["kimi-k3", "deepseek-v3"])],
                         ["deepseek-v3", "kimi-k3"])
        with self.assertRaises(SystemExit):
            bench_layer.all_layers(bench_layer.SHIPPED, ["no-such-model"])

    def test_what_moelayer_refuses_is_left_out(self):
        ops = [{"name": "router", "op": "routing", "num_experts": 64, "topk": 4, "scoring": "softmax"},
               {"name": "topk_differs", "op": "experts", "hidden": 512, "intermediate": 256, "num_experts": 64, "topk": 2,
                "activation": {"kind": "silu"}},
               {"name": "ids_differ", "op": "experts", "hidden": 512, "intermediate": 256, "num_experts": 64, "topk": 4,
                "ids_dtype": "int64", "activation": {"kind": "silu"}},
               {"name": "range_differs", "op": "experts", "hidden": 512, "intermediate": 256, "num_experts": 32, "topk": 4,
                "activation": {"kind": "silu"}},
               {"name": "masked", "op": "experts", "layout": "masked", "hidden": 512, "intermediate": 256, "num_experts": 64,
                "activation": {"kind": "silu"}},
               {"name": "experts_tp4", "op": "experts", "hidden": 512, "intermediate": 64, "num_experts": 64, "topk": 4,
                "activation": {"kind": "silu"}},
               {"name": "mapped", "op": "experts", "hidden": 512, "intermediate": 256, "num_experts": 16, "global_experts": 64,
                "topk": 4, "activation": {"kind": "silu"}},
               {"name": "tail_tp2", "op": "latent_tail", "tp_size": 2, "hidden": 1024, "latent": 512},
               {"name": "tail_wide", "op": "latent_tail", "tp_size": 1, "hidden": 1024, "latent": 1024},
               {"name": "tail", "op": "latent_tail", "tp_size": 1, "hidden": 1024, "latent": 512}]
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "m.json")
            with open(path, "w") as f:
                json.dump({"model": "m", "ops": ops}, f)
            layers = bench_layer.layers_of(path)
        self.assertEqual([(lay["experts"], lay["tail"]) for lay in layers], [("mapped", "tail")])
        self.assertEqual((bench_layer.tp_slice("experts_tp8"), bench_layer.tp_slice("experts")), (8, 1))

    def test_touched_experts(self):
        self.assertAlmostEqual(bench_layer.touched_experts(256, 8, 1), 8)
        self.assertAlmostEqual(bench_layer.touched_experts(8, 2, 10000), 8)
        self.assertLess(bench_layer.touched_experts(256, 8, 64), 256)

    def test_rows_table_summary(self):
        k3 = {"model": "kimi-k3", "spec": "k.json", "router": "router", "experts": "experts_tp1", "tail": "tail_tp1"}
        ds = {"model": "deepseek-v3", "spec": "d.json", "router": "router", "experts": "experts", "tail": None}
        rows = [bench_layer.row_of(k3, 1, {"layer": 300.0, "router": 2.0, "experts": 280.0, "tail": 25.0, "sequence": 305.0}, True),
                bench_layer.row_of(k3, 8, {"layer": 900.0, "router": 2.0, "experts": 880.0, "tail": 26.0, "sequence": 904.0}, False),
                bench_layer.row_of(ds, 1, {"layer": 200.0, "router": 2.0, "experts": None, "sequence": 203.0}, True)]
        r = rows[0]
        self.assertEqual(r["sum_us"], 307.0)
        self.assertAlmostEqual(r["layer_over_sum"], 300.0 / 307.0)
        self.assertEqual((r["saving_us"], r["saving_vs_sequence_us"]), (7.0, 5.0))
        self.assertIsNone(rows[2]["sum_us"])  # one op failed: no sum
        self.assertIsNone(rows[2]["tail_us"])
        lines = bench_layer.table(rows).splitlines()
        self.assertEqual(lines[0].count("|"), len(bench_layer.HEADERS) + 1)
        self.assertEqual(len(lines), 5)
        self.assertRegex(lines[2], r"\| +307\.0 \| +0\.98x \| +7\.00 \|")
        s = bench_layer.summary(rows, ["kimi-k3/experts_tp1+tail_tp1 T=512: over the layer's max_tokens (64)"])
        self.assertIn("kimi-k3/experts_tp1+tail_tp1: the layer saves 4.00 to 5.00 us a call", s[0])
        self.assertIn("DIFFERS from the sequence at T=8", s[0])
        self.assertIn("deepseek-v3: the layer saves 3.00 to 3.00 us", s[1])
        self.assertTrue(s[2].startswith("skipped: kimi-k3"))
        json.dumps(rows)


class Python(unittest.TestCase):
    def test_args_and_cases(self):
        a = bench_python.parse_args([])
        self.assertEqual((a.calls, a.batches, a.json), (100, 50, None))
        for spec, name, tokens in bench_python.CASES:
            self.assertTrue(spec.is_file(), spec)
            with open(spec) as f:
                self.assertIn(name, {o.get("name") for o in json.load(f)["ops"]})


class ExpertsPrefill(unittest.TestCase):
    def test_args_and_ops(self):
        import bench_experts_prefill
        a = bench_experts_prefill.parse_args(["--crossover", "1,64"])
        self.assertEqual((a.tokens, a.crossover), ([8192, 16384], [1, 64]))
        with open(a.spec) as f:
            names = {o.get("name") for o in json.load(f)["ops"]}
        for name in a.ops.split(","):
            self.assertIn(name, names)
        self.assertEqual((a.calls, a.replays), (common.CALLS, common.REPLAYS))  # performance.md's N and replays


class Experts(unittest.TestCase):
    def test_torch_rotates_over_the_experts_a_call_reads(self):
        import bench_experts
        op = {"num_experts": 128, "topk": 8, "hidden": 2048, "intermediate": 768}
        self.assertAlmostEqual(bench_experts.touched_bytes(op, 1), 8 * 3 * 2048 * 768 * 2)
        self.assertLess(bench_experts.touched_bytes(op, 4096), 128 * 3 * 2048 * 768 * 2 + 1)

    def test_kernel_names(self):
        self.assertEqual(common.kernel_name("void moejit::experts_gemm1_kernel<moejit_generated::Config, 1, true>(moejit::ExpertsGemmArgs)"),
                         "experts_gemm1_kernel<1, true>")
        self.assertEqual(common.kernel_name("void moejit::experts_prefill_kernel<moejit_generated::Config, 2>(moejit::ExpertsPrefillArgs)"),
                         "experts_prefill_kernel<2>")
        self.assertEqual(common.kernel_name("void moejit::experts_meta_kernel<moejit_generated::Config>(moejit::ExpertsMetaArgs)"),
                         "experts_meta_kernel")

    def test_stages_and_paths(self):
        import bench_experts
        one = {"experts_gemm1_kernel<1, true>": 16.0, "experts_gemm2_one_kernel": 12.0}
        self.assertEqual(bench_experts.stage_times(one),
                         ({"metadata": None, "GEMM1": 16.0, "GEMM2": 12.0, "combine": None}, "one token"))
        decode = {"experts_meta_kernel": 3.0, "experts_gemm1_kernel<1>": 80.0, "experts_gemm2_kernel<1>": 50.0,
                  "experts_combine_kernel": 2.0}
        self.assertEqual(bench_experts.stage_times(decode)[1], "decode")
        prefill = {"experts_count_kernel": 1.0, "experts_scan_kernel": 1.0, "experts_rank_kernel": 2.0,
                   "experts_prefill_kernel<1>": 100.0, "experts_prefill_kernel<2>": 50.0, "experts_combine_kernel": 3.0}
        stages, path = bench_experts.stage_times(prefill)
        self.assertEqual((stages["metadata"], stages["GEMM1"], stages["GEMM2"], path), (4.0, 100.0, 50.0, "prefill"))
        rows = bench_experts.kernel_rows({"qwen3_30b_a3b": {1: one, 8: decode}})
        text = bench_experts.kernel_table(rows)
        self.assertIn("| qwen3_30b_a3b | 1 | one token |", text.replace("  ", " ").replace("  ", " "))
        self.assertEqual(len(text.splitlines()), 4)

    def test_rows_with_the_anchors(self):
        import bench_experts
        run = fake_run([result("qwen3_30b_a3b", 1, 25.0, 75_500_000, inputs="uniform")])
        torch_times = {"qwen3_30b_a3b": {(1, "uniform"): {"grouped": 90.0, "compile": 50.0, "loop": 2400.0}}}
        rows = bench_experts.rows_of([run], torch_times, {"read_GBps": 4500.0})
        self.assertAlmostEqual(rows[0]["x_compile"], 2.0)
        self.assertAlmostEqual(rows[0]["x_grouped"], 3.6)
        self.assertIn("2.00x", bench_experts.table(rows))
        bare = bench_experts.rows_of([run], {}, {"read_GBps": 4500.0})
        self.assertIsNone(bare[0]["x_compile"])


class TuneExperts(unittest.TestCase):
    MODEL = {"groups1": 4, "split1": 2, "groups2": 4, "split2": 1, "ring1": 4, "ring2": 8, "ring_one": 8, "cols1": 128, "n2": 256,
             "band1": 32, "band2": 85}

    def test_grid(self):
        import tune_experts
        self.assertEqual(tune_experts.parse_grid("ring2=8,4,4 groups1=2,1"), {"groups1": [1, 2], "ring2": [4, 8]})
        for bad in ("groups=1", "ring2", "ring2=a", "ring2=", ""):
            with self.assertRaises(SystemExit, msg=bad):
                tune_experts.parse_grid(bad)

    def test_the_compilers_tiles_from_the_contract_text(self):
        import tune_experts
        text = "// ---- op q arch sm_90a key 0\nmoejit-contract 1\nfamily experts\nhidden 2048\ngroups1 4\nsplit1 2\nring2 8\n" \
               "// ---- op q arch sm_90a key 1\nfamily experts_prefill\ngroups1 4\nn2 256\nstages2 4\n"
        self.assertEqual(tune_experts.parse_contract_fields(text), {"groups1": 4, "split1": 2, "ring2": 8, "n2": 256})

    def test_variants_take_the_pair_and_skip_the_model(self):
        import tune_experts
        named = tune_experts.variants("q", {"groups1": [2, 4], "ring2": [4, 8]}, self.MODEL)
        self.assertEqual([n for n, _ in named], ["q@model", "q@groups1:2+split1:2+ring2:4", "q@groups1:2+split1:2+ring2:8",
                                                 "q@groups1:4+split1:2+ring2:4"])
        ops = tune_experts.variant_ops({"name": "q", "op": "experts", "hidden": 2048, "max_tokens": 16384, "tiles": {"ring1": 2}}, named, 64)
        self.assertEqual(ops[0], {"op": "experts", "hidden": 2048, "max_tokens": 64, "name": "q@model"})
        self.assertEqual(ops[1]["tiles"], {"groups1": 2, "split1": 2, "ring2": 4})

    def test_rows_table_and_summary(self):
        import tune_experts
        runs = [fake_run([result("q@model", 8, 130.0, 500_000_000), result("q@ring2:4", 8, 125.0, 500_000_000),
                          result("q@model", 1, 23.0, 76_000_000), result("q@ring2:4", 1, 23.2, 76_000_000)]),
                fake_run([result("q@model", 8, 129.0, 500_000_000), result("q@ring2:4", 8, 126.0, 500_000_000),
                          result("q@model", 1, 23.5, 76_000_000), result("q@ring2:4", 1, 23.0, 76_000_000)])]
        rows = tune_experts.rows_of(runs, {"q": ["q@model", "q@ring2:4"]}, [1, 8])
        fast = next(r for r in rows if r["tokens"] == 8 and r["tiles"] == "ring2:4")
        self.assertTrue(fast["faster_every_round"])
        self.assertAlmostEqual(fast["x_model"], 129.5 / 125.5)
        self.assertAlmostEqual(fast["read_fraction"], 500_000_000 / 126e-6 / 4500e9)
        self.assertFalse(next(r for r in rows if r["tokens"] == 1 and r["tiles"] == "ring2:4")["faster_every_round"])
        text = tune_experts.table(rows)
        self.assertIn("ring2:4 *", text)
        self.assertEqual(len(text.splitlines()), 6)
        self.assertEqual(tune_experts.summary(rows), ["q T=1: best ring2:4 (1.01x the compiler's; not faster in every round)",
                                                      "q T=8: best ring2:4 (1.03x the compiler's; faster in every round)"])


class Scripts(unittest.TestCase):
    def test_help_needs_no_torch(self):
        for driver in ("bench_routing.py", "bench_activation.py", "bench_latent_tail.py", "bench_layer.py", "bench_python.py",
                       "bench_experts_prefill.py", "bench_experts.py", "tune_experts.py"):
            run = subprocess.run([sys.executable, os.path.join(HERE, driver), "--help"], capture_output=True, text=True)
            self.assertEqual(run.returncode, 0, run.stderr)
            self.assertIn("--json", run.stdout)

    def test_run_sh_rejects_unknown_steps(self):
        with tempfile.TemporaryDirectory() as tmp:
            run = subprocess.run(["bash", os.path.join(HERE, "device", "run.sh"), "bogus"], capture_output=True, text=True,
                                 env=dict(os.environ, OUT=tmp))
            self.assertEqual(run.returncode, 2)
            self.assertIn("usage", run.stderr)


if __name__ == "__main__":
    unittest.main()
