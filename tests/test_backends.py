"""Backend selection: POLYAD_BACKEND, set_backend, the backend context manager, and clear errors for
unknown or unavailable backends. Import errors are checked in subprocesses."""

import os
import subprocess
import sys

import pytest

import polyad as pa
from polyad.core import dispatch


def _run(code, **env):
    full = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full)


def test_unknown_backend_fails_at_import_with_choices():
    r = _run("import polyad", POLYAD_BACKEND="jax")
    assert r.returncode != 0
    assert "'jax'" in r.stderr and "numpy" in r.stderr and "array_api_strict" in r.stderr


@pytest.mark.skipif("cupy" in dispatch.usable_backends(), reason="CuPy works here")
def test_cupy_without_gpu_fails_clearly():
    r = _run("import polyad", POLYAD_BACKEND="cupy")
    assert r.returncode != 0
    assert "'cupy' is unavailable" in r.stderr
    assert "numpy" in r.stderr  # the choices that work
    with pytest.raises(RuntimeError, match="cupy"):
        pa.set_backend("cupy")
    assert pa.get_backend() in ("numpy", "array_api_strict")


def test_import_works_without_cupy():
    # cupy is blocked from importing: polyad must still import and run
    code = (
        "import sys; sys.modules['cupy'] = None\n"
        "import polyad as pa, numpy as np\n"
        "print(pa.grad(lambda x: pa.xp.sum(x * x))(np.ones(2)))"
    )
    r = _run(code, POLYAD_BACKEND="numpy")
    assert r.returncode == 0, r.stderr
    assert "[2. 2.]" in r.stdout


def test_import_loads_only_the_default_backend():
    # the others are registered, not imported: their loaders run on first use
    code = (
        "import sys, polyad\n"
        "prefixes = ('polyad.backends.', 'array_api_strict', 'cupy')\n"
        "print(sorted(m for m in sys.modules if m.startswith(prefixes)))"
    )
    r = _run(code, POLYAD_BACKEND="numpy")
    assert r.returncode == 0, r.stderr
    assert "polyad.backends.numpy" in r.stdout
    assert "array_api_strict" not in r.stdout and "cupy" not in r.stdout


def test_backend_context_manager_restores_even_on_error():
    before = pa.get_backend()
    other = "array_api_strict" if before == "numpy" else "numpy"
    with pytest.raises(ZeroDivisionError):
        with pa.backend(other):
            assert pa.get_backend() == other
            assert dispatch.backend_of_array(pa.xp.zeros(2)).name == other
            raise ZeroDivisionError("inside the block")
    assert pa.get_backend() == before


def test_creation_follows_default_backend():
    before = pa.get_backend()
    other = "array_api_strict" if before == "numpy" else "numpy"
    with pa.backend(other):
        x = pa.xp.ones(3)
        assert dispatch.backend_of_array(x).name == other
    x = pa.xp.ones(3)
    assert dispatch.backend_of_array(x).name == before


def test_set_backend_unknown_name():
    with pytest.raises(ValueError, match="valid choices are numpy, cupy, array_api_strict"):
        pa.set_backend("torch")


def test_info_command():
    r = subprocess.run([sys.executable, "-m", "polyad", "info"], capture_output=True, text=True)
    assert r.returncode == 0
    assert "numpy" in r.stdout and "available" in r.stdout
