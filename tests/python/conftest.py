"""Shared fixtures of the moejit package's tests. The package is imported from the build tree
(CTest sets PYTHONPATH to build/python) or from wherever `pip install .` put it.

GPU tests take the `gpu` fixture (and `torch_cuda` for PyTorch): where there is no CUDA device
they are skipped with the reason, as the C++ [gpu] tests are.
"""
import functools
import os
import pathlib
import sys
import types

import pytest

SOURCE_DIR = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(SOURCE_DIR / "tests"))
from gpu_probe import no_gpu_reason  # noqa: E402 (re-exported to the tests)
SPECS = SOURCE_DIR / "specs"
SMALL_SPEC = pathlib.Path(__file__).resolve().parent / "specs" / "small.json"


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device; skipped, saying why, where there is none")


def pytest_sessionfinish(session, exitstatus):
    # CTest's python.gpu: where every test was skipped, exit 77 (CTest's "Skipped", as the C++
    # [gpu] tests report it) instead of a pass.
    if os.environ.get("MOEJIT_EXIT_77_IF_ALL_SKIPPED") and exitstatus == 0:
        stats = session.config.pluginmanager.get_plugin("terminalreporter").stats
        if stats.get("skipped") and not stats.get("passed"):
            session.exitstatus = 77


@functools.lru_cache(maxsize=None)
def require_gpu():
    reason = no_gpu_reason()
    if reason:
        pytest.skip(f"[gpu] {reason}; runs on an H200")


def require_torch_cuda():
    require_gpu()
    torch = pytest.importorskip("torch", reason="[gpu] PyTorch is not installed (the GPU machine has it)")
    if not torch.cuda.is_available():
        pytest.skip("[gpu] torch sees no CUDA device")
    return torch


@pytest.fixture
def gpu():
    require_gpu()


@pytest.fixture
def torch_cuda():
    return require_torch_cuda()


@pytest.fixture
def cli():
    """The moejit CLI of this build (MOEJIT_CLI, else build/moejit)."""
    path = pathlib.Path(os.environ.get("MOEJIT_CLI", SOURCE_DIR / "build" / "moejit"))
    if not path.is_file():
        pytest.skip(f"no moejit CLI at {path} (set MOEJIT_CLI)")
    return str(path)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """A cache of the test's own (0700, as moejit requires)."""
    d = tmp_path / "cache"
    d.mkdir(mode=0o700)
    monkeypatch.setenv("MOEJIT_CACHE_DIR", str(d))
    return d


def recording_op(op_spec):
    """A moejit.Op over an op that launches nothing and records each launch (`.native.last`),
    taking CPU arrays: Op.__call__ and Op::launch's own checks, with no GPU."""
    import moejit
    native = moejit._moejit._RecordingOp(op_spec)
    op = moejit.Op(native, types.SimpleNamespace(device=types.SimpleNamespace(ordinal=0)), op_spec)
    op._allow_cpu = True
    op.native = native
    return op
