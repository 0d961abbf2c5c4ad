"""The torch side without a GPU (skipped where PyTorch is not installed, as in CI): the fast
path's checks on torch tensors, and moejit.torch.register's custom op -- schema, fake
implementation, torch.compile with no graph break -- around a stand-in op that computes on the
CPU through the addresses a real launch would get."""
import ctypes
import types

import numpy as np
import pytest

import moejit
from conftest import SMALL_SPEC

torch = pytest.importorskip("torch", reason="PyTorch is not installed (the GPU machine has it)")
import moejit.torch  # noqa: E402


def spec_op(name):
    return moejit.load_spec(SMALL_SPEC).op(name)


def test_torch_fast_path_checks():
    router = spec_op("router_grouped")
    good = [torch.zeros(5, 256), torch.zeros(256), torch.zeros(5, 8), torch.zeros(5, 8, dtype=torch.int32)]
    assert moejit.check_tensors(router, good, allow_cpu=True)[0] == 5
    with pytest.raises(moejit.InputError, match="tensor 'logits' is a CPU tensor; found cpu; expected a CUDA tensor on device 0"):
        moejit.check_tensors(router, good)
    bad = list(good)
    bad[3] = bad[3].long()
    with pytest.raises(moejit.TensorTypeError, match="tensor 'ids' has the wrong dtype; found int64; expected int32"):
        moejit.check_tensors(router, bad, allow_cpu=True)
    bad = list(good)
    bad[0] = torch.zeros(256, 5).t()
    with pytest.raises(moejit.InputError, match=r"tensor 'logits' is not contiguous; found strides \(1, 5\)"):
        moejit.check_tensors(router, bad, allow_cpu=True)
    bad = list(good)
    bad[2] = torch.zeros(6, 8)
    with pytest.raises(moejit.InputError, match=r"wrong shape for T = 5; found \(6, 8\); expected \(5, 8\) = \[T, 8\]"):
        moejit.check_tensors(router, bad, allow_cpu=True)
    act = spec_op("act_silu")
    assert moejit.check_tensors(act, [torch.zeros(2, 512, dtype=torch.bfloat16), torch.zeros(2, 256, dtype=torch.bfloat16)],
                                allow_cpu=True)[0] == 2
    with pytest.raises(moejit.TensorTypeError, match="found uint16; expected bfloat16"):
        moejit.check_tensors(act, [torch.zeros(2, 512, dtype=torch.uint16), torch.zeros(2, 256, dtype=torch.bfloat16)],
                             allow_cpu=True)


def _floats(address, count):
    return np.ctypeslib.as_array((ctypes.c_float * count).from_address(address)) if count else np.zeros(0, np.float32)


def stand_in(op_spec, compute):
    """A moejit.Op whose launch runs `compute(tokens, addresses)` on the CPU (CPU tensors allowed)."""
    launches = []

    def launch(ptrs, tokens, stream, expected_rows):
        launches.append((tokens, stream, expected_rows))
        compute(tokens, ptrs)

    native = types.SimpleNamespace(name=op_spec.name, family=op_spec.family, max_tokens=op_spec.max_tokens,
                                   tensors=op_spec.tensors, _launch=launch)
    context = types.SimpleNamespace(device=types.SimpleNamespace(ordinal=0))
    op = moejit.Op(native, context, op_spec)
    op._allow_cpu = True
    op.launches = launches
    return op


def silu_fp32(d):
    def compute(tokens, ptrs):
        x = _floats(ptrs[0], tokens * 2 * d).reshape(tokens, 2 * d)
        out = _floats(ptrs[1], tokens * d).reshape(tokens, d)
        g, u = x[:, :d], x[:, d:]
        out[...] = g / (1 + np.exp(-g)) * u
    return compute


def test_register_schema_and_compile():
    spec = moejit.parse_spec('{"op": "activation", "kind": "silu", "d": 8, "dtype": "fp32"}', "act.json")
    op = stand_in(spec.op("0"), silu_fp32(8))
    f = moejit.torch.register(op, "cpu_test_act")
    assert moejit.torch.register(op, "cpu_test_act") is f
    assert str(f.default._schema) == "moejit::cpu_test_act(Tensor x, int expected_rows=0) -> Tensor"
    x = torch.randn(5, 16)
    want = torch.nn.functional.silu(x[:, :8]) * x[:, 8:]
    assert torch.allclose(f(x), want)
    assert op.launches[-1] == (5, 0, 0)

    def fn(x):
        return f(x * 2) + 1

    compiled = torch.compile(fn, fullgraph=True, dynamic=True)
    assert torch.allclose(compiled(x), fn(x))
    assert torch.allclose(compiled(torch.randn(3, 16)).shape and compiled(x), fn(x))

    other = stand_in(spec.op("0"), silu_fp32(8))
    with pytest.raises(moejit.UsageError, match="already registered for another op"):
        moejit.torch.register(other, "cpu_test_act")
    with pytest.raises(moejit.UsageError, match="identifier"):
        moejit.torch.register(other, "not-a-name")


def test_register_masked_mutates_its_output():
    spec = moejit.parse_spec('{"op": "activation", "kind": "silu", "d": 4, "dtype": "fp32", "layout": "masked", '
                             '"num_experts": 2}', "masked.json")

    def compute(tokens, ptrs):
        e, d = 2, 4
        x = _floats(ptrs[0], e * tokens * 2 * d).reshape(e, tokens, 2 * d)
        counts = np.ctypeslib.as_array((ctypes.c_int32 * e).from_address(ptrs[1]))
        out = _floats(ptrs[2], e * tokens * d).reshape(e, tokens, d)
        for k in range(e):
            n = min(max(int(counts[k]), 0), tokens)
            g, u = x[k, :n, :d], x[k, :n, d:]
            out[k, :n] = g / (1 + np.exp(-g)) * u

    op = stand_in(spec.op("0"), compute)
    f = moejit.torch.register(op, "cpu_test_masked")
    assert str(f.default._schema) == ("moejit::cpu_test_masked(Tensor x, Tensor expert_num_tokens, Tensor(a!) out, "
                                      "int expected_rows=0) -> ()")
    x = torch.randn(2, 3, 8)
    counts = torch.tensor([1, 3], dtype=torch.int32)

    def fn(x, counts, out):
        f(x, counts, out, expected_rows=2)
        return out + 0

    eager_out = torch.full((2, 3, 4), 7.0)
    eager = fn(x, counts, eager_out)
    assert torch.equal(eager[0, 1:], torch.full((2, 4), 7.0)), "rows past an expert's count keep their contents"
    assert op.launches[-1][2] == 2
    compiled_out = torch.full((2, 3, 4), 7.0)
    got = torch.compile(fn, fullgraph=True)(x, counts, compiled_out)
    assert torch.equal(got, eager) and torch.equal(compiled_out, eager)


def test_register_returns_every_whole_output():
    router = spec_op("router_softmax")  # logits -> weights [T, 4] fp32, ids [T, 4] int32

    def compute(tokens, ptrs):
        logits = _floats(ptrs[0], tokens * 64).reshape(tokens, 64)
        weights = _floats(ptrs[1], tokens * 4).reshape(tokens, 4)
        ids = np.ctypeslib.as_array((ctypes.c_int32 * (tokens * 4)).from_address(ptrs[2])).reshape(tokens, 4)
        top = np.argsort(-logits, axis=1, kind="stable")[:, :4]
        ids[...] = top
        weights[...] = np.take_along_axis(logits, top, 1)

    op = stand_in(router, compute)
    f = moejit.torch.register(op, "cpu_test_router")
    assert str(f.default._schema) == "moejit::cpu_test_router(Tensor logits, int expected_rows=0) -> (Tensor, Tensor)"
    logits = torch.randn(6, 64)
    weights, ids = f(logits)
    assert ids.dtype == torch.int32 and weights.shape == (6, 4)
    assert torch.equal(ids.long(), logits.topk(4).indices)
    w2, i2 = torch.compile(lambda l: f(l), fullgraph=True)(logits)
    assert torch.equal(w2, weights) and torch.equal(i2, ids)


def test_torch_imports_after_moejit():
    """moejit first, torch second: both on torch's own NCCL (the module would load the toolkit's)."""
    import os
    import subprocess
    import sys
    code = "import moejit, torch; print(torch.__version__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ)
    assert out.returncode == 0, out.stderr


def test_torch_fast_path_checks_in_cpp(monkeypatch):
    """The C++ path of calls on torch tensors launches what fits and hands the rest to Python's
    checks (here on CPU tensors: a recording op with device -1)."""
    from conftest import recording_op
    op = recording_op(spec_op("router_grouped"))
    op._fast = op._torch_fast_path()
    good = [torch.zeros(5, 256), torch.zeros(256), torch.zeros(5, 8), torch.zeros(5, 8, dtype=torch.int32)]
    calls = []
    check = op._checker.check
    monkeypatch.setattr(op._checker, "check", lambda *a: calls.append(1) or check(*a))
    op(*good, expected_rows=4)
    last = op.native.last
    assert not calls, "Python's checks ran for a call the C++ path takes"
    assert last["tokens"] == 5 and last["expected_rows"] == 4
    assert last["buffers"] == [(t.data_ptr(), t.nbytes) for t in good]
    op(torch.zeros(0, 256), good[1], torch.zeros(0, 8), torch.zeros(0, 8, dtype=torch.int32))
    assert op.native.last["tokens"] == 0 and op.native.last["buffers"][0] == (256, 0)
    assert not calls
    for bad, cls in [(good[:3] + [good[3].long()], moejit.TensorTypeError),
                     ([torch.zeros(256, 5).t()] + good[1:], moejit.InputError),
                     (good[:2] + [torch.zeros(6, 8), good[3]], moejit.InputError)]:
        with pytest.raises(cls):
            op(*bad)
    assert len(calls) == 3 and op.native.last["count"] == 2


def test_torch_fast_path_leaves_optional_tensors_unbound(monkeypatch):
    from conftest import recording_op
    tail = recording_op(spec_op("tail"))
    tail._fast = tail._torch_fast_path()
    monkeypatch.setattr(tail._checker, "check", lambda *a: pytest.fail("Python's checks ran"))
    tensors = [None if d.optional else torch.zeros(d.shape_for(3), dtype=torch.bfloat16) for d in tail.tensors()]
    tail(*tensors)
    assert [b == (0, 0) for b in tail.native.last["buffers"]] == [d.optional for d in tail.tensors()]
