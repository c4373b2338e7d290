"""Test configuration: the backend under test is POLYAD_BACKEND (``make test`` runs numpy, then
array_api_strict, then dask). Helpers here turn any backend's arrays into NumPy for comparison."""

import pytest

import polyad as pa

if pa.get_backend() == "dask":
    import dask

    # the suite's arrays are small: Dask's thread pool costs more than it gives (tests/test_dask.py's
    # out-of-core test runs in a process of its own, with the threads)
    dask.config.set(scheduler="synchronous")


# Whole loops and graph functions (polyad/control/compiled_loops.py, backends/numpy/compiler/
# graph_function.py) compile in the background once a loop has run 1,000 steps: across the suite's
# thousands of loops, minutes of Numba's CPU beside the tests. tests/test_small_state_loops.py sets the
# thresholds where it checks that path.
if pa.get_backend() == "numpy":
    import importlib

    importlib.import_module("polyad.control.compiled_loops").WHOLE_AFTER = 1 << 62
    importlib.import_module("polyad.backends.numpy.compiler.graph_function").COMPILE_AFTER = 1 << 62


def pytest_report_header(config):
    return f"polyad backend: {pa.get_backend()}"


@pytest.fixture
def xp_backend():
    """The backend's own Array API namespace (the reference for value tests)."""
    from polyad.core import dispatch

    return dispatch.default_backend().xp


def pytest_collection_modifyitems(config, items):
    has_gpu = "cupy" in __import__("polyad.core.dispatch", fromlist=["x"]).usable_backends()
    run_slow = "slow" in (config.getoption("-m") or "")
    for item in items:
        if "cuda" in item.keywords and not has_gpu:
            item.add_marker(pytest.mark.skip(reason="needs CuPy and a CUDA GPU; none on this machine"))
        if "slow" in item.keywords and not run_slow:
            item.add_marker(pytest.mark.skip(reason="slow: runs with -m slow"))


@pytest.fixture
def stand_in():
    """``(native, accelerator)``: the device type of the backend under test's own arrays ("cpu" on NumPy,
    "cuda" on CuPy) and a stand-in type ranked directly above it that its float32 arrays play ("cuda"
    above "cpu"; on CuPy "accel" above "cuda"). Tests of the kernel choice register kernels for these
    two, so that they test the real choice on every backend."""
    from polyad.core import dispatch

    xp = dispatch.default_backend().xp
    native = dispatch.device_type(xp.ones(1, dtype=xp.float64))
    accelerator = "cuda" if native != "cuda" else "accel"
    undo = dispatch.register_device_type(accelerator, lambda a: "float32" in str(a.dtype), above=native)
    try:
        yield native, accelerator
    finally:
        undo()


@pytest.fixture
def fake_cuda():
    """float32 arrays play the part of CUDA arrays (both backends have them): a stand-in device type."""
    from polyad.core import dispatch

    undo = dispatch.register_device_type("cuda", lambda a: "float32" in str(a.dtype))
    try:
        yield
    finally:
        undo()
