"""The package without a GPU: import, specs and their errors, the exception classes and fields,
Context's error where there is no GPU, warmup (NVRTC needs none), the README's Python example."""
import os
import pathlib
import re
import subprocess
import sys
import threading
import types

import pytest

import moejit
from conftest import SMALL_SPEC, SOURCE_DIR, SPECS, no_gpu_reason


def test_imports_without_torch():
    code = "import sys; sys.modules['torch'] = None; import moejit; print(moejit.Context.__name__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ)
    assert out.returncode == 0, out.stderr
    code = "import sys, moejit; assert 'torch' not in sys.modules, 'moejit imported torch'"
    assert subprocess.run([sys.executable, "-c", code], env=os.environ).returncode == 0


def test_load_spec():
    spec = moejit.load_spec(SPECS / "kimi-k3.json")
    assert spec.model == "kimi-k3"
    assert spec.archs == ["sm_90a", "sm_100a"]
    assert "experts_act" in [op.name for op in spec.ops]
    act = spec.op("experts_act")
    assert act.family == "activation"
    assert spec.op("1").name == spec.ops[1].name
    x, out = act.tensors()
    assert (x.name, x.dtype, x.spec_dtype, x.shape, x.token_dim, x.role) == ("x", "bfloat16", "bf16", ("T", 6144), 0, "input")
    assert (out.name, out.shape_text(), out.role, out.optional) == ("out", "[T, 3072]", "output", False)
    assert out.shape_for(5) == [5, 3072] and out.nbytes(5) == 5 * 3072 * 2
    assert '"op":"activation"' in act.canonical_json().replace(" ", "")
    assert x.align == 0  # any element address: the activation has a scalar path
    experts = [op for op in spec.ops if op.family == "experts"][0]
    assert {d.name: d.align for d in experts.tensors()}["w13"] == 16


def test_spec_errors_carry_fields(tmp_path):
    with pytest.raises(moejit.SpecError) as e:
        moejit.parse_spec('{"op": "routing", "num_experts": 64, "topk": 100, "scoring": "softmax"}', "bad.json")
    err = e.value
    assert isinstance(err, ValueError) and isinstance(err, moejit.Error)
    assert (err.kind, err.file, err.pointer, err.bad_input) == ("spec", "bad.json", "/topk", True)
    assert err.found == "100" and err.expected
    assert str(err).startswith("bad.json: /topk: ")

    with pytest.raises(moejit.SpecError) as e:
        moejit.load_spec(tmp_path / "missing.json")
    assert e.value.file.endswith("missing.json")

    with pytest.raises(moejit.UsageError) as e:
        moejit.load_spec(SPECS / "kimi-k3.json").op("nope")
    assert isinstance(e.value, ValueError) and e.value.found == "nope" and "experts_act" in e.value.expected


def test_error_classes_and_format():
    classes = {"spec": moejit.SpecError, "input": moejit.InputError, "usage": moejit.UsageError,
               "compile": moejit.CompileError, "nvrtc": moejit.CompileError, "driver": moejit.DriverError,
               "nccl": moejit.NcclError, "cache": moejit.CacheError, "io": moejit.FileError,
               "internal": moejit.InternalError}
    for kind, cls in classes.items():
        e = moejit._moejit._make_error(kind, "what is wrong", "f.json", "/a/b", "x\ny", "z")
        assert type(e) is cls and e.kind == kind
        # moejit::Error::what(): file: pointer: message; found X; expected Y (values escaped).
        assert str(e) == "f.json: /a/b: what is wrong; found x\\ny; expected z"
        assert (e.file, e.pointer, e.found, e.expected, e.message) == ("f.json", "/a/b", "x\ny", "z", "what is wrong")
        assert e.bad_input == (kind in ("spec", "input", "usage", "cache"))
    assert issubclass(moejit.TensorTypeError, TypeError) and issubclass(moejit.TensorTypeError, ValueError)
    assert moejit.SpecError.__module__ == "moejit"


@pytest.mark.skipif(no_gpu_reason() is None, reason="a GPU is present: Context opens it")
def test_context_without_gpu():
    with pytest.raises(moejit.DriverError) as e:
        moejit.Context()
    assert e.value.kind == "driver" and e.value.call and "no CUDA driver" in str(e.value)


def test_context_rejects_bad_jobs():
    with pytest.raises(moejit.UsageError, match="jobs out of range"):
        moejit.Context(jobs=0)


def _tiny_spec(tmp_path):
    path = tmp_path / "tiny.json"
    path.write_text('{"model": "tiny", "archs": ["sm_90a"], "ops": [{"name": "act", "op": "activation", "kind": "silu", "d": 64}]}')
    return path


def test_warmup_compiles_then_reads_disk_with_the_gil_released(tmp_path, cache_dir):
    spec = _tiny_spec(tmp_path)
    ticks = 0
    done = threading.Event()

    def tick():
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            done.wait(0.001)

    t = threading.Thread(target=tick)
    t.start()
    try:
        first = moejit.warmup([spec], jobs=1)
    finally:
        done.set()
        t.join()
    assert (first.contracts, first.compiled, first.failed, first.specs) == (1, 1, 0, 1)
    assert first.cache.startswith(str(cache_dir)) and first.entries[0]["arch"] == "sm_90a"
    assert first.entries[0]["registers"] > 0 and first.entries[0]["spill_bytes"] == 0
    # NVRTC takes a while; a thread that needs the GIL ran meanwhile.
    assert ticks > 10, f"the GIL was held through warmup ({ticks} ticks in {first.seconds:.2f} s)"
    again = moejit.warmup(str(spec), archs=["sm_90a"])
    assert (again.compiled, again.from_disk) == (0, 1)


def test_warmup_errors(tmp_path, cache_dir):
    spec = _tiny_spec(tmp_path)
    with pytest.raises(moejit.UsageError, match="unsupported arch"):
        moejit.warmup(spec, archs=["sm_1"])
    with pytest.raises(moejit.UsageError, match="jobs out of range"):
        moejit.warmup(spec, jobs=0)
    unsafe = tmp_path / "unsafe"
    unsafe.mkdir()
    unsafe.chmod(0o777)
    with pytest.raises(moejit.CacheError) as e:
        moejit.warmup(spec, cache_dir=unsafe)
    assert e.value.bad_input


def _readme_python():
    text = (SOURCE_DIR / "README.md").read_text()
    blocks = re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)
    assert blocks, "README.md has no ```python block"
    return "\n".join(blocks)


def test_readme_python_example(monkeypatch):
    """The README's Python example compiles; it runs here up to the first thing that needs a GPU
    (where torch is missing a stand-in module serves its import); on the GPU machine it runs whole
    (test_gpu_torch.py)."""
    source = _readme_python()
    code = compile(source, "README.md", "exec")
    if no_gpu_reason() is None:
        pytest.skip("a GPU is present: test_gpu_torch.py runs the example whole")
    try:
        import torch  # noqa: F401
    except ImportError:
        monkeypatch.setitem(sys.modules, "torch", types.ModuleType("torch"))
    monkeypatch.chdir(SOURCE_DIR)
    scope = {}
    with pytest.raises(moejit.DriverError):
        exec(code, scope)
    assert isinstance(scope.get("spec"), moejit.Spec), "the example loads its spec before it opens the GPU"
