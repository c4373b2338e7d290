"""Stencils in fused kernels (issue 34, item 1): ``roll`` with a static shift and ``where`` on a boolean
condition join fused groups, so a time step built of element-wise ops and neighbour reads (the W9
diffusion step) is one kernel, and so is its VJP, whose rolls are the transposed shifts. Kernel counts
are read from ``pa.jit``'s fused graph; values are checked against eager code (forward, grad, jvp) and
against the unfused graph, on whichever lane runs (array_api_strict groups run their members as
straight-line calls: the grouping and the values are checked there too)."""

import numpy as np
import pytest
from helpers import assert_close, to_numpy

import polyad as pa
from polyad import xp as pxp
from polyad.core import dispatch
from polyad.graph.compiler import fuse
from polyad.graph.compiler.fusion import STENCIL_DEPTH, STENCIL_RECOMPUTE, FusedOp

BACKEND = dispatch.default_backend()
xb = BACKEND.xp
on_numpy = pytest.mark.skipif(BACKEND.name != "numpy", reason="the Numba loop runs on NumPy arrays")


@pytest.fixture(autouse=True)
def _loops_compile_at_the_first_call(monkeypatch):
    monkeypatch.setenv("POLYAD_FUSION_COMPILE", "wait")  # the compiled loop's values, not eager's


def arr(values, dtype="float64"):
    return xb.asarray(np.asarray(values, dtype=dtype))


def step(u, k, mask):
    """The W9 step, kept where ``mask`` holds and damped elsewhere."""
    lap = pxp.roll(u, 1) + pxp.roll(u, -1) - 2.0 * u
    new = u + 0.1 * k * lap - 0.01 * u**3
    return pxp.where(mask, new, 0.5 * u)


def state(n, seed=0):
    rng = np.random.default_rng(seed)
    return arr(rng.standard_normal(n)), arr(0.7), xb.asarray(rng.random(n) > 0.3)


def full_kernels(graph, shape):
    """``(fused, other)``: the fused nodes and the other nodes that write an array of ``shape`` (scalar
    arithmetic on ``k`` costs no pass over the state)."""
    fused = [n for n in graph.nodes if isinstance(n.op, FusedOp)]
    other = [n.op.name for n in graph.nodes if not isinstance(n.op, FusedOp) and n.outputs[0].shape == shape]
    return fused, other


# ------------------------------------------------------------------------------------------ kernel counts


def test_a_step_with_rolls_and_a_boolean_where_is_one_kernel():
    u, k, mask = state(64)
    fused, other = full_kernels(pa.jit(step).lower(u, k, mask).fused_graph, (64,))
    assert other == [] and len(fused) == 1
    members = fused[0].op.name
    assert members.count("roll") == 2 and "where" in members and fused[0].op.fusion.stencil


def test_its_vjp_is_one_kernel_with_its_sum():
    u, k, mask = state(64)

    def pullback(u, k, mask, g):
        return pa.vjp(lambda u, k: step(u, k, mask), u, k)[1](g)

    graph = pa.jit(pullback).lower(u, k, mask, u).fused_graph
    fused, other = full_kernels(graph, (64,))
    # the forward's rolls (k's summand reads the Laplacian), the transposed rolls (of g * 0.1k), the
    # where's two branches: one group, which writes u's cotangent and sums k's
    assert other == [] and len(fused) == 1
    assert fused[0].op.name.count("roll") == 4 and ",sum," in fused[0].op.name
    assert not any(n.op.name in ("roll", "where") for n in graph.nodes)


def test_a_roll_of_a_rolled_group_value_starts_a_group():
    # each roll of a group value computes that value again at its offset: a second one on the path
    # (STENCIL_DEPTH) would compute the first at every offset of the second, so it reads memory instead
    assert STENCIL_DEPTH == 1

    def f(u):
        a = pxp.roll(u, 1) * u  # a read of the input: no recomputation
        b = pxp.roll(a, 2) * u  # a group value at another offset: depth 1
        return pxp.roll(b, -3) + b  # depth 2: a group of its own

    u = state(40)[0]
    graph = pa.make_graph(f, u)
    fused = fuse(graph, BACKEND.name)
    assert [n.op.name for n in fused.nodes] == [
        "fused[roll,multiply,roll,multiply]",
        "fused[roll,add]",
    ]
    assert_close(to_numpy(fused.compile()(u)), to_numpy(f(u)), rtol=1e-15, atol=0)


def test_a_roll_of_a_costly_group_value_reads_it_from_memory():
    # recomputing a value of STENCIL_RECOMPUTE members or more at each offset would multiply the loop's
    # code (and Numba's compile time): the roll starts a group that reads the stored value
    def f(u):
        v = u
        for _ in range(STENCIL_RECOMPUTE + 1):
            v = v * 1.5 + u
        cheap = u * 2.0 + 1.0
        return pxp.roll(v, 1) - v + pxp.roll(cheap, -1)

    u = state(30)[0]
    fused = fuse(pa.make_graph(f, u), BACKEND.name)
    groups = [n.op.name for n in fused.nodes]
    assert len(groups) == 2 and all(g.startswith("fused[") for g in groups), groups
    # the costly chain writes v; the second group reads it at i - 1 and computes the cheap value at i + 1
    assert "roll" not in groups[0] and groups[1] == "fused[multiply,add,roll,subtract,roll,add]"
    assert_close(to_numpy(fused.compile()(u)), to_numpy(f(u)), rtol=1e-14, atol=0)


def test_rolls_the_kernel_cannot_index_stay_ops():
    def f(x, s):
        return pxp.roll(x, (1, -2), axis=(0, 1)) * x + pxp.roll(s, 1) * 2.0  # two axes; a 0-d-free 1-D

    x, s = arr(np.arange(12.0).reshape(3, 4)), arr(np.arange(4.0))
    fused = fuse(pa.make_graph(f, x, s), BACKEND.name)
    assert "roll" in [n.op.name for n in fused.nodes]  # the 2-D roll along axes is an op of its own
    assert_close(to_numpy(fused.compile()(x, s)), to_numpy(f(x, s)), rtol=1e-15, atol=0)


# ------------------------------------------------------------------------------------------ values


def check(f, *args, rtol=1e-13, atol=1e-14):
    """``pa.jit(f)`` and ``f``'s fused graph replayed equal eager ``f``."""
    eager = f(*args)
    eager = eager if isinstance(eager, tuple) else (eager,)
    graph = pa.make_graph(f, *args)
    for got in (pa.jit(f)(*args), fuse(graph, BACKEND.name)(*args)):
        got = got if isinstance(got, tuple) else (got,)
        for g, e in zip(got, eager):
            assert str(g.dtype) == str(e.dtype)
            assert_close(to_numpy(g), to_numpy(e), rtol=rtol, atol=atol)


@pytest.mark.parametrize("n", [3, 1000, *[pytest.param(n, marks=pytest.mark.slow) for n in (1, 2, 5, 64)]])
def test_forward_grad_and_jvp_equal_eager(n):
    u, k, mask = state(n, seed=n)
    g = arr(np.cos(np.arange(n)))
    check(step, u, k, mask)
    check(pa.grad(lambda u, k: pxp.sum(step(u, k, mask) ** 2), argnums=(0, 1)), u, k)
    check(lambda u, k, du, dk: pa.jvp(lambda u, k: step(u, k, mask), (u, k), (du, dk)), u, k, g, arr(0.3))
    check(lambda u, k, g: pa.vjp(lambda u, k: step(u, k, mask), u, k)[1](g), u, k, g)


@pytest.mark.parametrize("shift", [-7, *[pytest.param(s, marks=pytest.mark.slow) for s in (1, 200)]])
def test_shifts_larger_than_the_array_and_of_both_signs(shift):
    # a shift beyond n wraps as often as it takes; the interior is empty when the offsets span the array
    def f(x, c):
        y = pxp.exp(-x) * x
        return pxp.roll(pxp.roll(x, shift) * y, -2 * shift + 1) + pxp.where(c, y, -x), pxp.sum(
            y * pxp.roll(x, 2)
        )

    for n in (1, 4, 11, 300):
        x = arr(np.linspace(-1.0, 2.0, n))
        c = xb.asarray(np.arange(n) % 3 == 0)
        check(f, x, c)


def test_roll_along_the_axis_of_a_1d_array_and_over_a_flattened_2d_one():
    def f(x, m):
        return pxp.roll(x, 2, axis=0) * pxp.tanh(x), pxp.roll(m, -5) + 2.0 * pxp.roll(m * m, 3)

    x, m = arr(np.linspace(0.0, 1.0, 17)), arr(np.arange(24.0).reshape(4, 6) / 7)
    fused = fuse(pa.make_graph(f, x, m), BACKEND.name)
    assert not any(n.op.name == "roll" for n in fused.nodes)
    check(f, x, m)


def test_a_2d_roll_along_the_first_axis_is_a_flat_offset_and_along_the_last_an_op():
    # rows shift as whole blocks of the flattened array (an offset of s * 7 elements); a shift along the
    # last axis wraps inside each row, which no single offset does
    def f(m):
        rows = pxp.roll(m, 1, axis=0) + pxp.roll(m, -2, axis=0) - 2.0 * m
        return m + 0.1 * rows + 0.1 * pxp.roll(m, 1, axis=1)

    m = arr(np.random.default_rng(3).standard_normal((5, 7)))
    fused = fuse(pa.make_graph(f, m), BACKEND.name)
    assert [n.op.name for n in fused.nodes] == [
        "roll",
        "fused[roll,roll,add,multiply,subtract,multiply,add,multiply,add]",
    ]
    check(f, m)
    check(pa.grad(lambda m: pxp.sum(f(m) ** 3)), m)


def test_slices_along_the_first_axis_read_a_longer_input_from_their_start():
    # the non-periodic stencil u[2:] - 2 u[1:-1] + u[:-2]: one loop over the interior's elements, each
    # slice a read of u from its start (of diff's output too); no read wraps
    def f(u):
        return u[2:] - 2.0 * u[1:-1] + u[:-2] + pxp.diff(u)[1:] * pxp.sin(u[1:-1])

    for n in (3, 4, 50):
        u = arr(np.random.default_rng(n).standard_normal(n))
        groups, other = full_kernels(pa.jit(f).lower(u).fused_graph, (n - 2,))
        assert other == [] and [g.op.name.count("getitem") for g in groups] == [4]  # diff: (n - 1,)
        check(f, u)
        check(pa.grad(lambda u: pxp.sum(f(u) ** 2)), u)

    def rows(m):  # whole rows of a 2-D array; a roll of a sliced value reads it from memory
        inner = m[1:, :] * 2.0 - m[:-1, ...]
        return inner + pxp.roll(m[1:, :], 1), m[-3:-1, :] - m[:2, :]

    def rolled(u):  # a roll of a value computed from a slice: recomputed at i - 1 it would read u[0 - 1 + 1]
        # wrapped at the slice's end, not the array's; it reads the stored value instead
        return pxp.roll(u[1:] * 3.0, 1) + u[:-1]

    u = arr(np.arange(7.0) ** 2)
    groups = [n.op.name for n in fuse(pa.make_graph(rolled, u), BACKEND.name).nodes]
    assert groups == ["fused[getitem,multiply]", "fused[roll,getitem,add]"], groups
    check(rolled, u)

    m = arr(np.random.default_rng(7).standard_normal((5, 6)))
    fused = fuse(pa.make_graph(rows, m), BACKEND.name)
    assert [n.op.name for n in fused.nodes] == [
        "getitem",  # the rolled m[1:] (a slice alone is no group), which the group reads at wrapped offsets
        "fused[getitem,multiply,getitem,subtract,roll,add]",
        "fused[getitem,getitem,subtract]",
    ]
    check(rows, m)


def test_a_scalar_condition_and_literal_branches():
    def f(x, c):
        return pxp.where(c, pxp.roll(x, 1) * 2.0, x - 1.0) + pxp.where(x > 0.5, x, 0.0) * x

    x = arr(np.linspace(0.0, 1.0, 9))
    for c in (True, False):
        check(f, x, xb.asarray(c))


def test_large_arguments_of_sin_in_a_stencil_loop_take_libms_second_run():
    # the fast sin counts arguments beyond its reduction; the loop then runs again with libm's
    def f(x):
        return pxp.sin(pxp.roll(x, 1)) * x + pxp.cos(x)

    x = arr(np.concatenate([np.linspace(-3.0, 3.0, 40), [1e8, -3e9, 7.5e12]]))
    check(f, x, rtol=1e-13, atol=1e-13)


def test_float32_keeps_its_dtype():
    u, k, mask = state(33)
    u32, k32 = xb.astype(u, xb.float32), xb.astype(k, xb.float32)
    check(step, u32, k32, mask, rtol=2e-6, atol=1e-6)
    spec = next(n for n in pa.jit(step).lower(u32, k32, mask).fused_graph.nodes if isinstance(n.op, FusedOp))
    assert spec.op.fusion.dtype == "float32" and "bool" in spec.op.fusion.input_dtypes


def test_math_exact_gives_eagers_bits():
    # roll, where and the arithmetic are exact in the loop: the same roundings as NumPy's calls
    def f(u, c):
        return pxp.where(c, u + 0.25 * (pxp.roll(u, 1) + pxp.roll(u, -1) - 2.0 * u), u / 3.0)

    u, _, mask = state(257)
    np.testing.assert_array_equal(to_numpy(pa.jit(f, math="exact")(u, mask)), to_numpy(f(u, mask)))


def test_a_jitted_gradient_of_a_scan_equals_eager():
    u0, k, mask = state(128)

    def loss(k, u0):
        u, _ = pa.scan(lambda u, _: (step(u, k, mask), None), u0, length=50, checkpoints=4)
        return pxp.sum(u * u)

    grads = pa.jit(pa.grad(loss, argnums=(0, 1)))(k, u0)
    for got, want in zip(grads, pa.grad(loss, argnums=(0, 1))(k, u0)):
        assert_close(to_numpy(got), to_numpy(want), rtol=1e-13, atol=1e-15)


@on_numpy
def test_the_threaded_chunks_of_a_stencil_loop(monkeypatch):
    # chunks read their neighbours' elements: every chunk gets the whole arrays and its range
    pytest.importorskip("numba")
    from polyad.backends.numpy.compiler import fusion_threads

    monkeypatch.setattr(fusion_threads, "FORCE", "parallel")
    monkeypatch.setenv(fusion_threads.ENV_THREADS, "2")
    u, k, mask = state(3 * fusion_threads.PROBE + 5)
    check(step, u, k, mask)


@on_numpy
def test_the_cpu_loop_reads_offsets_inside_one_loop():
    pytest.importorskip("numba")
    u, k, mask = state(64)
    (node,) = [n for n in pa.jit(step).lower(u, k, mask).fused_graph.nodes if isinstance(n.op, FusedOp)]
    source = node.op.kernels["cpu"].source
    # u read at i-1, i and i+1 through views (the interior), and wrapped at the ends, which run through
    # the same loop (its code once) on the gathered reads
    assert "in0[a + -1:]" in source and "in0[a + 1:]" in source and "in0[(i + -1) % n]" in source
    assert source.count("for j in range(count):") == 1 and source.count(" = (") == 11  # the 11 members


# ------------------------------------------------------------------------------------------ first call


@on_numpy
def test_the_first_call_of_a_jitted_1000_step_loop_runs_no_eager_step(monkeypatch):
    """The body is traced (the step, then its pullback), never run eagerly step by step, and every fused
    loop is compiled before it runs (polyad.api.jit.compiles_first)."""
    pytest.importorskip("numba")
    from polyad.backends.numpy.compiler import fusion_compile

    assert fusion_compile.wait(120)
    monkeypatch.setenv("POLYAD_FUSION_COMPILE", "background")
    real, runs = fusion_compile.ready, {"eager": 0, "compiled": 0}

    def counted(key, build):
        loop = real(key, build)
        runs["eager" if loop is None else "compiled"] += 1
        return loop

    monkeypatch.setattr(fusion_compile, "ready", counted)
    calls = [0]
    mask = xb.asarray(np.arange(48) % 5 != 0)

    def loss(k, u0):
        def body(u, _):
            calls[0] += 1
            lap = pxp.roll(u, 1) + pxp.roll(u, -1) - 2.0 * u
            return pxp.where(mask, u + 0.0987654 * k * lap, u), None  # a constant no other test compiled

        u, _ = pa.scan(body, u0, length=1000, checkpoints=5)
        return pxp.sum(u * u)

    u0, k = arr(np.sin(np.linspace(0.0, 6.0, 48))), arr(0.5)
    first = pa.jit(pa.grad(loss))(k, u0)
    assert calls[0] <= 3, calls  # traces only: the scan's body, its pullback's
    assert runs["eager"] == 0 and runs["compiled"] > 0, runs
    traced = calls[0]
    assert_close(first, pa.grad(loss)(k, u0), rtol=1e-12)
    assert calls[0] >= traced + 1000  # the eager reference runs every step: the counter counts


# ------------------------------------------------------------------------------------------ W10's other ops


def test_maximum_minimum_and_stop_gradient_fuse_with_numpys_nans_and_signed_zeros():
    # an RK45 attempt's error norm: max(|y|, |y_new|) * rtol + atol under stop_gradient, in the group
    def f(a, b):
        m = pxp.maximum(pxp.abs(a), b) * 1e-6 + 1e-6
        return pa.stop_gradient(m) * a, pxp.maximum(a, b) * 1.0, pxp.minimum(a, b) * 1.0

    a = arr([0.0, -0.0, np.nan, 1.0, np.nan, 2.0, -np.inf, -3.0])
    b = arr([-0.0, 0.0, 1.0, np.nan, np.nan, np.inf, 3.0, -3.5])
    nodes = fuse(pa.make_graph(f, a, b), BACKEND.name).nodes
    assert all(isinstance(n.op, FusedOp) for n in nodes)  # three groups, no op left outside
    assert {"abs", "maximum", "minimum", "stop_gradient"} <= {
        m for n in nodes for m in n.op.name[6:-1].split(",")
    }
    for got, want in zip(pa.jit(f, math="exact")(a, b), f(a, b)):
        np.testing.assert_array_equal(to_numpy(got), to_numpy(want))  # NaNs where NumPy has them
        np.testing.assert_array_equal(np.signbit(to_numpy(got)), np.signbit(to_numpy(want)))
    # stop_gradient keeps stopping inside a group: the derivative of stop(m) * a is stop(m)
    x, y = arr([0.5, -2.0, 3.0]), arr([1.0, 1.0, 1.0])
    grad = pa.jit(pa.grad(lambda a: pxp.sum(f(a, y)[0])))(x)
    assert_close(to_numpy(grad), np.maximum(np.abs([0.5, -2.0, 3.0]), 1.0) * 1e-6 + 1e-6, rtol=1e-15)


def test_where_of_two_python_numbers_eagerly_and_compiled():
    # where(c, 1.0, 0.0) has no array among its values: its dtype is the default float's, as NumPy gives
    # (array_api_strict's result_type refused it, and pa.jit's abstract rule failed on that lane)
    x = arr([0.1, 0.7, 0.9])
    mask = np.array([0.0, 1.0, 1.0])
    expected = mask * np.array([0.1, 0.7, 0.9])

    def fn(x, c):
        return pxp.where(x > 0.5, 1.0, 0.0) * x

    np.testing.assert_array_equal(to_numpy(fn(x, xb.asarray(True))), expected)
    np.testing.assert_array_equal(to_numpy(pa.jit(fn)(x, xb.asarray(True))), expected)
    g = pa.grad(lambda x: pxp.sum(pxp.where(x > 0.5, 1.0, 0.0) * x**2))(x)
    np.testing.assert_allclose(to_numpy(g), 2 * expected, rtol=1e-15)
    assert to_numpy(pxp.where(x > 0.5, 1, 0)).dtype.kind == "i"
