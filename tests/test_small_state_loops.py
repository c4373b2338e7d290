"""Small states compiled whole (issue 34, item 5): a graph of small values as one Numba function of
scalars (``backends/numpy/compiler/graph_function.py``), and a while loop and its reverse sweep as one
compiled call each (``control/compiled_loops.py``). Values are checked against the graph's straight-line
code (NumPy's kernels) and against the Python loop and central differences; on array_api_strict the
same functions run (the Numba code takes NumPy arrays only) and must give the same values."""

import importlib

import numpy as np
import pytest
from helpers import assert_close, to_numpy

import polyad as pa
import polyad.control.compiled_loops as compiled_loops
from polyad import xp as pxp
from polyad.core import dispatch
from polyad.graph.compiler import optimize

graph_function = importlib.import_module("polyad.backends.numpy.compiler.graph_function")
fusion = importlib.import_module("polyad.backends.numpy.compiler.fusion")

BACKEND = dispatch.default_backend()
xb = BACKEND.xp
on_numpy = pytest.mark.skipif(BACKEND.name != "numpy", reason="the Numba code runs on NumPy arrays")
numba = pytest.importorskip("numba")


@pytest.fixture
def compile_at_once(monkeypatch):
    """Whole loops and graph functions compiled at their first use, on the calling thread."""
    monkeypatch.setenv("POLYAD_FUSION_COMPILE", "wait")
    monkeypatch.setattr(compiled_loops, "WHOLE_AFTER", 0)
    monkeypatch.setattr(graph_function, "COMPILE_AFTER", 1)


def whole_runs(monkeypatch, name):
    """A list that gets True each time ``while_loop`` runs ``compiled_loops.<name>`` whole (False when
    that returned None: the Python loop ran)."""
    runs, original = [], getattr(compiled_loops, name)

    def spy(*args):
        out = original(*args)
        runs.append(out is not None)
        return out

    monkeypatch.setattr(f"polyad.control.while_loop.{name}", spy)
    return runs


def many_ops(x, y, i, flag):
    """Element-wise ops of every kind the translation writes, moves, reductions and choices."""
    z = x * y + pxp.exp(-x) * pxp.sin(y) / (1.0 + x * x)  # (2, 3) by broadcasting
    s = pxp.sum(z, axis=0, keepdims=True)  # (1, 3)
    total = pxp.sum(z)  # 0-d, pairwise order
    big = pxp.where(flag, pxp.maximum(z, 0.5), pxp.minimum(z, -0.5))
    moved = pxp.concat([pxp.roll(x, 1), pxp.flip(x), pxp.reshape(pxp.matrix_transpose(y), (6,))])
    parts = pxp.unstack(x)
    picked = pxp.stack([parts[2], y[1, 0], total, pxp.astype(i, pxp.float64)])
    steps = pxp.where(i > 2, i * 3 - 1, i // 2)
    after = pxp.nextafter(total, pxp.asarray(np.inf))
    logic = pxp.logical_and(pxp.isfinite(x), ~(x > 1.0)) | (x == 0.25)
    return s, big, moved, picked, steps, after, logic, pxp.sqrt(pxp.abs(y[:, 1:]))


def inputs():
    rng = np.random.default_rng(3)
    x = xb.asarray(rng.uniform(-1, 2, 3))
    y = xb.asarray(rng.uniform(-1, 1, (2, 3)))
    return x, y, xb.asarray(4), xb.asarray(True)


@on_numpy
def test_a_graph_as_one_function_of_scalars_gives_numpys_values():
    args = inputs()
    graph = optimize(pa.make_graph(many_ops, *args))
    text, constants = graph_function.translate(graph)
    assert "np.sum" not in text and "np.where" not in text  # scalars only: no array op written
    fn = fusion.compile_source(text, cache=False)
    flat = [np.asarray(to_numpy(a)) for a in args]
    got = fn(*[a.item() if not a.shape else a for a in flat], *constants)
    want = many_ops(*args)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(to_numpy(w))
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-15, atol=0)
        assert np.asarray(g).shape == w.shape
    # NaN propagates through maximum and minimum as NumPy's do
    nan_x = xb.asarray(np.array([np.nan, 0.5, 1.0]))
    got = fn(np.asarray(to_numpy(nan_x)), *[a.item() if not a.shape else a for a in flat[1:]], *constants)
    np.testing.assert_array_equal(np.asarray(got[1]), np.asarray(to_numpy(many_ops(nan_x, *args[1:])[1])))


@on_numpy
def test_what_is_not_translated_is_refused_by_name():
    big = xb.asarray(np.ones(graph_function.MAX_ARRAY_ELEMENTS + 1))
    with pytest.raises(graph_function.Untranslatable, match="elements"):
        graph_function.translate(pa.make_graph(lambda v: v * 2.0, big))
    f32 = xb.asarray(np.ones(3, dtype=np.float32))
    with pytest.raises(graph_function.Untranslatable, match="float32"):
        graph_function.translate(pa.make_graph(lambda v: v * 2.0, f32))
    with pytest.raises(graph_function.Untranslatable, match="by arrays"):
        graph_function.translate(pa.make_graph(lambda v, k: v[k], xb.asarray(np.ones(3)), xb.asarray([0, 2])))


def decay(k, y0, checkpoints):
    """Explicit Euler on ``y' = -k y - 0.1 y^3`` to t = 1 with a step that grows: a loop whose length
    its data decide, a float, int and bool carry, a closure."""

    def cond(c):
        t, y, n, go = c
        return go & (n < 200)

    def body(c):
        t, y, n, go = c
        h = pxp.minimum(0.02 * (1.0 + 0.01 * pxp.astype(n, pxp.float64)), 1.0 - t)
        y = y + h * (-k * y - 0.1 * y**3)
        t = t + h
        return t, y, n + 1, t < 1.0 - 1e-12

    init = (xb.asarray(0.0), y0, xb.asarray(0), xb.asarray(True))
    _, y, n, _ = pa.while_loop(cond, body, init, checkpoints=checkpoints, compiled=True)
    return pxp.sum(y * y) + 0.0 * pxp.astype(n, pxp.float64)


def python_decay(k, y0):
    t, y, n = 0.0, np.array(y0, dtype=float), 0
    while t < 1.0 - 1e-12 and n < 200:
        h = min(0.02 * (1.0 + 0.01 * n), 1.0 - t)
        y = y + h * (-k * y - 0.1 * y**3)
        t, n = t + h, n + 1
    return float(np.sum(y * y))


@pytest.mark.parametrize("checkpoints", [None, 4])
def test_a_jitted_while_loop_and_its_sweep_run_whole(compile_at_once, monkeypatch, checkpoints):
    k = xb.asarray(np.array([0.7, 1.3]))
    y0 = xb.asarray(np.array([1.0, -0.5]))
    loops, sweeps = whole_runs(monkeypatch, "run_whole_while"), whole_runs(monkeypatch, "run_whole_sweep")
    monkeypatch.setattr(compiled_loops, "FIRST_TABLE", 8)  # the loop runs past the table: a longer one
    f = pa.jit(pa.value_and_grad(decay), static_argnums=2)
    value, grad = f(k, y0, checkpoints)
    value2, grad2 = f(k, y0, checkpoints)
    assert_close(value, python_decay(to_numpy(k), to_numpy(y0)), rtol=1e-13)
    eps = 1e-6
    fd = [
        (
            python_decay(to_numpy(k) + eps * e, to_numpy(y0))
            - python_decay(to_numpy(k) - eps * e, to_numpy(y0))
        )
        / (2 * eps)
        for e in np.eye(2)
    ]
    assert_close(grad, np.asarray(fd), rtol=1e-7)
    assert_close(grad2, grad, rtol=1e-14)
    eager = pa.grad(decay)(k, y0, checkpoints)  # compiled=True: the eager replay, whole too
    assert_close(eager, grad, rtol=1e-13)
    if BACKEND.name == "numpy":
        assert sum(loops) >= 2 and sum(sweeps) >= 2, (loops, sweeps)
    else:
        assert not any(loops) and not any(sweeps)


@on_numpy
def test_whole_loops_wait_for_steps_that_pay(monkeypatch):
    """Below ``WHOLE_AFTER`` steps a body's loops run in Python: nothing is translated or compiled; once
    its loops have run that many, the next call translates the loop."""
    monkeypatch.setenv("POLYAD_FUSION_COMPILE", "wait")
    monkeypatch.setattr(compiled_loops, "WHOLE_AFTER", 100)  # the loop runs 48 steps a call
    made = []
    monkeypatch.setattr(
        "polyad.backends.numpy.compiler.while_function",
        lambda *a: made.append(a) or graph_function.while_function(*a),
    )
    k, y0 = xb.asarray(np.array([0.7, 1.3])), xb.asarray(np.array([1.0, -0.5]))
    f = pa.jit(pa.grad(decay), static_argnums=2)
    f(k, y0, None)
    f(k, y0, None)
    assert made == []
    f(k, y0, None)  # 96 steps run
    f(k, y0, None)  # 144: translated now
    assert len(made) == 1


@on_numpy
def test_eager_and_second_order_loops_run_whole_with_the_same_values(monkeypatch):
    """Eager grad (every state stored) and grad of grad (the enclosing level's stores) run their loops
    and sweeps whole once allowed, and give what the Python loops give."""
    monkeypatch.setenv("POLYAD_FUSION_COMPILE", "wait")
    k, y0 = xb.asarray(np.array([0.7, 1.3])), xb.asarray(np.array([1.0, -0.5]))

    def second(k):
        return pxp.sum(pa.grad(decay)(k, y0, None) * k)

    monkeypatch.setattr(compiled_loops, "WHOLE_AFTER", 1 << 62)  # the Python loops, whatever ran before
    python = [np.asarray(pa.grad(decay)(k, y0, None)), np.asarray(pa.grad(second)(k))]
    monkeypatch.setattr(compiled_loops, "WHOLE_AFTER", 0)
    calls = whole_runs(monkeypatch, "run_whole_sweep")
    whole = [np.asarray(pa.grad(decay)(k, y0, None)), np.asarray(pa.grad(second)(k))]
    assert any(calls)
    for a, b in zip(python, whole):
        np.testing.assert_allclose(b, a, rtol=1e-13, atol=0)


def swapping_diffusion(k, u0):
    """A carry that swaps two values and passes one on (new values read before any is set), and a
    state of 200 points (an array variable of the written function, rolled: the array statements)."""

    def cond(c):
        u, a, b, t, t_old = c
        return t < 0.3

    def body(c):
        u, a, b, t, t_old = c
        lap = pxp.roll(u, 1) + pxp.roll(u, -1) - 2.0 * u
        u = u + 0.05 * k * lap - 0.01 * u * u * u + 0.001 * a
        return u, b, a + 0.1 * t_old, t + 0.01, t

    init = (u0, xb.asarray(1.0), xb.asarray(-2.0), xb.asarray(0.0), xb.asarray(0.0))
    u, a, b, t, _ = pa.while_loop(cond, body, init, checkpoints=5, compiled=True)
    return pxp.sum(u * u) + a * b + t


@pytest.mark.parametrize("where", ["jit", "eager"])
def test_swapped_carries_and_array_states_run_whole_with_the_python_loops_values(monkeypatch, where):
    monkeypatch.setenv("POLYAD_FUSION_COMPILE", "wait")
    k = xb.asarray(0.8)
    u0 = xb.asarray(np.sin(np.linspace(0, 2 * np.pi, 200, endpoint=False)))
    f = (
        pa.jit(pa.value_and_grad(swapping_diffusion))
        if where == "jit"
        else pa.value_and_grad(swapping_diffusion)
    )
    monkeypatch.setattr(compiled_loops, "WHOLE_AFTER", 1 << 62)
    want = [np.asarray(to_numpy(v)) for v in f(k, u0)]
    monkeypatch.setattr(compiled_loops, "WHOLE_AFTER", 0)
    calls = whole_runs(monkeypatch, "run_whole_while")
    got = [np.asarray(to_numpy(v)) for v in f(k, u0)]
    for g, w_ in zip(got, want):
        np.testing.assert_allclose(g, w_, rtol=1e-12, atol=0)
    eps = 1e-6
    fd = (float(swapping_diffusion(k + eps, u0)) - float(swapping_diffusion(k - eps, u0))) / (2 * eps)
    assert_close(got[1], fd, rtol=1e-6)
    assert any(calls) == (BACKEND.name == "numpy")
