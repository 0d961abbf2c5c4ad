"""moejit's exceptions: one class per moejit::Error kind, all under moejit.Error.

Every instance carries the C++ error's fields as attributes (kind, message, file, pointer, call,
code, found, expected, options, log, source; empty when unset) and str() is moejit::Error::what().
Bad input -- a spec, a tensor or an argument -- is also a ValueError (a tensor of the wrong dtype
also a TypeError), so callers can catch either.
"""


class Error(Exception):
    """A moejit::Error. `kind` says what failed: spec, input, usage, compile, nvrtc, driver, nccl,
    cache, io or internal."""

    kind = "internal"
    bad_input = False
    message = file = pointer = call = code = found = expected = options = log = source = ""


class SpecError(Error, ValueError):
    """A spec file is malformed or names an invalid value (file and JSON pointer say where)."""


class InputError(Error, ValueError):
    """A tensor, file or argument given at run time does not fit the op."""


class TensorTypeError(InputError, TypeError):
    """A tensor of the wrong dtype (an InputError, also a TypeError)."""


class UsageError(Error, ValueError):
    """An API misuse: an unknown op name, an unsupported arch, a bad option."""


class CompileError(Error):
    """NVRTC failed: `log`, `options` and the generated `source` say how (a moejit bug)."""


class DriverError(Error):
    """A CUDA driver call failed (`call`, `code`), or there is no driver or GPU."""


class NcclError(Error):
    """A NCCL call failed or a peer did not arrive."""


class CacheError(Error):
    """The cache directory is unsafe (a link in it, another user's, writable by others): refused."""


class FileError(Error, OSError):
    """A filesystem operation failed."""


class InternalError(Error):
    """An invariant of moejit itself broke."""


CLASSES = {
    "spec": SpecError,
    "input": InputError,
    "usage": UsageError,
    "compile": CompileError,
    "nvrtc": CompileError,
    "driver": DriverError,
    "nccl": NcclError,
    "cache": CacheError,
    "io": FileError,
    "internal": InternalError,
}

for _cls in {Error, TensorTypeError, *CLASSES.values()}:
    _cls.__module__ = "moejit"
