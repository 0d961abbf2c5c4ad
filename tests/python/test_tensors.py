"""The tensor checks of a call, on NumPy arrays (DLPack / buffer protocol) and on objects that
export __cuda_array_interface__, with no GPU: the same wording as `moejit run` and Op::launch."""
import pathlib
import subprocess

import numpy as np
import pytest

import moejit
from conftest import SMALL_SPEC

T = 5


@pytest.fixture(scope="module")
def router():
    return moejit.load_spec(SMALL_SPEC).op("router_grouped")  # logits [T, 256] fp32, bias [256], weights, ids


def arrays(t=T):
    return [np.zeros((t, 256), np.float32), np.zeros(256, np.float32), np.zeros((t, 8), np.float32),
            np.zeros((t, 8), np.int32)]


def fails(op, tensors, cls=moejit.InputError, **kw):
    with pytest.raises(cls) as e:
        moejit.check_tensors(op, tensors, **kw)
    return e.value


def test_good_arrays_pass(router):
    tokens, ptrs = moejit.check_tensors(router, arrays(), allow_cpu=True)
    assert tokens == T and len(ptrs) == 4 and all(ptrs)
    by_name = dict(zip(["logits", "bias", "weights", "ids"], arrays()))
    assert moejit.check_tensors(router, by_name, allow_cpu=True)[0] == T
    assert moejit.check_tensors(router, arrays(0), allow_cpu=True)[0] == 0
    assert moejit.check_tensors(router, arrays(3), tokens=3, allow_cpu=True)[0] == 3


def test_cpu_array_is_refused(router):
    e = fails(router, arrays())
    assert isinstance(e, ValueError)
    assert str(e) == ("logits: op 'router_grouped': tensor 'logits' is a CPU tensor; found cpu; "
                      "expected a CUDA tensor on device 0")
    assert (e.pointer, e.found, e.expected) == ("logits", "cpu", "a CUDA tensor on device 0")
    assert "device 3" in fails(router, arrays(), device=3).expected


def test_wrong_dtype_is_a_type_error(router):
    a = arrays()
    a[3] = a[3].astype(np.int64)
    e = fails(router, a, moejit.TensorTypeError, allow_cpu=True)
    assert isinstance(e, TypeError) and isinstance(e, ValueError) and isinstance(e, moejit.InputError)
    assert str(e) == "ids: op 'router_grouped': tensor 'ids' has the wrong dtype; found int64; expected int32"


def test_wrong_shape(router):
    a = arrays()
    a[0] = np.zeros((T, 255), np.float32)
    e = fails(router, a, allow_cpu=True)
    assert str(e) == ("logits: op 'router_grouped': tensor 'logits' has the wrong shape for T = 5; "
                      "found (5, 255); expected (5, 256) = [T, 256]")
    a = arrays()
    a[2] = np.zeros((T + 1, 8), np.float32)  # T disagrees with the logits'
    assert "tensor 'weights' has the wrong shape for T = 5; found (6, 8)" in str(fails(router, a, allow_cpu=True))
    a = arrays()
    a[1] = np.zeros((1, 256), np.float32)
    assert "found (1, 256); expected (256) = [256]" in str(fails(router, a, allow_cpu=True))
    a = arrays()
    a[0] = np.zeros(7, np.float32).reshape(()).reshape(7)[:0].reshape(0) if False else np.float32(1.0).reshape(())
    e = fails(router, a, allow_cpu=True)
    assert "tensor 'logits' has too few dimensions; found (); expected [T, 256]" in str(e)


def test_not_contiguous(router):
    a = arrays()
    a[0] = np.zeros((256, T), np.float32).T
    e = fails(router, a, allow_cpu=True)
    assert str(e) == ("logits: op 'router_grouped': tensor 'logits' is not contiguous; found strides (1, 5); "
                      "expected a C-contiguous (row-major) tensor")
    a = arrays()
    a[2] = np.zeros((T, 16), np.float32)[:, ::2]
    assert "tensor 'weights' is not contiguous" in str(fails(router, a, allow_cpu=True))
    a = arrays(1)
    a[0] = np.zeros((2, 256), np.float32)[:1]  # one row: contiguous whatever the stride
    assert moejit.check_tensors(router, a, allow_cpu=True)[0] == 1


def test_binding_errors(router):
    e = fails(router, arrays()[:3], allow_cpu=True)
    assert str(e) == "ids: op 'router_grouped': tensor 'ids' is not bound; expected ids [T, 8] int32"
    a = arrays()
    a[1] = None  # bias is not optional here
    assert "tensor 'bias' is not bound" in str(fails(router, a, allow_cpu=True))
    e = fails(router, arrays() + [arrays()[0]], moejit.UsageError, allow_cpu=True)
    assert str(e) == "op 'router_grouped' takes one tensor per declared tensor; found 5; expected 4 (logits, bias, weights, ids)"
    e = fails(router, {"logits": arrays()[0], "scores": 1}, moejit.UsageError, allow_cpu=True)
    assert "has no tensor named 'scores'" in str(e) and "one of logits, bias, weights, ids" in str(e)
    a = arrays()
    a[0] = [[1.0] * 256] * T  # a list is no array
    assert "tensor 'logits' is not an array; found list" in str(fails(router, a, moejit.TensorTypeError, allow_cpu=True))
    e = fails(router, arrays(), moejit.InputError, tokens=-1, allow_cpu=True)
    assert "token count out of range" in str(e)


def test_optional_tensor_may_be_left_out():
    tail = moejit.load_spec(SMALL_SPEC).op("tail")
    names = [d.name for d in tail.tensors()]
    optional = [d.name for d in tail.tensors() if d.optional]
    assert optional, names
    tensors = {d.name: np.zeros(d.shape_for(3), np.uint16 if d.dtype == "bfloat16" else d.dtype)
               for d in tail.tensors() if not d.optional}
    tokens, ptrs = moejit.check_tensors(tail, tensors, allow_cpu=True)
    assert tokens == 3 and [p == 0 for p in ptrs] == [n in optional for n in names]


class DeviceArray:
    """A stand-in for a CuPy / Numba array: __cuda_array_interface__ (and DLPack's device)."""

    def __init__(self, shape, typestr, device=0, strides=None, address=0x7F0000000000):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (address, False),
                                         "strides": strides, "version": 3}
        self.device = device

    def __dlpack_device__(self):
        return (2, self.device)


def test_cuda_array_interface(router):
    def device_arrays(dev=0):
        return [DeviceArray((T, 256), "<f4", dev), DeviceArray((256,), "<f4", dev), DeviceArray((T, 8), "<f4", dev),
                DeviceArray((T, 8), "<i4", dev)]

    tokens, ptrs = moejit.check_tensors(router, device_arrays())
    assert tokens == T and ptrs == [0x7F0000000000] * 4
    e = fails(router, device_arrays(1))
    assert str(e) == ("logits: op 'router_grouped': tensor 'logits' is on another device; found cuda:1; "
                      "expected a CUDA tensor on device 0")
    a = device_arrays()
    a[0] = DeviceArray((T, 256), "<f4", strides=(4, 4 * T))
    assert "found strides (1, 5)" in str(fails(router, a))
    a = device_arrays()
    a[3] = DeviceArray((T, 8), "<i8")
    assert "found int64; expected int32" in str(fails(router, a, moejit.TensorTypeError))


def test_bf16_takes_uint16_raw_bits_from_numpy():
    act = moejit.load_spec(SMALL_SPEC).op("act_silu")  # x [T, 512] bf16 -> out [T, 256] bf16
    ok = [np.zeros((2, 512), np.uint16), np.zeros((2, 256), np.uint16)]
    assert moejit.check_tensors(act, ok, allow_cpu=True)[0] == 2
    bad = [np.zeros((2, 512), np.float32), ok[1]]
    assert "found float32; expected bfloat16" in str(fails(act, bad, moejit.TensorTypeError, allow_cpu=True))


def test_same_wording_as_moejit_run(router, cli, tmp_path):
    """`moejit run` and the package say the same of the same wrong tensors."""
    spec = str(SMALL_SPEC)

    def run_error(arrs):
        ins = []
        for name, a in zip(["logits", "bias"], arrs):
            np.save(tmp_path / f"{name}.npy", a)
            ins += ["--in", f"{name}={tmp_path / name}.npy"]
        out = subprocess.run([cli, "run", spec, "--op", "router_grouped", *ins, "--out-dir", str(tmp_path / "out")],
                             capture_output=True, text=True)
        assert out.returncode == 2, out.stderr
        return out.stderr.strip()

    cases = [
        [np.zeros((T, 255), np.float32), np.zeros(256, np.float32)],
        [np.zeros((T, 256), np.float16), np.zeros(256, np.float32)],
    ]
    for case in cases:
        a = arrays()
        a[:2] = case
        with pytest.raises(moejit.InputError) as e:
            moejit.check_tensors(router, a, allow_cpu=True)
        tail = str(e.value).split(": ", 2)[2]  # "tensor 'logits' has the wrong ...; found ...; expected ..."
        assert run_error(case).endswith(tail), (run_error(case), tail)


def test_call_binds_checks_and_launches():
    from conftest import recording_op
    spec = moejit.load_spec(SMALL_SPEC)
    op = recording_op(spec.op("router_grouped"))
    a = arrays()
    weights, ids = op(*a, expected_rows=3)
    assert weights is a[2] and ids is a[3]
    last = op.native.last
    assert last["tokens"] == T and last["expected_rows"] == 3 and last["stream"] == 0 and last["count"] == 1
    assert last["buffers"] == [(x.ctypes.data, x.nbytes) for x in a]
    op(logits=a[0], bias=a[1], weights=a[2], ids=a[3], stream=1234)
    assert op.native.last["stream"] == 1234 and op.native.last["count"] == 2
    op(*a, stream=type("S", (), {"cuda_stream": 99})())
    assert op.native.last["stream"] == 99
    with pytest.raises(moejit.UsageError, match="stream is not a CUDA stream"):
        op(*a, stream="default")
    with pytest.raises(moejit.TensorTypeError):
        op(a[0].astype(np.float16), *a[1:])
    assert op.native.last["count"] == 3, "a refused call launched"
    # Op::launch's own checks, from C++: the experts op's max_tokens is 64
    experts = recording_op(spec.op("experts"))
    from gpu_inputs import make_arrays
    big = make_arrays(experts, 65)
    with pytest.raises(moejit.InputError) as e:
        experts(**big)
    assert "token count out of range" in str(e.value) and e.value.expected == "0 to 64 (max_tokens)"
    # the raw launch: (address, bytes) pairs
    with pytest.raises(moejit.InputError, match="buffer of tensor 'ids' is too small for 5 tokens"):
        op.launch([(x.ctypes.data, x.nbytes) for x in a[:3]] + [(a[3].ctypes.data, 4)], T)
    with pytest.raises(moejit.InputError, match="not aligned to its element"):
        op.launch([(x.ctypes.data + (i == 0), x.nbytes) for i, x in enumerate(a)], T)
    with pytest.raises(moejit.UsageError, match="takes one buffer per tensor"):
        op.launch([], T)


def test_unbound_optional_tensor_is_address_zero():
    from conftest import recording_op
    tail = recording_op(moejit.load_spec(SMALL_SPEC).op("tail"))
    tensors = {d.name: np.zeros(d.shape_for(2), np.uint16) for d in tail.tensors() if not d.optional}
    tail(**tensors)
    optional = [d.optional for d in tail.tensors()]
    assert [b == (0, 0) for b in tail.native.last["buffers"]] == optional
