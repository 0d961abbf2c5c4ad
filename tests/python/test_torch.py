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


def fast_op(name, exchange_api=True, allow_cpu=True):
    """A recording op whose C++ path of torch calls is made (CPU tensors: device -1), and a list
    that counts the calls Python's checks take."""
    from conftest import recording_op
    op = recording_op(spec_op(name))
    op._allow_cpu = allow_cpu
    op._fast = op._torch_fast_path(exchange_api)
    assert op._fast.uses_dlpack == (exchange_api and moejit._tensors._Torch.exchange_api is not None)
    op.python_checks = []
    check = op._checker.check
    op._checker.check = lambda *a: op.python_checks.append(1) or check(*a)
    return op


def router_tensors(t=5):
    return [torch.zeros(t, 256), torch.zeros(256), torch.zeros(t, 8), torch.zeros(t, 8, dtype=torch.int32)]


# Each torch tensor is read through DLPack's exchange API where torch has it, else (and for
# subclasses) through its Python attributes: every test of the C++ path runs both ways.
both_ways = pytest.mark.parametrize("exchange_api", [True, False], ids=["dlpack", "attributes"])


@both_ways
def test_torch_fast_path_checks_in_cpp(exchange_api):
    """The C++ path of calls on torch tensors launches what fits and hands the rest to Python's
    checks (here on CPU tensors: a recording op with device -1)."""
    op = fast_op("router_grouped", exchange_api)
    good = router_tensors()
    weights, ids = op(*good, expected_rows=4)
    last = op.native.last
    assert not op.python_checks, "Python's checks ran for a call the C++ path takes"
    assert weights is good[2] and ids is good[3]
    assert last["tokens"] == 5 and last["expected_rows"] == 4 and last["stream"] == 0
    assert last["buffers"] == [(t.data_ptr(), t.nbytes) for t in good]
    op(torch.zeros(0, 256), good[1], torch.zeros(0, 8), torch.zeros(0, 8, dtype=torch.int32))
    assert op.native.last["tokens"] == 0 and op.native.last["buffers"][0] == (256, 0)
    assert not op.python_checks
    for bad, cls in [(good[:3] + [good[3].long()], moejit.TensorTypeError),
                     ([torch.zeros(256, 5).t()] + good[1:], moejit.InputError),
                     (good[:2] + [torch.zeros(6, 8), good[3]], moejit.InputError)]:
        with pytest.raises(cls):
            op(*bad)
    assert len(op.python_checks) == 3 and op.native.last["count"] == 2


@both_ways
def test_torch_fast_path_binds_by_name(exchange_api):
    op = fast_op("router_grouped", exchange_api)
    good = router_tensors()
    named = dict(zip(["logits", "bias", "weights", "ids"], good))
    weights, ids = op(**named, expected_rows=3)
    assert weights is good[2] and ids is good[3] and op.native.last["expected_rows"] == 3
    op(good[0], good[1], ids=good[3], weights=good[2], tokens=None, stream=None)
    op(**{"".join(name): t for name, t in named.items()})  # names built at run time: not interned
    assert not op.python_checks and op.native.last["count"] == 3
    assert op.native.last["buffers"] == [(t.data_ptr(), t.nbytes) for t in good]


@both_ways
def test_torch_fast_path_hands_other_calls_to_python(exchange_api):
    """tokens=, stream=, and calls Python's binding refuses go to Python, which launches or says
    what is wrong as it would without the C++ path."""
    op = fast_op("router_grouped", exchange_api)
    good = router_tensors()
    op(*good, tokens=5)
    op(*good, stream=1234)
    assert len(op.python_checks) == 2 and op.native.last["count"] == 2 and op.native.last["stream"] == 1234
    for call, message in [(lambda: op(*good, logits=good[0]), "tensor 'logits' given twice"),
                          (lambda: op(*good, scores=good[0]), "has no tensor named 'scores'"),
                          (lambda: op(*good, good[0]), "takes one tensor per declared tensor; found 5")]:
        with pytest.raises(moejit.UsageError, match=message):
            call()
    with pytest.raises(moejit.InputError, match="tensor 'ids' is not bound"):
        op(*good[:3])
    with pytest.raises(moejit.InputError, match="tensor 'ids' is not bound"):
        op(*good[:2], ids=None, weights=good[2])
    assert op.native.last["count"] == 2


def python_error(op, *args, **kwargs):
    with pytest.raises(moejit.Error) as e:
        op(*args, **kwargs)
    return type(e.value), str(e.value)


@both_ways
def test_torch_fast_path_errors_are_pythons(exchange_api):
    """A call the C++ path refuses raises what Python's checks alone raise, by position or by name."""
    fast = fast_op("router_grouped", exchange_api)
    from conftest import recording_op
    python = recording_op(spec_op("router_grouped"))  # no C++ path: CPU tensors never make one
    good = router_tensors()
    bad_cases = [
        good[:3] + [good[3].long()],  # dtype
        [torch.zeros(256, 5).t()] + good[1:],  # not contiguous
        [torch.zeros(5, 255)] + good[1:],  # shape
        good[:2] + [torch.zeros(6, 8), good[3]],  # T disagrees
        [torch.zeros(5)] + good[1:],  # too few dimensions for T
        good[:1] + [torch.zeros(1, 256)] + good[2:],  # a fixed shape's extra dimension
        good[:3] + [[[0] * 8] * 5],  # no array
        good[:1] + [torch.zeros(256, dtype=torch.float64)] + good[2:],
        [good[0].to_sparse()] + good[1:],  # DLPack cannot export it
    ]
    for bad in bad_cases:
        want = python_error(python, *bad)
        assert python_error(fast, *bad) == want
        names = dict(zip(["logits", "bias", "weights", "ids"], bad))
        assert python_error(fast, **names) == want
    assert python._fast is None and fast.native.last["count"] == 0 and python.native.last["count"] == 0


@both_ways
def test_torch_fast_path_refuses_cpu_tensors_on_a_gpu_op(exchange_api):
    op = fast_op("router_grouped", exchange_api, allow_cpu=False)  # device 0
    with pytest.raises(moejit.InputError, match="tensor 'logits' is a CPU tensor; found cpu; expected a CUDA tensor on device 0"):
        op(*router_tensors())
    assert op.python_checks and op.native.last["count"] == 0


@both_ways
def test_torch_fast_path_contiguity_and_address_are_torchs(exchange_api):
    """The C++ path takes a tensor exactly where torch calls it contiguous, at its data_ptr()."""
    op = fast_op("router_grouped", exchange_api)
    good = router_tensors(1)
    views = [torch.zeros(8, 256)[3:4], torch.zeros(256, 1).t(), torch.zeros(256, 3)[:, 1:2].t(),
             torch.zeros(256, 5).t()[:1], torch.zeros(2, 512)[:1, ::2], torch.zeros(1, 256).expand(1, 256),
             torch.zeros(2, 256).expand(2, 2, 256)[0, :1], torch.zeros(2, 256)[:, None, :][1], torch.zeros(1, 1).expand(1, 256)]
    for view in views:
        assert view.shape == (1, 256)
        args = (view,) + tuple(good[1:])
        assert op._fast(args, 0) == view.is_contiguous(), (view.stride(), view.is_contiguous())
        if view.is_contiguous():
            assert op.native.last["buffers"][0] == (view.data_ptr(), 1024)
    empty = torch.zeros(256, 0).t()  # no elements: contiguous whatever the strides
    assert empty.is_contiguous() and op._fast((empty, good[1], torch.zeros(0, 8), torch.zeros(0, 8, dtype=torch.int32)), 0)
    assert not op.python_checks


@both_ways
def test_torch_fast_path_takes_parameters_and_subclasses(exchange_api):
    class Sub(torch.Tensor):
        pass

    op = fast_op("router_grouped", exchange_api)
    good = router_tensors()
    as_parameter = [good[0], torch.nn.Parameter(good[1], requires_grad=False)] + good[2:]
    as_subclass = [good[0].as_subclass(Sub)] + good[1:3] + [good[3].as_subclass(Sub)]
    for tensors in (as_parameter, as_subclass):
        assert op(*tensors)[1] is tensors[3]
        assert op.native.last["buffers"] == [(t.data_ptr(), t.nbytes) for t in good]
    with pytest.raises(moejit.TensorTypeError, match="tensor 'ids' has the wrong dtype"):
        op(*as_subclass[:3], good[3].long().as_subclass(Sub))
    assert len(op.python_checks) == 1


@both_ways
def test_torch_fast_path_raises_launch_errors(exchange_api):
    """Op::launch's own checks, from C++ inside the C++ path: the same error as through Python."""
    from gpu_inputs import make_arrays, to_torch
    op = fast_op("experts", exchange_api)
    decls = {d.name: d for d in op.tensors()}
    big = {n: to_torch(torch, a, decls[n], "cpu") for n, a in make_arrays(op, 65).items()}  # max_tokens is 64
    with pytest.raises(moejit.InputError) as e:
        op(**big)
    assert "token count out of range" in str(e.value) and e.value.expected == "0 to 64 (max_tokens)"
    assert not op.python_checks and op.native.last["count"] == 0
    with pytest.raises(moejit.InputError) as python:
        op(**big, tokens=65)
    assert str(python.value) == str(e.value)


@both_ways
def test_torch_fast_path_leaves_optional_tensors_unbound(exchange_api):
    tail = fast_op("tail", exchange_api)
    tensors = [None if d.optional else torch.zeros(d.shape_for(3), dtype=torch.bfloat16) for d in tail.tensors()]
    outputs = tail(*tensors)  # out, and the two optional outputs left unbound: None
    assert outputs[0] is tensors[[d.role for d in tail.tensors()].index("output")] and outputs[1:] == (None, None)
    assert [b == (0, 0) for b in tail.native.last["buffers"]] == [d.optional for d in tail.tensors()]
    tail(**{d.name: t for d, t in zip(tail.tensors(), tensors) if t is not None})
    assert not tail.python_checks and tail.native.last["count"] == 2


def test_exchange_api_forms():
    """DLPack's exchange API as torch gives it (a capsule; an int in its first versions), and what
    the C++ path refuses to read (it then reads each tensor's Python attributes)."""
    from conftest import recording_op
    moejit._tensors.torch_tensor_type()  # looks torch up
    api = moejit._tensors._Torch.exchange_api
    if api is None:
        pytest.skip(f"torch {torch.__version__} has no DLPack exchange API")
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.argtypes, get.restype = [ctypes.py_object, ctypes.c_char_p], ctypes.c_void_p
    op = recording_op(spec_op("router_grouped"))
    types_ = moejit._tensors._Torch.plain_types
    for form, used in [(api, True), (get(api, b"dlpack_exchange_api"), True), (None, False), (0, False),
                       (torch.zeros(1).__dlpack__(), False), ("api", False)]:
        fast = moejit._moejit.TorchFastPath(op._op, [torch.float32, torch.float32, torch.float32, torch.int32], types_,
                                            form, lambda device: 0, -1)
        assert fast.uses_dlpack == used, form
        assert fast(tuple(router_tensors()), 0)
