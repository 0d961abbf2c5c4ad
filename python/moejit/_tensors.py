"""Tensor checks: each tensor of a call against the op's declaration (OpSpec::tensors()), before
anything reaches the GPU, with `moejit run`'s and Op::launch's wording.

A call on torch tensors first takes the C++ fast path (TorchFastPath in python/src/torch_fast_path.cpp:
the same checks, in C++, then the launch); what it does not take comes here, which says what is
wrong, or reads what is not torch: anything else is read through __cuda_array_interface__ (CuPy, Numba) or DLPack / the buffer
protocol (NumPy, JAX, ...). Every tensor must be C-contiguous, of the declared dtype and shape
(T, the token count, from the first bound tensor that has it), on the op's CUDA device.
"""
import sys

from . import _moejit
from ._errors import InputError, TensorTypeError, UsageError

# DLPack device types: kDLCPU, kDLCUDA, kDLCUDAHost (pinned), kDLCUDAManaged.
_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13
# An address for a bound tensor of no elements (T = 0): never dereferenced, aligned for any dtype.
_EMPTY_ADDRESS = 256
# __cuda_array_interface__ typestr -> dtype name (little-endian machines: '<' or '|').
_TYPESTR = {"f4": "float32", "f2": "float16", "f8": "float64", "i4": "int32", "i8": "int64", "u2": "uint16",
            "i2": "int16", "u4": "uint32", "u8": "uint64", "i1": "int8", "u1": "uint8", "b1": "bool"}
_DL_NAMES = {"float32": "float32", "float16": "float16", "bfloat16": "bfloat16", "int32": "int32", "int64": "int64"}


def _error(cls, message, tensor="", found="", expected=""):
    e = _moejit._make_error("usage" if cls is UsageError else "input", message, "", tensor, found, expected)
    if type(e) is not cls:
        typed = cls(str(e))
        typed.__dict__.update(e.__dict__)
        e = typed
    return e


def _shape_text(shape):
    return "(" + ", ".join(str(s) for s in shape) + ")"


def _c_contiguous(shape, strides_elems):
    """True for row-major strides (in elements); dimensions of size 1 may have any stride."""
    if strides_elems is None:
        return True
    if 0 in shape:
        return True
    want = 1
    for size, stride in zip(reversed(shape), reversed(strides_elems)):
        if size != 1 and stride != want:
            return False
        want *= size
    return True


class _Info:
    """What a check needs of a non-torch tensor."""

    __slots__ = ("device_type", "device_id", "ptr", "shape", "strides", "dtype")

    def __init__(self, device_type, device_id, ptr, shape, strides, dtype):
        self.device_type, self.device_id, self.ptr = device_type, device_id, ptr
        self.shape, self.strides, self.dtype = shape, strides, dtype


def _cai_info(obj, cai):
    shape = tuple(cai["shape"])
    typestr = cai["typestr"]
    dtype = _TYPESTR.get(typestr[1:], typestr) if typestr[:1] in "<|" else typestr
    strides = cai.get("strides")
    if strides is not None:
        item = int(typestr[2:]) if typestr[2:].isdigit() else 1
        strides = tuple(s // item if s % item == 0 else -1 for s in strides)
    device_id = -1  # unknown: the interface does not say; DLPack's device does where offered
    dev = getattr(obj, "__dlpack_device__", None)
    if dev is not None:
        try:
            device_id = dev()[1]
        except Exception:  # noqa: BLE001 - an exporter that cannot say leaves it unknown
            device_id = -1
    return _Info(_DL_CUDA, device_id, cai["data"][0], shape, strides, dtype)


def _generic_info(obj):
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        return _cai_info(obj, cai)
    try:
        return _Info(*_moejit._describe(obj))
    except TypeError:
        return None


def _device_text(info):
    if info.device_type in (_DL_CPU, _DL_CUDA_HOST):
        return "cpu"
    if info.device_type in (_DL_CUDA, _DL_CUDA_MANAGED):
        return f"cuda:{info.device_id}" if info.device_id >= 0 else "cuda"
    return f"DLPack device type {info.device_type}"


class _Torch:
    """What the fast path needs of torch, looked up once torch is imported (never imports it)."""

    tensor = None
    dtypes = None
    raw_stream = None
    plain_types = None  # torch.Tensor, nn.Parameter: no __torch_function__ of their own
    exchange_api = None  # DLPack's C exchange API of torch.Tensor (torch 2.10+), else None

    @classmethod
    def load(cls):
        torch = sys.modules.get("torch")
        if torch is None or not hasattr(torch, "Tensor"):
            return False
        cls.dtypes = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
                      "int32": torch.int32, "int64": torch.int64}
        getter = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        if getter is None:  # older torch: the public (slower) way
            def getter(device):
                return torch.cuda.current_stream(device).cuda_stream
        cls.raw_stream = staticmethod(getter)
        parameter = getattr(getattr(torch, "nn", None), "Parameter", None)
        cls.plain_types = (torch.Tensor,) + ((parameter,) if isinstance(parameter, type) else ())
        cls.exchange_api = getattr(torch.Tensor, "__dlpack_c_exchange_api__", None)
        if cls.exchange_api is None:  # its first name
            cls.exchange_api = getattr(torch.Tensor, "__c_dlpack_exchange_api__", None)
        cls.tensor = torch.Tensor
        return True


def torch_tensor_type():
    """torch.Tensor where torch is imported, else None (and torch stays unimported)."""
    if _Torch.tensor is None:
        _Torch.load()
    return _Torch.tensor


class TensorChecker:
    """The declared tensors of one op and the checks of a call against them."""

    def __init__(self, op_name, decls, device=0):
        self.op_name = op_name
        self.device = device
        self.decls = list(decls)
        self.names = [d.name for d in self.decls]
        self.index = {d.name: i for i, d in enumerate(self.decls)}
        self.dtypes = [d.dtype for d in self.decls]
        self.token_dims = [d.token_dim for d in self.decls]
        self._fixed = [tuple(d.shape) if d.token_dim is None else None for d in self.decls]
        self._shapes = {}
        self._torch_dtypes = None

    # -- binding ---------------------------------------------------------------------------

    def bind(self, tensors, named):
        """The call's tensors in declaration order: positional ones first, then by name."""
        n = len(self.decls)
        if len(tensors) > n:
            raise _error(UsageError, f"op '{self.op_name}' takes one tensor per declared tensor", "", str(len(tensors)),
                         f"{n} ({', '.join(self.names)})")
        bound = list(tensors) + [None] * (n - len(tensors))
        for name, t in named.items():
            i = self.index.get(name)
            if i is None:
                raise _error(UsageError, f"op '{self.op_name}' has no tensor named '{name}'", name, name,
                             f"one of {', '.join(self.names)}")
            if i < len(tensors):
                raise _error(UsageError, f"op '{self.op_name}': tensor '{name}' given twice", name, name, "each tensor once")
            bound[i] = t
        return bound

    def expected_text(self, i):
        d = self.decls[i]
        return f"{d.name} {d.shape_text()} {d.dtype}"

    def shapes_for(self, tokens):
        shapes = self._shapes.get(tokens)
        if shapes is None:
            if len(self._shapes) >= 256:
                self._shapes.clear()
            shapes = tuple(f if f is not None else tuple(d.shape_for(tokens)) for f, d in zip(self._fixed, self.decls))
            self._shapes[tokens] = shapes
        return shapes

    # -- the checks ------------------------------------------------------------------------

    def check(self, tensors, tokens=None, allow_cpu=False):
        """Checks `tensors` (one per declared tensor, None for an unbound optional one) and returns
        (tokens, addresses, whether any is a CUDA torch tensor: torch's stream then runs the op)."""
        tt = _Torch.tensor if _Torch.tensor is not None else torch_tensor_type()
        if tokens is None:
            tokens = self._infer_tokens(tensors, tt)
        elif isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
            raise _error(InputError, f"op '{self.op_name}': token count out of range", "", str(tokens), "an int, 0 or more")
        shapes = self.shapes_for(tokens)
        ptrs = []
        saw_torch = False
        device = self.device
        for i, t in enumerate(tensors):
            if t is None:
                if not self.decls[i].optional:
                    name = self.names[i]
                    raise _error(InputError, f"op '{self.op_name}': tensor '{name}' is not bound", name, "", self.expected_text(i))
                ptrs.append(0)
                continue
            if tt is not None and isinstance(t, tt):
                if self._torch_dtypes is None:
                    self._torch_dtypes = [_Torch.dtypes[d] for d in self.dtypes]
                if t.is_cuda:
                    saw_torch = True
                    if t.get_device() != device:
                        self._wrong_device(i, f"cuda:{t.get_device()}")
                elif not allow_cpu:
                    self._wrong_device(i, str(t.device))
                if t.dtype is not self._torch_dtypes[i]:
                    self._wrong_dtype(i, str(t.dtype).replace("torch.", ""))
                if t.shape != shapes[i]:
                    self._wrong_shape(i, tuple(t.shape), tokens, shapes[i])
                if not t.is_contiguous():
                    self._not_contiguous(i, t.stride())
                ptrs.append(t.data_ptr() or _EMPTY_ADDRESS)
                continue
            info = _generic_info(t)
            if info is None:
                name = self.names[i]
                raise _error(TensorTypeError, f"op '{self.op_name}': tensor '{name}' is not an array", name, type(t).__name__,
                             "a torch tensor or an object exporting DLPack or __cuda_array_interface__")
            if info.device_type in (_DL_CUDA, _DL_CUDA_MANAGED):
                if info.device_id >= 0 and info.device_id != device:
                    self._wrong_device(i, _device_text(info))
            elif not (allow_cpu and info.device_type in (_DL_CPU, _DL_CUDA_HOST)):
                self._wrong_device(i, _device_text(info))
            want = self.dtypes[i]
            if info.dtype != want and not (want == "bfloat16" and info.dtype == "uint16"):
                self._wrong_dtype(i, info.dtype)
            if info.shape != shapes[i]:
                self._wrong_shape(i, info.shape, tokens, shapes[i])
            if not _c_contiguous(info.shape, info.strides):
                self._not_contiguous(i, info.strides)
            ptrs.append(info.ptr or _EMPTY_ADDRESS)
        return tokens, ptrs, saw_torch

    def _infer_tokens(self, tensors, tt):
        for i, t in enumerate(tensors):
            k = self.token_dims[i]
            if k is None or t is None:
                continue
            if tt is not None and isinstance(t, tt):
                shape = t.shape
            else:
                info = _generic_info(t)
                if info is None:
                    continue  # check() names it
                shape = info.shape
            if len(shape) <= k:
                name = self.names[i]
                raise _error(InputError, f"op '{self.op_name}': tensor '{name}' has too few dimensions", name,
                             _shape_text(shape), self.decls[i].shape_text())
            return int(shape[k])
        raise _error(UsageError, f"op '{self.op_name}': cannot tell the token count", "", "no tensor with a T dimension",
                     "tokens=T")

    def _wrong_device(self, i, found):
        name = self.names[i]
        what = "is a CPU tensor" if found == "cpu" else "is on another device"
        raise _error(InputError, f"op '{self.op_name}': tensor '{name}' {what}", name, found, f"a CUDA tensor on device {self.device}")

    def _wrong_dtype(self, i, found):
        name = self.names[i]
        raise _error(TensorTypeError, f"op '{self.op_name}': tensor '{name}' has the wrong dtype", name, found, self.dtypes[i])

    def _wrong_shape(self, i, found, tokens, want):
        d = self.decls[i]
        raise _error(InputError, f"op '{self.op_name}': tensor '{d.name}' has the wrong shape for T = {tokens}", d.name,
                     _shape_text(found), f"{_shape_text(want)} = {d.shape_text()}")

    def _not_contiguous(self, i, strides):
        name = self.names[i]
        raise _error(InputError, f"op '{self.op_name}': tensor '{name}' is not contiguous", name,
                     f"strides {_shape_text(strides)}", "a C-contiguous (row-major) tensor")


def check_tensors(op, tensors, tokens=None, device=0, allow_cpu=False):
    """Checks `tensors` (a sequence in declaration order, or a dict by name) against `op`'s declared
    tensors (an OpSpec, or a loaded Op) as a call would, and returns (tokens, addresses).
    Raises moejit.InputError / TensorTypeError / UsageError (ValueError, TypeError) naming the op,
    the tensor and what was expected. `allow_cpu` lets CPU arrays through (tests of the other
    checks on a machine with no GPU); a call never does."""
    checker = TensorChecker(op.name, op.tensors(), device)
    if isinstance(tensors, dict):
        bound = checker.bind((), tensors)
    else:
        bound = checker.bind(tuple(tensors), {})
    tokens, ptrs, _ = checker.check(bound, tokens, allow_cpu)
    return tokens, ptrs
