"""Shared test helpers."""

import contextlib
import glob
import json
import os
import subprocess
import sys
import tracemalloc

import numpy as np
import pytest

import polyad as pa
from polyad import core
from polyad.backends.numpy.compiler import fusion_compile
from polyad.core import dispatch
from polyad.testing.op_table import OP_TABLE, Sampler, float_argnums


def to_numpy(x):
    """A NumPy copy of a backend array, polyad tensor, scalar, dtype or (named)tuple or list of them.

    Arrays go through their backend's ``to_numpy``; a dtype becomes a 0-d zero of it (so that dtypes get
    compared); anything else through ``np.asarray``.
    """
    if isinstance(x, list):
        return [to_numpy(v) for v in x]
    if isinstance(x, tuple):
        return tuple(to_numpy(v) for v in x)
    if isinstance(x, pa.Tensor):
        x = x.concrete()
    backend = dispatch.backend_of_array(x)
    if backend is not None:
        return np.asarray(backend.to_numpy(x))
    owner = _dtype_owner(x)
    if owner is not None:
        return np.asarray(owner.to_numpy(owner.xp.zeros((), dtype=x)))
    return np.asarray(x)


def native_device_type():
    """The device type of the backend under test's own arrays: "cpu" on NumPy, "cuda" on CuPy. Tests of
    kernels chosen by device register theirs for it, so that they test the real choice on every backend."""
    xp = dispatch.default_backend().xp
    return dispatch.device_type(xp.ones(1, dtype=xp.float64))


def _dtype_owner(x):
    """The backend whose namespace has dtype ``x`` (the default backend first), or None."""
    if isinstance(x, int | float | complex | bool | str) or x is None:
        return None

    def same(d):  # compare like with like: libraries warn when their dtypes meet another library's
        if type(d) is type(x):
            return d == x
        return isinstance(x, type) and getattr(d, "type", None) is x  # NumPy's scalar types (np.float64)

    def owns(b):
        return any(same(d) for d in b.compat.__array_namespace_info__().dtypes().values())

    return dispatch.find_backend(owns)


def diff_fn(row, sample):
    """An op-table sample as a function of its floating arguments (the others held fixed), and those
    arguments: ``(fn, args)``."""
    nums = float_argnums(sample)
    f = row.function()

    def fn(*diff):
        args = list(sample.args)
        for n, d in zip(nums, diff):
            args[n] = d
        out = f(*args, **sample.kwargs)
        return tuple(out) if isinstance(out, tuple) else out

    return fn, tuple(sample.args[n] for n in nums)


def run_array_api_consumer(script):
    """Run ``script`` in a subprocess with SCIPY_ARRAY_API=1 (SciPy and scikit-learn read it once, when
    first imported) and the backend under test; it prints one line ``RESULTS<json>``, returned parsed."""
    env = dict(os.environ, SCIPY_ARRAY_API="1")
    proc = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULTS"))
    return json.loads(line[len("RESULTS") :])


def assert_close(got, expected, rtol=1e-7, atol=1e-10):
    got, expected = to_numpy(got), to_numpy(expected)
    if isinstance(expected, tuple | list):
        assert type(got) is type(expected) and len(got) == len(expected)
        for g, e in zip(got, expected):
            assert_close(g, e, rtol, atol)
        return
    assert got.shape == expected.shape, (got.shape, expected.shape)
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, equal_nan=True)


@contextlib.contextmanager
def raises_cleanly(exc, *fragments):
    """pytest.raises that also checks the message names each fragment and the level stack is empty."""
    with pytest.raises(exc) as info:
        yield info
    msg = str(info.value)
    for frag in fragments:
        assert frag in msg, f"{frag!r} not in {msg!r}"
    assert core.current_level() == 0


def _is_array(a):
    return isinstance(a, core.Tensor) or dispatch.backend_of_array(a) is not None


def op_table_array_cases():
    """``pytest.param(row, i)`` for every op-table sample with an array among its arguments."""
    cases, sampler = [], Sampler()
    for row in OP_TABLE:
        for i, sample in enumerate(row.samples(sampler)):
            if any(_is_array(a) for a in sample.args):
                cases.append(pytest.param(row, i, id=f"{row.name}-{sample.name or i}"))
    return cases


def sample_as_function(row, i):
    """``(fn, xs, sample)``: sample ``i`` of ``row`` as a function of its array arguments alone (the other
    arguments baked in), those arrays, and the sample."""
    sample = row.samples(Sampler())[i]
    f = row.function()
    arrays = [k for k, a in enumerate(sample.args) if _is_array(a)]

    def fn(*xs):
        args = list(sample.args)
        for k, x in zip(arrays, xs):
            args[k] = x
        return f(*args, **sample.kwargs)

    return fn, [sample.args[k] for k in arrays], sample


def cupy_kernels_on_stand_ins(monkeypatch):
    """The cupy backend's ``KERNELS`` (``polyad/backends/cupy/kernels.py``), loaded against stand-in
    ``cupy`` and ``cupyx.scipy.{special,fft,linalg}`` modules that compute with NumPy and SciPy: there is no
    GPU here, so this checks what each declared kernel calls and that it gives SciPy's result.

    Returns:
        ``(KERNELS, calls)``: every cupyx function a kernel calls appends ``(name, its type= argument)``
        to ``calls`` (``type`` is None where not given).
    """
    import importlib
    import types

    parts = {part: pytest.importorskip(f"scipy.{part}") for part in ("special", "fft", "linalg")}

    calls = []

    def recording(module):
        def lookup(name):
            f = getattr(module, name)
            return lambda *args, **kw: calls.append((name, kw.get("type"))) or f(*args, **kw)

        return lookup

    cupy = types.ModuleType("cupy")
    cupy.ndarray, cupy.asarray, cupy.ElementwiseKernel = np.ndarray, np.asarray, lambda *a, **k: None
    cupy.sinc = lambda x: calls.append(("sinc", None)) or np.sinc(x)
    cupy.where, cupy.sqrt, cupy.minimum = np.where, np.sqrt, np.minimum
    cupy.broadcast_to, cupy.stack = np.broadcast_to, np.stack
    modules = {
        "cupy": cupy,
        "cupyx": types.ModuleType("cupyx"),
        "cupyx.scipy": types.ModuleType("cupyx.scipy"),
    }
    modules["cupyx"].scipy = modules["cupyx.scipy"]
    for part, scipy_module in parts.items():
        module = types.ModuleType(f"cupyx.scipy.{part}")
        module.__getattr__ = recording(scipy_module)
        setattr(modules["cupyx.scipy"], part, module)
        modules[f"cupyx.scipy.{part}"] = module
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.delitem(sys.modules, "polyad.backends.cupy.kernels", raising=False)
    monkeypatch.delitem(sys.modules, "polyad.backends.cupy.linalg_kernels", raising=False)
    # put back after the test: imported here against the stand-ins, it would hold no kernel
    monkeypatch.delitem(sys.modules, "polyad.backends.cupy.elementwise_kernels", raising=False)
    monkeypatch.setattr(importlib.import_module("polyad.backends.cupy"), "kernels", None, raising=False)
    kernels = importlib.import_module("polyad.backends.cupy.kernels").KERNELS
    monkeypatch.delitem(sys.modules, "polyad.backends.cupy.kernels")
    monkeypatch.delitem(sys.modules, "polyad.backends.cupy.linalg_kernels")
    monkeypatch.delitem(sys.modules, "polyad.backends.cupy.elementwise_kernels")
    return kernels, calls


def start_tracemalloc():
    """``tracemalloc.start()`` once the background compiler (``fusion_compile``) is idle: tracemalloc
    counts every thread's allocations, and a Numba compile an earlier test handed that thread would count
    in this test's peak (seen: the loop-memory tests over their budget after the jit tests on a busy
    machine)."""
    fusion_compile.wait()
    tracemalloc.start()


def polyad_traces():
    """A tracemalloc filter that keeps the allocations of polyad's own files, found by the package's real
    folder: a pattern such as ``*/polyad/*`` also matches a checkout folder named ``polyad`` and so the
    virtual environment inside it (NumPy's caches counted as polyad's, issue 38). The folder is escaped,
    since tracemalloc matches with fnmatch and a path may hold ``[`` or ``*``."""
    folder = os.path.dirname(os.path.abspath(pa.__file__))  # as code objects name their files
    return tracemalloc.Filter(True, os.path.join(glob.escape(folder), "*"))
