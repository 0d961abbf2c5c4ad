"""[gpu] Every op family through Python against `moejit run` (the C++ path) on the same .npy
inputs: the outputs must be the same bits, rows an op leaves unwritten included. Also MoELayer
against its ops called one by one, bad tensors refused before launch, T = 0, explicit streams."""
import subprocess

import numpy as np
import pytest

import moejit
from conftest import SMALL_SPEC, require_torch_cuda
from gpu_inputs import make_arrays, to_numpy, to_torch


pytestmark = pytest.mark.gpu

OPS = ["act_silu", "act_situ_fp32", "act_gelu_fp16", "act_swiglu", "act_masked", "router_softmax", "router_grouped",
       "router_bf16", "experts", "experts_bias", "experts_masked", "tail"]
TOKENS = [1, 7, 33]


@pytest.fixture(scope="module")
def spec():
    return moejit.load_spec(SMALL_SPEC)


@pytest.fixture(scope="module")
def ctx():
    require_torch_cuda()
    return moejit.Context()


def run_cli(cli, op, arrays, tmp_path):
    tmp_path.mkdir(parents=True, exist_ok=True)
    args = []
    for d in op.tensors():
        if d.name not in arrays:
            continue
        path = tmp_path / f"{d.name}.in.npy"
        np.save(path, arrays[d.name])
        args += ["--in" if d.role == "input" else "--init", f"{d.name}={path}"]
    out_dir = tmp_path / "out"
    subprocess.run([cli, "run", str(SMALL_SPEC), "--op", op.name, *args, "--out-dir", str(out_dir)], check=True,
                   stdout=subprocess.DEVNULL)
    return {d.name: np.load(out_dir / f"{d.name}.npy") for d in op.tensors() if d.role == "output"}


@pytest.mark.parametrize("name", OPS)
def test_op_equals_moejit_run(torch_cuda, cli, spec, ctx, tmp_path, name):
    torch = torch_cuda
    op_spec = spec.op(name)
    op = ctx.load(op_spec)
    for tokens in TOKENS:
        arrays = make_arrays(op_spec, tokens, seed=tokens)
        want = run_cli(cli, op_spec, arrays, tmp_path / f"T{tokens}")
        decls = {d.name: d for d in op_spec.tensors()}
        tensors = {n: to_torch(torch, a, decls[n]) for n, a in arrays.items()}
        op(**tensors)
        torch.cuda.synchronize()
        for out, expected in want.items():
            got = to_numpy(torch, tensors[out])
            assert got.shape == expected.shape
            assert np.array_equal(got.view(np.uint8), expected.view(np.uint8)), (
                f"{name} T={tokens}: '{out}' differs from moejit run's in "
                f"{int((got.view(np.uint8) != expected.view(np.uint8)).sum())} bytes; contract {op_spec.canonical_json()}")


def test_layer_equals_its_ops(torch_cuda, spec, ctx):
    torch = torch_cuda
    router, experts, tail = spec.op("layer_router"), spec.op("experts"), spec.op("tail")
    for with_tail in (False, True):
        layer = moejit.MoELayer(ctx, router, experts, tail if with_tail else None)
        r, e, t = ctx.load(router), ctx.load(experts), ctx.load(tail)
        for tokens in (1, 13, 64):
            decls = {d.name: d for d in layer.tensors()}
            arrays = make_arrays(layer, tokens, seed=100 + tokens)
            tensors = {n: to_torch(torch, a, decls[n]) for n, a in arrays.items()}
            assert [d.name for d in layer.tensors() if d.role == "output"] == ["out"]
            layer(**tensors)

            weights = torch.empty(tokens, 2, dtype=torch.float32, device="cuda")
            ids = torch.empty(tokens, 2, dtype=torch.int32, device="cuda")
            r(logits=tensors["logits"], weights=weights, ids=ids)
            y = torch.empty(tokens, 256, dtype=torch.bfloat16, device="cuda")
            e(x=tensors["x"], topk_ids=ids, topk_weights=weights, w13=tensors["w13"], w2=tensors["w2"], y=y)
            if with_tail:
                final = torch.empty_like(tensors["out"])
                t(routed=y, shared=tensors["shared"], gamma=tensors["gamma"], w_up=tensors["w_up"], out=final)
            else:
                final = y
            torch.cuda.synchronize()
            assert torch.equal(tensors["out"].view(torch.int16), final.view(torch.int16)), \
                f"MoELayer (tail: {with_tail}) T={tokens} differs from its ops one by one"


def test_bad_tensors_are_refused_before_launch(torch_cuda, spec, ctx):
    torch = torch_cuda
    act = ctx.load(spec.op("act_silu"))  # x [T, 512] bf16 -> out [T, 256] bf16
    x = torch.randn(4, 512, device="cuda").bfloat16()
    out = torch.full((4, 256), 3.0, device="cuda", dtype=torch.bfloat16)
    cases = [
        ((x.cpu(), out), moejit.InputError, "tensor 'x' is a CPU tensor; found cpu; expected a CUDA tensor on device 0"),
        ((x.float(), out), moejit.TensorTypeError, "tensor 'x' has the wrong dtype; found float32; expected bfloat16"),
        ((x[:, :256], out), moejit.InputError, "tensor 'x' has the wrong shape for T = 4"),
        ((torch.randn(512, 4, device="cuda").bfloat16().t(), out), moejit.InputError, "tensor 'x' is not contiguous"),
        ((x,), moejit.InputError, "tensor 'out' is not bound"),
    ]
    if torch.cuda.device_count() > 1:
        cases.append(((x.to("cuda:1"), out), moejit.InputError, "tensor 'x' is on another device; found cuda:1"))
    for args, cls, text in cases:
        with pytest.raises(cls) as e:
            act(*args)
        assert text in str(e.value) and "op 'act_silu'" in str(e.value)
    torch.cuda.synchronize()
    assert bool((out == 3.0).all()), "a refused call wrote its output"


def test_zero_tokens_and_streams(torch_cuda, spec, ctx):
    torch = torch_cuda
    act = ctx.load(spec.op("act_silu"))
    act(torch.empty(0, 512, device="cuda", dtype=torch.bfloat16), torch.empty(0, 256, device="cuda", dtype=torch.bfloat16))
    x = torch.randn(8, 512, device="cuda").bfloat16()
    want = act(x, torch.empty(8, 256, device="cuda", dtype=torch.bfloat16))
    side = torch.cuda.Stream()
    for stream in (side, side.cuda_stream, None):
        out = torch.empty(8, 256, device="cuda", dtype=torch.bfloat16)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            act(x, out, stream=stream)
        side.synchronize()
        assert torch.equal(out.view(torch.int16), want.view(torch.int16))
    # the raw launch: (address, bytes) pairs
    out = torch.empty(8, 256, device="cuda", dtype=torch.bfloat16)
    act.launch([(x.data_ptr(), x.nbytes), (out.data_ptr(), out.nbytes)], 8, torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    assert torch.equal(out.view(torch.int16), want.view(torch.int16))
    with pytest.raises(moejit.InputError, match="too small for 8 tokens"):
        act.launch([(x.data_ptr(), x.nbytes), (out.data_ptr(), out.nbytes // 2)], 8, 0)


@pytest.mark.parametrize("exchange_api", [True, False], ids=["dlpack", "attributes"])
def test_torch_calls_take_torchs_current_stream(torch_cuda, spec, ctx, exchange_api):
    """The C++ path of calls on CUDA tensors, recorded: torch's current stream, the tensors'
    addresses, no Python checks (DLPack's exchange API where torch has it, else the tensors'
    attributes)."""
    torch = torch_cuda
    rec = moejit.Op(moejit._moejit._RecordingOp(spec.op("act_silu")), ctx, spec.op("act_silu"))
    x = torch.randn(8, 512, device="cuda").bfloat16()
    out = torch.empty(8, 256, device="cuda", dtype=torch.bfloat16)
    rec(x, out)  # the first call on CUDA tensors makes the C++ path
    assert rec._fast is not None
    rec._fast = rec._torch_fast_path(exchange_api)
    rec._checker.check = lambda *a: pytest.fail("Python's checks ran")
    side = torch.cuda.Stream()
    for stream in (side, torch.cuda.current_stream()):
        with torch.cuda.stream(stream):
            assert rec(x=x, out=out) is out
        assert rec._op.last["stream"] == stream.cuda_stream
    assert rec._op.last["buffers"] == [(x.data_ptr(), x.nbytes), (out.data_ptr(), out.nbytes)]
