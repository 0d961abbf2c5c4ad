"""moejit ops as torch.library custom ops, for torch.compile and CUDA graphs.

    import moejit.torch
    act = ctx.load(spec.op("experts_act"))
    f = moejit.torch.register(act)          # torch.ops.moejit.experts_act
    out = f(x)                              # torch.compile / CUDA graph capture: no graph break

The custom op `moejit::<name>` takes the op's inputs (in declaration order; an optional one may be
None), then the outputs it must mutate, then `expected_rows` (a hint, LaunchHints). Outputs the op
writes whole are allocated by the op and returned (one Tensor or a tuple); outputs it writes in
part -- a masked layout's `out` / `y`, whose rows past an expert's count keep their contents --
and optional outputs are arguments, declared mutated (`Tensor(a!)`), and written in place: pass
them in. A fake (meta) implementation gives torch.compile the shapes without running anything.
The op runs on torch's current stream; the registry keeps the op alive for the process.
"""
import re

import torch

from . import Op
from ._tensors import _error
from ._errors import UsageError

_LIB = torch.library.Library("moejit", "FRAGMENT")
_REGISTERED = {}  # name -> (op, torch op)
_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "int32": torch.int32,
           "int64": torch.int64}


def _default_name(op):
    name = re.sub(r"\W", "_", op.name)
    return name if re.match(r"[A-Za-z_]", name) else f"op_{name}"


class _Signature:
    """How the custom op's arguments map onto the op's declared tensors."""

    def __init__(self, op):
        decls = op.tensors()
        self.decls = decls
        self.inputs = [i for i, d in enumerate(decls) if d.role == "input"]
        self.mutated = [i for i, d in enumerate(decls) if d.role == "output" and (d.keeps_unwritten or d.optional)]
        self.returned = [i for i, d in enumerate(decls) if d.role == "output" and i not in self.mutated]
        self.arguments = self.inputs + self.mutated  # the custom op's tensor arguments, in order

    def schema(self):
        args = []
        for i in self.inputs:
            d = self.decls[i]
            args.append(f"Tensor{'?' if d.optional else ''} {d.name}")
        for n, i in enumerate(self.mutated):
            d = self.decls[i]
            args.append(f"Tensor({_alias(n)}!){'?' if d.optional else ''} {d.name}")
        args.append("int expected_rows=0")
        returns = "()" if not self.returned else "Tensor" if len(self.returned) == 1 else \
            "(" + ", ".join("Tensor" for _ in self.returned) + ")"
        return f"({', '.join(args)}) -> {returns}"

    def reference(self, tensors):
        """(the first tensor with a T dimension, that dimension's index)."""
        for i, t in zip(self.arguments, tensors):
            k = self.decls[i].token_dim
            if t is not None and k is not None and t.dim() > k:
                return t, k
        return None, None

    def new_outputs(self, tensors):
        ref, k = self.reference(tensors)
        if ref is None and self.returned:
            raise _error(UsageError, "cannot tell the token count: no tensor with a T dimension", "", "", "tokens from an input")
        outs = []
        for i in self.returned:
            d = self.decls[i]
            shape = [ref.shape[k] if s == "T" else s for s in d.shape]
            outs.append(torch.empty(shape, dtype=_DTYPES[d.dtype], device=ref.device))
        return outs


def _alias(n):
    letters = "abcdefghijklmnopqrstuvwxyz"
    return letters[n % 26] + ("" if n < 26 else str(n // 26))


def _split(sig, args, kwargs):
    names = [sig.decls[i].name for i in sig.arguments] + ["expected_rows"]
    values = list(args) + [None] * (len(names) - len(args))
    if len(args) < len(names):
        values[-1] = 0
    for name, value in kwargs.items():
        values[names.index(name)] = value
    return values[:-1], int(values[-1])


def _returned(outs):
    if not outs:
        return None
    return outs[0] if len(outs) == 1 else tuple(outs)


def register(op, name=None):
    """Registers the loaded op (an Op or MoELayer) as the custom op torch.ops.moejit.<name> (name
    defaults to the op's) and returns it. Registering the same op again returns the same custom
    op; another op under a registered name is a UsageError."""
    if not isinstance(op, Op):
        raise _error(UsageError, "moejit.torch.register takes a loaded op (Context.load, MoELayer)", "",
                     type(op).__name__, "a moejit.Op")
    name = name or _default_name(op)
    if not re.fullmatch(r"[A-Za-z_]\w*", name):
        raise _error(UsageError, "a torch op name must be an identifier", "", name, "letters, digits and _")
    if name in _REGISTERED:
        registered, torch_op = _REGISTERED[name]
        if registered is op:
            return torch_op
        raise _error(UsageError, f"torch op 'moejit::{name}' is already registered for another op", "", name,
                     "another name (register(op, name=...))")
    sig = _Signature(op)
    _LIB.define(name + sig.schema())

    def run(*args, **kwargs):
        tensors, expected_rows = _split(sig, args, kwargs)
        outs = sig.new_outputs(tensors)
        ordered = [None] * len(sig.decls)
        for i, t in zip(sig.arguments, tensors):
            ordered[i] = t
        for i, t in zip(sig.returned, outs):
            ordered[i] = t
        op(*ordered, expected_rows=expected_rows)
        return _returned(outs)

    def fake(*args, **kwargs):
        tensors, _ = _split(sig, args, kwargs)
        return _returned(sig.new_outputs(tensors))

    # NOTE: CPU too, so that a CPU tensor gets moejit's own error (a CUDA tensor expected), not
    # torch's "no kernel for CPU".
    _LIB.impl(name, run, "CUDA")
    _LIB.impl(name, run, "CPU")
    torch.library.register_fake(f"moejit::{name}", fake, lib=_LIB)
    torch_op = getattr(torch.ops.moejit, name)
    _REGISTERED[name] = (op, torch_op)
    return torch_op
