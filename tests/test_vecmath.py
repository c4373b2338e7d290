"""The math of pa.jit's fused CPU loops (polyad/backends/numpy/compiler/vecmath.py) and their threads
(backends/numpy/compiler/fusion_threads.py): errors in ulps against mpmath within the bounds the documentation
states, NumPy's special values, vectorised loops, math="exact" equal to eager bit for bit, math="fast"
equal to the measured functions, the libm fallback for huge trigonometric arguments, the documented
table, and chunked runs equal to serial ones."""

import os
import pathlib
import re
import signal

import numpy as np
import pytest
from helpers import assert_close

import polyad as pa
from polyad import xp as pxp
from polyad.core import dispatch
from polyad.graph.compiler import fuse
from polyad.graph.compiler.fusion import FUSABLE, FusedOp

numba = pytest.importorskip("numba")
pytest.importorskip("mpmath")

from polyad.backends.numpy.compiler import fusion, fusion_threads, vecmath  # noqa: E402 (needs Numba)
from polyad.testing import vecmath_accuracy as accuracy  # noqa: E402

DTYPES = ("float64", "float32")
OPS = sorted(vecmath.FUNCTIONS)
on_numpy = pytest.mark.skipif(
    dispatch.default_backend().name != "numpy", reason="the fused CPU loop runs on NumPy arrays"
)
TABLE = pathlib.Path(__file__).resolve().parent.parent / "docs" / "api" / "jit_accuracy.inc"


@pytest.fixture(autouse=True)
def _loops_compile_at_the_first_call(monkeypatch):
    """These tests check what the fused loop computes: its first call waits for Numba rather than running
    the group's ops while the loop compiles in the background (tests/test_first_call.py checks that)."""
    monkeypatch.setenv("POLYAD_FUSION_COMPILE", "wait")


# ------------------------------------------------------------------------------------------ the functions


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_errors_against_mpmath_are_within_the_bounds(op, dtype):
    for row in accuracy.measure(op, dtype, 250, seed=1):
        assert row.count > 0, row
        assert row.fast <= accuracy.BOUNDS[op], (
            f"{op} {dtype} on {row.label}: {row.fast:.3f} ulp at {row.worst} (bound {accuracy.BOUNDS[op]})"
        )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_special_values_are_numpys(op, dtype):
    if accuracy.numpy_function(op) is None:
        pytest.skip("SciPy (erf's reference) is not installed")
    assert accuracy.special_values(op, dtype) == []


def test_the_coefficients_digest_is_stamped_on_their_readers():
    """Numba caches a function against its own file: the coefficients' digest in each file that reads them
    makes a change of coefficients a change of those files (scripts/vecmath_fit.py writes it)."""
    import hashlib

    folder = pathlib.Path(fusion.__file__).parent
    digest = hashlib.sha1((folder / "vecmath_coefficients.py").read_bytes()).hexdigest()[:16]
    for path in folder.glob("vecmath*.py"):
        if "vecmath_coefficients as C" in path.read_text():
            assert f"# coefficients: {digest}" in path.read_text(), path.name


def test_the_ulp_measure():
    import mpmath

    with mpmath.workdps(40):
        assert accuracy.ulps(1.0, mpmath.mpf(1), "float64") == 0
        assert accuracy.ulps(1.0 + 2.0**-52, mpmath.mpf(1), "float64") == 1
        below = mpmath.mpf(1) - mpmath.mpf(2) ** -54
        assert accuracy.ulps(1.0, below, "float64") == 0.5  # below 1 the ulp is 2**-53
        assert accuracy.ulps(5e-324, mpmath.mpf(0), "float64") == 1  # in subnormal steps
        assert accuracy.ulps(np.inf, mpmath.mpf(10) ** 400, "float64") == 0  # overflow is inf
        assert accuracy.ulps(1.7976931348623157e308, mpmath.mpf(10) ** 400, "float64") == np.inf
        assert accuracy.ulps(float(np.float32(1) + np.float32(2.0**-23)), mpmath.mpf(1), "float32") == 1
        assert accuracy.ulps(0.25, mpmath.mpf(0), "float64", absolute=0.5) == 2.0**51  # in ulps of 1/2


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_every_function_vectorises(op, dtype):
    """A call LLVM cannot vectorise (libm's) keeps the whole loop scalar: vectors in the loop's IR show that
    the function vectorised (compiled in memory: Numba shows no IR of cached code)."""
    run = fusion.op_loop(op, dtype, cache=False)
    run(*[np.linspace(1.1, 1.9, 16)] * (2 if op in ("pow", "logaddexp") else 1))
    ir = run.loop.inspect_llvm(run.loop.signatures[0])
    assert re.search(r"<\d+ x (double|float)>", ir), f"{op} {dtype}: no vector in the loop"


# ------------------------------------------------------------------------------------------ in pa.jit


def w2_gradient(x):
    return pa.grad(lambda v: pxp.sum(pxp.sin(v) * pxp.exp(-(v**2)) + pxp.tanh(v)))(x)


def every_op(x):
    """Every fusable op of the table on ``x`` in (-0.9, 0.9)."""
    a = pxp.sin(x) * pxp.cos(x) + pxp.tan(x)
    b = pxp.exp(x) - pxp.expm1(x) + pxp.log(x + 2.0) + pxp.log1p(x)
    c = pxp.tanh(x) * pxp.sinh(x) / pxp.cosh(x)
    d = pxp.atan(x) + pxp.asin(x) - pxp.acos(x)
    e = pxp.sqrt(x + 1.0) + pxp.pow(x + 2.0, 1.5) + pxp.logaddexp(x, -x) + pxp.special.erf(x)
    f = pxp.asinh(x) + pxp.acosh(x + 2.0) + pxp.atanh(x) + pxp.sign(x) * pxp.abs(x)
    g = pxp.square(x) + pxp.reciprocal(x + 3.0) - pxp.negative(pxp.positive(x)) + x**2
    return a * b + c - d * e, pxp.sum(f + g, axis=0)


def bits_equal(a, b):
    a, b = np.asarray(a), np.asarray(b)
    nan = np.isnan(a)
    return a.dtype == b.dtype and np.array_equal(nan, np.isnan(b)) and np.array_equal(a[~nan], b[~nan]) and (
        np.array_equal(np.signbit(a[~nan]), np.signbit(b[~nan]))
    )  # fmt: skip


@on_numpy
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("f", [w2_gradient, every_op], ids=["w2-gradient", "every-op"])
def test_exact_math_is_eager_bit_for_bit(f, dtype):
    x = np.linspace(-0.9, 0.9, 3000).astype(dtype).reshape(3, 1000)
    jitted = pa.jit(f, math="exact")
    eager = f(x)
    eager = eager if isinstance(eager, tuple) else (eager,)
    for got in (jitted(x), jitted(x)):
        got = got if isinstance(got, tuple) else (got,)
        assert all(bits_equal(g, e) for g, e in zip(got, eager))
    groups = [n for n in jitted.lower(x).fused_graph.nodes if isinstance(n.op, FusedOp)]
    assert groups  # the arithmetic did fuse
    for node in groups:
        members = set(node.op.name[len("fused[") : -1].split(","))
        assert members <= fusion.EXACT | {"sum"}, members


@on_numpy
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_fast_math_is_the_measured_function(op, dtype):
    """A fused loop computes each function exactly as ``op_loop`` (the function the accuracy tests
    measure) does, and so within a few ulps of eager NumPy."""
    function = {"special.erf": pxp.special.erf}.get(op) or getattr(pxp, op)
    binary = op in ("pow", "logaddexp")
    x = np.linspace(0.05, 0.95, 1001).astype(dtype) + (1 if op == "acosh" else 0)
    y = (x[::-1] * 3).astype(dtype)
    args = (x, y) if binary else (x,)
    jitted = pa.jit(lambda *a: function(*a) * 2.0)
    (node,) = jitted.lower(*args).fused_graph.nodes
    assert isinstance(node.op, FusedOp) and node.op.fusion.math == "fast"
    got = jitted(*args)
    assert bits_equal(got, fusion.op_loop(op, dtype)(*args) * np.asarray(2.0, dtype))
    eps = float(np.finfo(dtype).eps)
    assert_close(got, function(*args) * 2.0, rtol=8 * eps, atol=0)


@on_numpy
def test_the_fused_w2_gradient_is_one_vectorised_loop():
    x = np.linspace(-3.0, 3.0, 4096)
    jitted = pa.jit(w2_gradient)
    (node,) = jitted.lower(x).fused_graph.nodes
    kernel = node.op.kernels["cpu"]
    assert "vm.sin(s0)" in kernel.source and "np.sin" not in kernel.source
    v = x
    by_hand = (np.cos(v) - 2 * v * np.sin(v)) * np.exp(-(v**2)) + 1 - np.tanh(v) ** 2
    assert_close(jitted(x), by_hand, rtol=1e-14, atol=1e-15)
    loop = fusion.compile_source(kernel.source, cache=False)
    loop(x.size, x, *kernel.constants, np.empty_like(x))  # the literals are arguments after the inputs
    assert re.search(r"<\d+ x double>", loop.inspect_llvm(loop.signatures[0]))
    assert "gather" not in loop.inspect_asm(loop.signatures[0])  # contiguous loads: the index is >= 0


@on_numpy
def test_huge_trigonometric_arguments_fall_back_to_libm():
    x = np.array([0.5, 1e300, -(2.0**31), 5e9, np.inf, -3.0, np.nan, 2.0**30])
    with np.errstate(invalid="ignore"):
        expected = np.sin(x) * 2.0 + np.cos(x) * np.tan(x)
    got = pa.jit(lambda v: pxp.sin(v) * 2.0 + pxp.cos(v) * pxp.tan(v))(x)
    assert_close(got, expected, rtol=4e-16, atol=0)
    fast_only = fusion.op_loop("sin", "float64")(x, fallback=False)
    assert abs(fast_only[1] - np.sin(1e300)) > 0.1  # what the fallback corrects: no reduction that far


def test_math_is_validated_and_named():
    with pytest.raises(ValueError, match=r"jit\(math='fastest'\): math must be one of 'fast', 'exact'"):
        pa.jit(pxp.sin, math="fastest")
    graph = pa.make_graph(lambda x: pxp.sin(pxp.sin(x)), np.ones(2))
    with pytest.raises(ValueError, match=r"fuse\(math=None\): math must be one of"):
        fuse(graph, "numpy", math=None)


@on_numpy
def test_math_keys_the_compiled_code():
    import pickle

    f = lambda v: pxp.exp(pxp.sin(v)) * v  # noqa: E731
    x = np.linspace(0, 1, 5)
    fast, exact = pa.jit(f), pa.jit(f, math="exact")
    fast_source = fast.lower(x).compiled.source
    assert "fused[sin,exp,multiply]" in str(fast.lower(x).fused_graph)
    assert "fused" not in str(exact.lower(x).fused_graph)  # sin and exp alone: nothing left to fuse
    kernel = next(n for n in fast.lower(x).fused_graph.nodes if isinstance(n.op, FusedOp)).op.kernels["cpu"]
    assert "# math='fast'" in kernel.source and "vm.exp" in kernel.source
    assert fast_source != exact.lower(x).compiled.source
    assert bits_equal(exact(x), f(x))
    again = pickle.loads(pickle.dumps(pa.jit(w2_gradient, math="exact")))
    assert again.math == "exact" and "math='exact'" in repr(again)
    assert bits_equal(again(x), w2_gradient(x))
    # a group of arithmetic only is the same loop in both modes, but keyed apart
    g = lambda v: v * 2.0 + 1.0  # noqa: E731
    sources = [
        next(n for n in pa.jit(g, math=m).lower(x).fused_graph.nodes).op.kernels["cpu"].source
        for m in ("fast", "exact")
    ]
    assert sources[0] != sources[1] and sources[0].replace("'fast'", "'exact'") == sources[1]


def test_every_fusable_function_is_in_the_documented_table():
    text = TABLE.read_text()
    rows = re.findall(
        r"^\s+\* - ``([\w.]+)``\n\s+- (float\d\d)\n\s+- (.+)\n\s+- (\d+)\n\s+- ([\d.]+)", text, re.M
    )
    assert rows, "no rows in the generated table"
    seen = {(op, dtype) for op, dtype, *_ in rows}
    assert seen == {(op, dtype) for op in OPS for dtype in DTYPES}
    for op, dtype, label, _, fast in rows:
        assert float(fast) <= accuracy.BOUNDS[op], (op, dtype, label)
    assert set(vecmath.FUNCTIONS) <= set(FUSABLE)


# ------------------------------------------------------------------------------------------ threads


def test_chunks_cover_the_range_in_aligned_pieces():
    for n, parts in [(1, 2), (64, 2), (1000, 3), (1 << 20, 16), (12345, 7)]:
        pieces = fusion_threads.chunks(n, parts)
        assert pieces[0][0] == 0 and pieces[-1][1] == n and len(pieces) <= parts
        assert all(a[1] == b[0] for a, b in zip(pieces, pieces[1:]))
        assert all(start % fusion_threads.ALIGN == 0 for start, _ in pieces)


def test_thread_count_from_the_environment(monkeypatch):
    monkeypatch.setenv(fusion_threads.ENV_THREADS, "3")
    assert fusion_threads.usable_threads() == 3
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv(fusion_threads.ENV_THREADS, bad)
        with pytest.raises(ValueError, match=r"\$POLYAD_FUSION_THREADS must be a positive integer"):
            fusion_threads.usable_threads()
    monkeypatch.delenv(fusion_threads.ENV_THREADS)
    assert fusion_threads.usable_threads() == min(len(os.sched_getaffinity(0)), numba.get_num_threads())
    saved = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        assert fusion_threads.usable_threads() == 1  # Numba's limit is respected
    finally:
        numba.set_num_threads(saved)


@on_numpy
@pytest.mark.parametrize("f", [w2_gradient, every_op], ids=["w2-gradient", "every-op"])
def test_chunked_runs_equal_serial_ones(f, monkeypatch):
    x = np.linspace(-0.9, 0.9, 3 * fusion_threads.PROBE).reshape(3, -1)
    monkeypatch.setenv(fusion_threads.ENV_THREADS, "3")
    results = {}
    for force in ("serial", "parallel"):
        monkeypatch.setattr(fusion_threads, "FORCE", force)
        out = pa.jit(f)(x)
        results[force] = out if isinstance(out, tuple) else (out,)
    assert all(bits_equal(a, b) for a, b in zip(results["serial"], results["parallel"]))


def test_runner_goes_parallel_from_the_measured_threshold(monkeypatch):
    import threading

    monkeypatch.setenv(fusion_threads.ENV_THREADS, "2")
    monkeypatch.setattr(fusion_threads, "threshold_s", lambda: 1e-3)
    seen = []

    def loop(start, stop):
        seen.append((threading.get_ident(), start, stop))
        return 1

    runner = fusion_threads.Runner()
    n = 4 * fusion_threads.PROBE
    assert runner(loop, n) == 1 and len(seen) == 1  # cost not known yet: serial, and timed
    assert runner.cost is not None
    runner.cost = 1e-3 / n / 2  # half the threshold: serial
    seen.clear()
    assert runner(loop, n) == 1 and len(seen) == 1
    runner.cost = 1e-3 / n * 2  # twice the threshold: two chunks, on two threads
    seen.clear()
    assert runner(loop, n) == 2 and len(seen) == 2 and len({t for t, _, _ in seen}) == 2
    assert sorted((a, b) for _, a, b in seen) == fusion_threads.chunks(n, 2)
    seen.clear()
    assert runner(loop, fusion_threads.PROBE - 1) == 1 and len(seen) == 1  # small calls never split


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_runs_chunks_on_a_pool_of_its_own(monkeypatch):
    monkeypatch.setenv(fusion_threads.ENV_THREADS, "2")
    fusion_threads.run_chunked(lambda a, b: b - a, 1000, 2)  # the parent's pool exists
    pid = os.fork()
    if pid == 0:  # the child: exit status 0 only if both chunks ran (a hang is ended by SIGALRM in 10 s)
        signal.alarm(10)
        try:
            os._exit(0 if fusion_threads.run_chunked(lambda a, b: b - a, 1000, 2) == 1000 else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_calibration_is_measured_once_and_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("POLYAD_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv(fusion_threads.ENV_THREADS, "2")
    monkeypatch.setattr(fusion_threads, "CALIBRATION_SIZES", [1024, 4096, 16384])
    monkeypatch.setattr(fusion_threads, "_STATE", {})
    threshold = fusion_threads.threshold_s()
    path = tmp_path / "fusion" / "threads.json"
    import json

    stored = json.loads(path.read_text())
    assert stored["threshold_s"] == threshold and stored["key"]["threads"] == 2
    assert [row[0] for row in stored["rows"]] == [1024, 4096, 16384][: len(stored["rows"])]
    assert all(serial > 0 and chunked > 0 for _, serial, chunked in stored["rows"])
    # a later process reads the file: no measuring again
    monkeypatch.setattr(fusion_threads, "_STATE", {})
    monkeypatch.setattr(fusion_threads, "calibrate", lambda *a, **k: pytest.fail("calibrated again"))
    assert fusion_threads.threshold_s() == threshold
