"""First calls of pa.jit (issue 23, item 3): Python float arguments are traced, weakly typed, so new values
do not trace again (polyad/api/_weak_floats.py); fused CPU loops compile in the background while the
group's ops run as NumPy calls (backends/numpy/compiler/fusion_compile.py), groups of the same structure
share one loop, and the kernel cache on disk is keyed by all the loop's code depends on. Values are
checked against eager code; no timing is asserted here (scripts/bench.py --first-call measures)."""

import threading

import numpy as np
import pytest
from helpers import assert_close, to_numpy

import polyad as pa
from polyad import xp as pxp
from polyad.core import dispatch
from polyad.graph.compiler.fusion import FusedOp

BACKEND = dispatch.default_backend()
xb = BACKEND.xp
on_numpy = pytest.mark.skipif(BACKEND.name != "numpy", reason="the Numba loop runs on NumPy arrays")


def arr(values, dtype="float64"):
    return xb.asarray(np.asarray(values, dtype=dtype))


def heat(u, dt, steps=5, centre=4):
    """Explicit heat steps on a grid, boundary held: the 64x64 solver of the issue, shorter."""
    for _ in range(steps):
        lap = u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2] - centre * u[1:-1, 1:-1]
        inner = u[1:-1, 1:-1] + dt * lap
        middle = pxp.concat([u[1:-1, :1], inner, u[1:-1, -1:]], axis=1)
        u = pxp.concat([u[:1, :], middle, u[-1:, :]], axis=0)
    return u


# ------------------------------------------------------------------------------------------ float arguments


def test_fifty_floats_trace_once_and_give_eagers_values():
    traces = []

    def solver(u, dt):
        traces.append(dt)
        return heat(u, dt)

    f = pa.jit(solver)
    u = arr(np.random.default_rng(0).random((16, 16)))
    for dt in np.linspace(0.01, 0.2, 50):
        dt = float(dt)
        assert_close(to_numpy(f(u, dt)), to_numpy(heat(u, dt)), rtol=1e-13, atol=1e-15)
    assert len(traces) == 1 and f.cache_info().misses == 1 and f.cache_info().hits == 49
    # the trace saw a traced value, not the first number
    assert not isinstance(traces[0], float)


def test_a_float_meets_a_float32_array_as_it_does_eagerly():
    f = pa.jit(lambda x, a: x * a + a * a - 1.5)
    x = arr([0.1, 0.7, 3.0], "float32")
    for a in (0.1, 1e-3, 7.3):
        got, expected = f(x, a), x * a + a * a - 1.5
        assert to_numpy(got).dtype == np.float32
        np.testing.assert_array_equal(to_numpy(got), to_numpy(expected))  # the same roundings
    assert f.cache_info().misses == 1


def test_python_arithmetic_on_a_float_stays_weak_and_functions_of_it_do_not():
    """As eagerly: ``dt * dt - dt / 2`` is a Python float (it takes the array's dtype where it meets one),
    ``xp.exp(-dt)`` a float64 array (which promotes a float32 one)."""
    f = pa.jit(lambda x, a: (x * (a * a - a / 2.0) ** 2, x * pxp.exp(-a), pxp.asarray(a) + x))
    x = arr([0.1, 0.7, 3.0], "float32")
    for a in (0.7, 0.2):
        eager = (x * (a * a - a / 2.0) ** 2, x * pxp.exp(pxp.asarray(-a)), pxp.asarray(a) + x)
        for got, expected in zip(f(x, a), eager):
            assert to_numpy(got).dtype == to_numpy(expected).dtype
            assert_close(to_numpy(got), to_numpy(expected), rtol=1e-7)
    assert f.cache_info().misses == 1


def test_a_float_alone_is_a_default_float_array():
    f = pa.jit(lambda x, a: (x + 1, a * 2.0))
    _, doubled = f(arr([1.0]), 0.25)
    assert to_numpy(doubled).shape == () and to_numpy(doubled).dtype == np.float64
    assert float(to_numpy(doubled)) == 0.5


def test_a_branch_on_a_float_argument_is_refused_and_static_keeps_it():
    def relu_or_not(x, a):
        return x if a > 0 else -x

    with pytest.raises(pa.ConcretizationError, match="static_argnums"):
        pa.jit(relu_or_not)(arr([1.0]), 0.5)
    f = pa.jit(relu_or_not, static_argnums=1)
    assert_close(to_numpy(f(arr([1.0]), 0.5)), np.array([1.0]))
    assert_close(to_numpy(f(arr([1.0]), -0.5)), np.array([-1.0]))
    assert f.cache_info().misses == 2  # a static float keys the cache by its value


def test_ints_stay_part_of_the_signature():
    traces = []

    def power(x, n):
        traces.append(n)
        out = x
        for _ in range(n - 1):  # a Python count: needs the int itself
            out = out * x
        return out

    f = pa.jit(power)
    assert_close(to_numpy(f(arr([2.0]), 3)), np.array([8.0]))
    assert_close(to_numpy(f(arr([2.0]), 4)), np.array([16.0]))
    assert traces == [3, 4]


def test_transforms_of_a_jitted_function_with_a_float_argument():
    def f(x, a):
        return pxp.sin(x) * a + a * a

    j = pa.jit(f)
    x = arr([0.1, 0.5, 0.9])
    xn = to_numpy(x)
    assert_close(to_numpy(pa.grad(lambda v: pxp.sum(j(v, 0.3)))(x)), np.cos(xn) * 0.3, rtol=1e-13)
    batch = arr(np.stack([xn, 2 * xn]))
    got = pa.vmap(j, in_dims=(0, None))(batch, 0.7)
    assert_close(to_numpy(got), np.sin(to_numpy(batch)) * 0.7 + 0.49, rtol=1e-13)


def test_a_float_handed_out_by_a_transform_keeps_its_derivative():
    """``float(t)`` inside grad is the tensor's number: passed to a jitted function, the derivative flows
    through it (the jitted graph is replayed on the tensor)."""
    j = pa.jit(lambda x, a: pxp.sin(x) * a + a * a)
    x = arr([0.1, 0.5, 0.9])
    got = pa.grad(lambda t: pxp.sum(j(x, float(t))))(arr(0.25))
    expected = np.sum(np.sin(to_numpy(x))) + 2 * 0.25 * 3  # d/da of sum(sin(x) a + a^2) over 3 elements
    assert_close(to_numpy(got), expected, rtol=1e-13)


def test_a_float_inside_a_jitted_loop_keeps_the_carrys_dtype():
    def steps(u, dt):
        return pa.fori_loop(0, 3, lambda i, v: v + dt * pxp.sin(v), u)

    f = pa.jit(steps)
    u = arr([0.5, 1.0, 2.0], "float32")
    for dt in (0.1, 0.2):
        got, expected = f(u, dt), steps(u, dt)
        assert to_numpy(got).dtype == np.float32
        assert_close(to_numpy(got), to_numpy(expected), rtol=1e-6)
    assert f.cache_info().misses == 1


# ------------------------------------------------------------------------------------- background compile


@pytest.fixture
def gated(monkeypatch):
    """The CPU loops compile only once ``gate`` is set; ``runs`` counts the calls of compiled loops (the
    call on empty arrays that compiles one included) and ``texts`` the sources compiled."""
    pytest.importorskip("numba")
    from polyad.backends.numpy.compiler import fusion, fusion_compile

    assert fusion_compile.wait(120)  # loops of earlier tests compile with the real compiler, uncounted
    real = fusion.compile_source
    state = {"gate": threading.Event(), "runs": [0], "texts": []}

    def slow(text, cache=True):
        assert state["gate"].wait(30), "the test never opened the gate"
        loop = real(text, cache)
        state["texts"].append(text)

        def counted(*args):
            state["runs"][0] += 1
            return loop(*args)

        return counted

    monkeypatch.setattr(fusion, "compile_source", slow)
    monkeypatch.setenv("POLYAD_FUSION_COMPILE", "background")
    return state


@on_numpy
def test_the_first_call_runs_the_groups_ops_while_the_loop_compiles(gated):
    from polyad.backends.numpy.compiler import fusion_compile

    def f(x):  # a constant of its own: no other test has compiled this loop
        return pxp.exp(pxp.sin(x) * 1.23456789123) + x * x

    j = pa.jit(f)
    x = np.linspace(-1.0, 1.0, 101)
    (node,) = j.lower(x).fused_graph.nodes
    assert isinstance(node.op, FusedOp)
    first = j(x)  # the loop cannot compile yet: the group's ops ran, as eagerly, bit for bit
    np.testing.assert_array_equal(first, f(x))
    assert fusion_compile.pending() >= 1 and gated["runs"][0] == 0
    gated["gate"].set()
    assert fusion_compile.wait(60)
    later = j(x)
    assert gated["runs"][0] == 2  # the compiling call on empty arrays, then this call's loop
    np.testing.assert_allclose(later, f(x), rtol=4e-16 * 8)  # the loop's math: within a few ulps


@on_numpy
def test_groups_of_the_same_structure_share_one_loop(gated):
    from polyad.backends.numpy.compiler import fusion_compile

    def solver(u, dt):
        return heat(u, dt, steps=6, centre=4.000000123)  # a loop no other test compiles

    j = pa.jit(solver)
    u = np.random.default_rng(1).random((12, 12))
    fused = [n for n in j.lower(u, 0.1).fused_graph.nodes if isinstance(n.op, FusedOp)]
    assert len(fused) == 6
    assert len({n.op.kernels["cpu"].source for n in fused}) == 1
    np.testing.assert_array_equal(j(u, 0.1), solver(u, 0.1))  # compiling: eager's ops, bit for bit
    gated["gate"].set()
    assert fusion_compile.wait(60)
    assert_close(j(u, 0.15), solver(u, 0.15), rtol=1e-14)
    assert len(gated["texts"]) == 1  # one loop compiled for the six steps
    assert gated["runs"][0] == 1 + 6  # compiled once, then run by each step


@on_numpy
def test_the_first_call_of_a_jitted_loop_runs_compiled_loops_only(monkeypatch):
    """A graph that loops compiles its fused loops before its first run (polyad.api.jit.compiles_first):
    not one step of the first call runs the groups' ops eagerly while a loop compiles (issue 34)."""
    pytest.importorskip("numba")
    from polyad.backends.numpy.compiler import fusion_compile

    assert fusion_compile.wait(120)
    monkeypatch.setenv("POLYAD_FUSION_COMPILE", "background")
    real, eager_runs = fusion_compile.ready, [0, 0]

    def counted(key, build):
        loop = real(key, build)
        eager_runs[0] += loop is None  # the group ran as NumPy calls: its loop was still compiling
        eager_runs[1] += 1
        return loop

    monkeypatch.setattr(fusion_compile, "ready", counted)

    def loss(k, u0):  # constants of its own: no other test compiled these loops
        def step(u, _):
            lap = pxp.roll(u, 1) + pxp.roll(u, -1) - 2.0 * u
            return u + 0.1234567 * k * lap - 0.0107654 * u**3, None

        u, _ = pa.scan(step, u0, length=200, checkpoints=3)
        return pxp.sum(u * u)

    u0, k = arr(np.sin(np.linspace(0.0, 6.0, 64))), arr(0.5)
    j = pa.jit(pa.grad(loss))
    first = j(k, u0)
    assert eager_runs == [0, eager_runs[1]] and eager_runs[1] > 0, eager_runs
    assert_close(first, pa.grad(loss)(k, u0), rtol=1e-12)


@on_numpy
def test_a_loop_that_fails_to_compile_warns_once_and_the_values_stay_right(monkeypatch):
    pytest.importorskip("numba")
    from polyad.backends.numpy.compiler import fusion

    def broken(text, cache=True):
        raise RuntimeError("no loop today")

    monkeypatch.setattr(fusion, "compile_source", broken)
    monkeypatch.setenv("POLYAD_FUSION_COMPILE", "wait")

    def f(x):
        return pxp.tanh(x * 2.718281) - x

    j = pa.jit(f)
    x = np.linspace(-2.0, 2.0, 7)
    with pytest.warns(RuntimeWarning, match="no loop today"):
        np.testing.assert_array_equal(j(x), f(x))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once only
        np.testing.assert_array_equal(j(x * 2), f(x * 2))


def test_a_bad_compile_mode_is_named(monkeypatch):
    from polyad.backends.numpy.compiler import fusion_compile

    monkeypatch.setenv("POLYAD_FUSION_COMPILE", "later")
    with pytest.raises(ValueError, match=r"POLYAD_FUSION_COMPILE.*'background', 'wait'.*'later'"):
        fusion_compile.mode()


@on_numpy
def test_the_kernel_file_changes_with_what_its_code_depends_on(monkeypatch, tmp_path):
    """The cached file is named by a hash of its whole source, Numba's and NumPy's versions and the fast
    functions' source: a change of any gives a new file, so Numba never loads a stale kernel."""
    pytest.importorskip("numba")
    from polyad.backends.numpy.compiler import fusion

    monkeypatch.setenv("POLYAD_CACHE_DIR", str(tmp_path))
    text = "def fused(n, in0, out0):\n    for i in range(n):\n        out0[i] = in0[i] * 3.0\n    return 0\n"
    fusion._build(text)
    monkeypatch.setattr(np, "__version__", "0.0.test")
    fusion._build(text)
    fusion._build(text.replace("3.0", "4.0"))
    files = sorted(p.name for p in (tmp_path / "fusion").glob("k_*.py"))
    assert len(files) == 3
    monkeypatch.undo()


@on_numpy
def test_the_first_call_does_not_wait_for_the_optimiser(monkeypatch):
    """The first call runs the graph as traced (eager's kernels, compiled straight-line); optimising and
    fusing run in the background, and later calls switch to their result."""
    import polyad.graph.compiler as compiler
    from polyad.backends.numpy.compiler import fusion_compile

    assert fusion_compile.wait(120)
    monkeypatch.setenv("POLYAD_FUSION_COMPILE", "background")
    gate, optimized = threading.Event(), []
    real = compiler.optimize

    def slow(graph):
        assert gate.wait(30), "the test never opened the gate"
        optimized.append(graph)
        return real(graph)

    monkeypatch.setattr(compiler, "optimize", slow)

    def f(x):
        return pxp.sum(pxp.sin(x) * 0.987654321) + pxp.exp(x) * x

    j = pa.jit(f)
    x = np.linspace(0.0, 1.0, 9)
    np.testing.assert_array_equal(j(x), f(x))  # the optimiser is blocked: eager's kernels ran
    np.testing.assert_array_equal(j(x + 1), f(x + 1))
    assert not optimized and j.cache_info().misses == 1
    gate.set()
    assert fusion_compile.wait(120)
    assert len(optimized) == 1
    assert_close(j(x), f(x), rtol=1e-14)
    assert any(isinstance(n.op, FusedOp) for n in j.lower(x).fused_graph.nodes)


@on_numpy
def test_an_optimiser_that_fails_in_the_background_warns_and_the_values_stay_right(monkeypatch):
    import polyad.graph.compiler as compiler
    from polyad.backends.numpy.compiler import fusion_compile

    assert fusion_compile.wait(120)
    monkeypatch.setenv("POLYAD_FUSION_COMPILE", "background")

    def broken(graph):
        raise RuntimeError("no optimiser today")

    monkeypatch.setattr(compiler, "optimize", broken)
    j = pa.jit(lambda x: pxp.cos(x) * 3.25)
    x = np.linspace(0.0, 1.0, 5)
    with pytest.warns(RuntimeWarning, match="no optimiser today"):
        np.testing.assert_array_equal(j(x), np.cos(x) * 3.25)
        assert fusion_compile.wait(120)
    np.testing.assert_array_equal(j(x), np.cos(x) * 3.25)
    with pytest.raises(RuntimeError, match="no optimiser today"):  # asked for, it raises where it runs
        j.lower(x)


def test_an_interpreted_graph_equals_the_compiled_one():
    from polyad.graph.compiler.codegen import interpret_graph

    c = arr([[1.0, 2.0], [3.0, 4.0]])

    def f(x):
        q, r = pxp.linalg.qr(x @ c + 1.0)  # an op with several results, a closed-over constant
        return pxp.zeros_like(x) + q * 2.0, pxp.sum(r), c

    x = arr([[0.5, -1.0], [2.0, 0.25]])
    graph = pa.make_graph(f, x)
    interpreted = interpret_graph(graph, BACKEND)(x)
    compiled = graph.compile(BACKEND.name)(x)
    for got, expected in zip(interpreted, compiled):
        np.testing.assert_array_equal(to_numpy(got), to_numpy(expected))
