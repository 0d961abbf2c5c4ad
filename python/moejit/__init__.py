"""moejit: JIT-compiled Mixture-of-Experts GPU ops, from Python.

    import moejit
    spec = moejit.load_spec("specs/kimi-k3.json")
    ctx = moejit.Context()                      # device 0
    act = ctx.load(spec.op("experts_act"))      # x [T, 6144] bf16 -> out [T, 3072] bf16
    act(x, out)                                 # torch tensors, on torch's current stream

An op takes one tensor per declared tensor (op.tensors()), positionally or by name, each checked
against its declaration before anything reaches the GPU. `moejit.torch.register(op)` makes it a
torch.library custom op for torch.compile and CUDA graphs. torch is never imported by moejit
itself: `import moejit` works without it.
"""
import os
import sys
from dataclasses import dataclass, field


def _preload_pip_nccl():
    """NOTE: the module needs libnccl.so.2; left alone it loads the CUDA toolkit's, and a torch
    imported after it then finds that (older) NCCL in place of its own pip one and fails on a
    missing symbol. Where the pip NCCL torch uses is installed, it is the one loaded."""
    if "torch" in sys.modules:
        return  # torch's NCCL is loaded already and serves the module too
    import ctypes
    import importlib.util
    try:
        spec = importlib.util.find_spec("nvidia.nccl")
    except (ImportError, ValueError):
        return
    for d in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(d, "lib", "libnccl.so.2")
        if os.path.exists(path):
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            return


_preload_pip_nccl()

from . import _moejit  # noqa: E402
from ._errors import (CacheError, CompileError, DriverError, Error, FileError, InputError, InternalError, NcclError,  # noqa: E402
                      SpecError, TensorTypeError, UsageError)
from ._errors import CLASSES as _CLASSES  # noqa: E402
from ._moejit import DeviceInfo, OpSpec, Spec, TensorDecl, supported_archs  # noqa: E402
from ._tensors import TensorChecker as _TensorChecker  # noqa: E402
from ._tensors import _Torch, check_tensors, torch_tensor_type  # noqa: E402

_moejit._set_error_classes(_CLASSES)

__all__ = [
    "CacheError", "CompileError", "Context", "DeviceInfo", "DriverError", "Error", "FileError", "InputError",
    "InternalError", "MoELayer", "NcclError", "Op", "OpSpec", "Spec", "SpecError", "TensorDecl", "TensorTypeError",
    "UsageError", "WarmupSummary", "check_tensors", "load_spec", "parse_spec", "supported_archs", "warmup",
]


def load_spec(path):
    """Loads and validates a spec file; SpecError names the file, the JSON pointer, what was found
    and what is allowed."""
    return _moejit.load_spec(os.fspath(path))


def parse_spec(text, file="<string>"):
    """Parses spec text (`file` names it in errors)."""
    return _moejit.parse_spec(text, file)


def _stream_handle(stream):
    if isinstance(stream, int):
        return stream
    handle = getattr(stream, "cuda_stream", None)  # torch.cuda.Stream
    if handle is None and hasattr(stream, "__cuda_stream__"):  # the CUDA stream protocol
        handle = stream.__cuda_stream__()[1]
    if handle is None:
        handle = getattr(stream, "ptr", None)  # cupy.cuda.Stream
    if not isinstance(handle, int):
        raise _moejit._make_error("usage", "stream is not a CUDA stream", "", "stream", type(stream).__name__,
                                  "an int handle, a torch.cuda.Stream, or an object with __cuda_stream__")
    return handle


class Op(_moejit.OpCall):
    """A loaded op. Call it with one tensor per declared tensor (tensors(): inputs and outputs, in
    launch order; None or leaving out an optional one leaves it unbound):

        op(x, out)  or  op(x=x, out=out)

    T comes from the first tensor with a token dimension (or tokens=T). The op runs on `stream`
    (an int handle or a stream object), else torch's current stream of the op's device when the
    tensors are torch tensors, else the default stream. Returns the output tensors (one, or a tuple).
    Launch one op object on one stream at a time (load it again for another stream).

    NOTE: the call is C++ (OpCall, python/src/torch_fast_path.cpp): on torch tensors it checks and
    launches there; any other call, or one that does not fit, goes to _call (Python's checks)."""

    def __init__(self, op, context, spec=None):
        super().__init__()
        self._op = op
        self._context = context
        self.spec = spec
        self.device = context.device.ordinal
        self._checker = _TensorChecker(op.name, op.tensors(), self.device)
        self._launch = op._launch
        self._fast = None  # the C++ path of calls on torch tensors, made by the first such call
        self._allow_cpu = False  # tests on machines with no GPU (a recording op) set it
        outputs = tuple(i for i, d in enumerate(self._checker.decls) if d.role == "output")
        self._single_output = outputs[0] if len(outputs) == 1 else None
        self._outputs = outputs

    def _torch_fast_path(self, exchange_api=True):
        """The C++ path of calls on torch tensors; `exchange_api=False` reads each tensor through
        its Python attributes even where torch has DLPack's exchange API (the tests)."""
        if not isinstance(self._op, _moejit.Op) or torch_tensor_type() is None:
            return None  # a stand-in op of the tests, or no torch
        dtypes = [_Torch.dtypes[d.dtype] for d in self._checker.decls]
        api = _Torch.exchange_api if exchange_api else None
        if self._allow_cpu:  # a recording op on a machine with no GPU: CPU torch tensors (device -1)
            return _moejit.TorchFastPath(self._op, dtypes, _Torch.plain_types, api, lambda device: 0, -1)
        return _moejit.TorchFastPath(self._op, dtypes, _Torch.plain_types, api, _Torch.raw_stream, self.device)

    @property
    def name(self):
        return self._op.name

    @property
    def family(self):
        return self._op.family

    @property
    def max_tokens(self):
        return self._op.max_tokens

    def tensors(self):
        """The declared tensors, in launch order."""
        return self._op.tensors()

    def _call(self, *tensors, tokens=None, stream=None, expected_rows=0, **named):
        """op(...) where the C++ fast path does not take it: Python's checks, then the launch."""
        checker = self._checker
        if named or len(tensors) != len(checker.decls):
            tensors = checker.bind(tensors, named)
        t, ptrs, on_torch = checker.check(tensors, tokens, self._allow_cpu)
        if stream is None:
            handle = _Torch.raw_stream(self.device) if on_torch else 0
        else:
            handle = _stream_handle(stream)
        self._launch(ptrs, t, handle, expected_rows)
        if on_torch and self._fast is None:
            self._fast = self._torch_fast_path()
        if self._single_output is not None:
            return tensors[self._single_output]
        return tuple(tensors[i] for i in self._outputs)

    def launch(self, buffers, tokens, stream=0, expected_rows=0, chained=False):
        """Op::launch itself: one (address, bytes) pair per declared tensor ((0, 0): unbound), no
        tensor checks beyond the C++ ones (sizes, alignment, token range)."""
        self._op.launch(buffers, tokens, _stream_handle(stream), expected_rows, chained)

    def register_torch(self, name=None):
        """moejit.torch.register(self, name): a torch.library custom op (torch.ops.moejit.<name>)."""
        from . import torch as moejit_torch
        return moejit_torch.register(self, name)

    def __repr__(self):
        return f"<moejit.Op {self.name} ({self.family}) on device {self.device}>"


class Context:
    """Everything moejit keeps for one GPU: options, device, compiler, cache, loaded modules.
    Raises DriverError without a driver or GPU. Keyword options override the environment's
    (MOEJIT_CACHE_DIR, CUDA_HOME, MOEJIT_JOBS, MOEJIT_PDL)."""

    def __init__(self, device=0, *, cache_dir=None, cuda_home=None, jobs=None, disk_cache=None,
                 programmatic_launch=None):
        self._ctx = _moejit.Context(device, cache_dir=None if cache_dir is None else os.fspath(cache_dir),
                                    cuda_home=None if cuda_home is None else os.fspath(cuda_home), jobs=jobs,
                                    disk_cache=disk_cache, programmatic_launch=programmatic_launch)

    @property
    def device(self):
        return self._ctx.device

    @property
    def cache_dir(self):
        return self._ctx.cache_dir

    def load(self, op):
        """The op's kernels from the memory or disk cache, else compiled by NVRTC (the GIL is
        released meanwhile), loaded on this device."""
        if not isinstance(op, OpSpec):
            raise _moejit._make_error("usage", "Context.load takes an OpSpec (spec.op(name))", "", "", type(op).__name__,
                                      "an OpSpec")
        return Op(self._ctx.load(op), self, op)

    def make_current(self):
        """Makes this device's primary context current on the calling thread."""
        self._ctx.make_current()

    def __repr__(self):
        d = self.device
        return f"<moejit.Context device {d.ordinal} ({d.name}, {d.arch})>"


class MoELayer(Op):
    """A whole MoE layer in one call: routing -> experts -> (a latent_tail op with tp_size 1). Its
    tensors are the router's inputs, the experts' weights and hidden states, the tail's inputs,
    and one output (tensors())."""

    def __init__(self, context, router, experts, tail=None):
        layer = _moejit.MoELayer(context._ctx, router, experts, tail)
        super().__init__(layer, context, None)


@dataclass
class WarmupSummary:
    """What warmup() did: counts by where each contract came from, and every entry."""

    specs: int
    jobs: int
    compiled: int
    from_disk: int
    waited: int
    in_memory: int
    failed: int
    seconds: float
    threads: int
    cache: str
    entries: list = field(default_factory=list)

    @property
    def contracts(self):
        return len(self.entries)

    @property
    def failures(self):
        return [e for e in self.entries if e["source"] == "failed"]


def warmup(paths, jobs=None, archs=None, cache_dir=None, check=True):
    """Compiles every contract of the spec files (or directories of them) into the cache, each key
    once, on `jobs` threads (default: $MOEJIT_JOBS or all cores), as `moejit warmup` does; the GIL
    is released meanwhile. Returns a WarmupSummary; with check=True (default) a failed contract
    raises moejit.Error (a CacheError where every failure was an unsafe cache, else a
    CompileError) carrying the summary as `.summary`."""
    if isinstance(paths, (str, bytes, os.PathLike)):
        paths = [paths]
    raw = _moejit.warmup([os.fspath(p) for p in paths], jobs, list(archs or []), None if cache_dir is None else os.fspath(cache_dir))
    counts = {"compiled": 0, "disk": 0, "waited": 0, "memory": 0, "failed": 0}
    for e in raw["entries"]:
        counts[e["source"]] += 1
    summary = WarmupSummary(specs=raw["specs"], jobs=raw["jobs"], compiled=counts["compiled"], from_disk=counts["disk"],
                            waited=counts["waited"], in_memory=counts["memory"], failed=counts["failed"],
                            seconds=raw["seconds"], threads=raw["threads"], cache=raw["cache"], entries=raw["entries"])
    failures = summary.failures
    if check and failures:
        kind = "cache" if all(e["bad_input"] for e in failures) else "compile"
        first = failures[0]
        err = _moejit._make_error(kind, f"warmup: {len(failures)} of {summary.contracts} contracts failed; the first, "
                                        f"{first['labels'][0]} {first['arch']}: {first['error']}")
        err.summary = summary
        raise err
    return summary


def __getattr__(name):
    # moejit.torch on first use: importing moejit never imports torch.
    if name == "torch":
        import importlib
        return importlib.import_module(".torch", __name__)
    raise AttributeError(f"module 'moejit' has no attribute '{name}'")
