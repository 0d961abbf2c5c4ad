"""Whether this machine can run the GPU tests, by test_gpu's rule (a CUDA driver that initializes
and reports a device), for the Python harnesses: tests/python's conftest and tests/gpu/run_npy.py."""
import ctypes


def no_gpu_reason():
    """Why no CUDA device can run a test here (None when one can)."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        return f"no CUDA driver ({e})"
    count = ctypes.c_int(0)
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
        return "no CUDA device here"
    return None
