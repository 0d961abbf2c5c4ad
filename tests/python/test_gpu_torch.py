"""[gpu] torch integration: a registered op in torch.compile (fullgraph: no graph break) and in a
CUDA graph gives eager's bits; a masked op mutates its output in place there too; the README's
Python example runs whole."""
import re

import pytest

import moejit
from conftest import SMALL_SPEC, SOURCE_DIR, require_torch_cuda


pytestmark = pytest.mark.gpu

@pytest.fixture(scope="module")
def ops():
    require_torch_cuda()
    spec = moejit.load_spec(SMALL_SPEC)
    ctx = moejit.Context()
    return {n: ctx.load(spec.op(n)) for n in ("act_silu", "act_masked", "router_grouped")}


def same(torch, a, b):
    """The same shape, dtype and bits."""
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(a.reshape(-1).view(torch.uint8),
                                                                      b.reshape(-1).view(torch.uint8))


def capture(torch, fn, *static):
    """fn(*static) captured in a CUDA graph (after warm-up on a side stream, as torch's docs do)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn(*static)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn(*static)
    return graph, out


def test_compiled_and_graphed_act_equals_eager(torch_cuda, ops):
    torch = torch_cuda
    import moejit.torch
    act = moejit.torch.register(ops["act_silu"], "gpu_act_silu")

    def fn(x):
        return act(x * 2) + 1

    x = torch.randn(33, 512, device="cuda").bfloat16()
    eager = fn(x)
    compiled = torch.compile(fn, fullgraph=True)
    assert same(torch, compiled(x), eager)
    static_x = torch.empty_like(x)
    graph, out = capture(torch, compiled, static_x)
    static_x.copy_(x)
    graph.replay()
    torch.cuda.synchronize()
    assert same(torch, out, eager)
    # torch's own CUDA graphs (cudagraph trees)
    overhead = torch.compile(fn, mode="reduce-overhead", fullgraph=True)
    for _ in range(3):
        got = overhead(x)
    assert same(torch, got, eager)


def test_compiled_router_returns_both_outputs(torch_cuda, ops):
    torch = torch_cuda
    import moejit.torch
    router = moejit.torch.register(ops["router_grouped"], "gpu_router_grouped")
    logits = torch.randn(16, 256, device="cuda")
    bias = torch.randn(256, device="cuda") * 0.1

    def fn(logits, bias):
        weights, ids = router(logits, bias)
        return weights * 2, ids.long()

    eager = fn(logits, bias)
    compiled = torch.compile(fn, fullgraph=True)
    got = compiled(logits, bias)
    assert all(same(torch, g, e) for g, e in zip(got, eager))
    graph, out = capture(torch, compiled, logits, bias)
    graph.replay()
    torch.cuda.synchronize()
    assert all(same(torch, g, e) for g, e in zip(out, eager))


def test_compiled_masked_mutates_in_place(torch_cuda, ops):
    torch = torch_cuda
    import moejit.torch
    masked = moejit.torch.register(ops["act_masked"], "gpu_act_masked")  # x [4, T, 256], counts [4] -> out [4, T, 128]
    x = torch.randn(4, 9, 256, device="cuda").bfloat16()
    counts = torch.tensor([0, 3, 9, 5], dtype=torch.int32, device="cuda")

    def fn(x, counts, out):
        masked(x, counts, out)
        return out * 2

    eager_out = torch.full((4, 9, 128), 7.0, device="cuda", dtype=torch.bfloat16)
    eager = fn(x, counts, eager_out)
    assert bool((eager_out[0] == 7.0).all()) and bool((eager_out[1, 3:] == 7.0).all()), "unwritten rows changed"
    out = torch.full_like(eager_out, 7.0)
    got = torch.compile(fn, fullgraph=True)(x, counts, out)
    assert same(torch, out, eager_out) and same(torch, got, eager)


def test_readme_python_example_runs(torch_cuda, monkeypatch):
    text = (SOURCE_DIR / "README.md").read_text()
    source = "\n".join(re.findall(r"^```python\n(.*?)^```", text, re.S | re.M))
    monkeypatch.chdir(SOURCE_DIR)
    scope = {}
    exec(compile(source, "README.md", "exec"), scope)
    torch = torch_cuda
    torch.cuda.synchronize()
    assert scope["out"].shape == (16, 3072) and scope["y"].shape == (16, 3072)
    assert torch.equal(scope["y"], scope["out"] * 2)
