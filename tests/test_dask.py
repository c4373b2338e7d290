"""The Dask backend: transforms of functions of chunked Dask arrays build task graphs and compute nothing
(a scheduler that refuses to run proves it), their results equal NumPy's once computed, the reverse pass
shares the forward's tasks, and a gradient over an array larger than the process may hold streams through
Dask's scheduler. Runs on every backend under test: the arrays here are Dask's whatever the default."""

import json
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import optree
import pytest
from helpers import assert_close

import polyad as pa
from polyad import backends
from polyad.core import dispatch
from polyad.testing.op_table import OP_TABLE, Sampler, float_argnums
from polyad.transforms.batching import LoopFallbackWarning

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")
from dask.callbacks import Callback  # noqa: E402  (after the skip: Dask is an optional extra)

xp = pa.xp
DASK = backends.load("dask")


def _refuse(dsk, keys, **kwargs):
    raise AssertionError(f"a Dask graph was computed ({len(keys) if keys else 0} keys asked for)")


def lazily():
    """A block in which computing any Dask array fails: what runs inside it builds graphs only."""
    return dask.config.set(scheduler=_refuse)


def chunked(a, chunks=2):
    return da.from_array(np.asarray(a), chunks=chunks)


def _loss(w, x):
    return xp.sum(xp.tanh(x @ w) ** 2) + xp.sum(xp.special.erf(w))


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    return rng.standard_normal(3), rng.standard_normal((5, 3))


# ------------------------------------------------------------------------------ the backend


def test_backend_keeps_the_contract_and_gives_dask_arrays_a_device():
    b = backends.check(backends.load("dask"), "dask")
    x = da.ones(4, chunks=2)
    assert dispatch.backend_of_array(x) is b and dispatch.device_type(x) == "cpu"
    assert x.device == b.devices()[0]
    # created on a Dask array's device: a Dask array, whatever the default backend
    moved = xp.asarray(np.arange(3.0), device=x.device)
    assert isinstance(moved, da.Array)
    assert isinstance(xp.zeros((2,), device=x.device), da.Array)
    # a NumPy array joins a call with Dask arrays (Dask takes it as one chunk); another library does not
    assert isinstance(x + np.ones(4), da.Array) and isinstance(xp.add(np.ones(4), x), da.Array)
    strict = pytest.importorskip("array_api_strict")
    with pytest.raises(TypeError, match="arrays of two libraries in one call: dask"):
        xp.add(x, strict.ones(4))


def test_default_backend_dask_creates_dask_arrays():
    code = (
        "import polyad as pa; "
        "print(type(pa.xp.ones(3)).__module__, type(pa.random.normal(size=(2,))).__name__)"
    )
    env = dict(os.environ, POLYAD_BACKEND="dask")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["dask.array.core", "Array"]


def test_import_polyad_does_not_import_dask():
    code = "import sys, polyad; print('dask' in sys.modules)"
    env = dict(os.environ, POLYAD_BACKEND="numpy")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


# ------------------------------------------------------------------------------ transforms stay lazy


def test_grad_vjp_jvp_vmap_build_graphs_and_match_numpy(data):
    w, x = data
    dw, dx = chunked(w), chunked(x)
    t = np.linspace(-1, 1, 3)
    with lazily():
        g = pa.grad(_loss)(dw, dx)
        out, vjp_fn = pa.vjp(_loss, dw, dx)
        gw, gx = vjp_fn(xp.ones_like(out))
        val, tan = pa.jvp(lambda v: _loss(v, dx), (dw,), (chunked(t),))
        per_row = pa.vmap(pa.grad(_loss), in_dims=(None, 0))(dw, dx[:, None, :])
        lin_out, lin_fn = pa.linearize(lambda v: _loss(v, dx), dw)
        lin_tan = lin_fn(chunked(t))
    for r in (g, out, gw, gx, val, tan, per_row, lin_out, lin_tan):
        assert isinstance(r, da.Array), type(r)
    expected_g = pa.grad(_loss)(w, x)
    assert_close(g.compute(), expected_g, rtol=1e-12)
    assert_close(gw.compute(), expected_g, rtol=1e-12)
    assert_close(gx.compute(), pa.grad(_loss, argnums=1)(w, x), rtol=1e-12)
    assert_close(tan.compute(), pa.jvp(lambda v: _loss(v, x), (w,), (t,))[1], rtol=1e-12)
    assert_close(lin_tan.compute(), tan.compute(), rtol=1e-12)
    loop = np.stack([pa.grad(_loss)(w, x[i : i + 1]) for i in range(x.shape[0])])
    assert_close(per_row.compute(), loop, rtol=1e-12)


def test_second_derivatives_stay_lazy(data):
    w, x = data
    with lazily():
        h = pa.grad(lambda v: xp.sum(pa.grad(_loss)(v, chunked(x)) ** 2))(chunked(w))
    assert isinstance(h, da.Array)
    expected = pa.grad(lambda v: xp.sum(pa.grad(_loss)(v, x) ** 2))(w)
    assert_close(h.compute(), expected, rtol=1e-10)


class _Counter(Callback):
    """Counts the tasks Dask runs, by the name of their layer."""

    def __init__(self):
        super().__init__()
        self.ran = {}

    def _pretask(self, key, dsk, state):
        name = key[0] if isinstance(key, tuple) else key
        self.ran[name] = self.ran.get(name, 0) + 1


def test_reverse_pass_is_part_of_the_forward_graph():
    """The tape holds lazy values: the gradient's graph contains the forward's tasks, and computing the
    value and the gradient together runs each forward task once."""
    x = da.linspace(0.1, 2.0, 40, chunks=10)
    value, g = pa.value_and_grad(lambda v: xp.sum(xp.exp(xp.sin(v))))(x)
    sin_layers = [k for k in value.dask.layers if k.startswith("sin-")]
    assert len(sin_layers) == 1 and sin_layers[0] in g.dask.layers
    with _Counter() as counter:
        v, gv = dask.compute(value, g, optimize_graph=False)  # unfused: the tasks keep their layer names
    assert counter.ran[sin_layers[0]] == 4  # one task per chunk, shared by the forward and reverse passes
    xn = np.linspace(0.1, 2.0, 40)
    assert np.isclose(v, np.sum(np.exp(np.sin(xn))), rtol=1e-13)
    np.testing.assert_allclose(gv, np.exp(np.sin(xn)) * np.cos(xn), rtol=1e-13)


def test_special_functions_run_chunk_by_chunk():
    x = da.linspace(-2, 2, 9, chunks=3)
    with lazily():
        g = pa.grad(lambda v: xp.sum(xp.special.erf(v) + xp.special.gammaln(v + 3)))(x)
    assert isinstance(g, da.Array) and g.chunks == x.chunks
    xn = np.linspace(-2, 2, 9)
    from scipy import special

    np.testing.assert_allclose(g.compute(), 2 / np.sqrt(np.pi) * np.exp(-(xn**2)) + special.digamma(xn + 3))


def test_random_draws_are_lazy_and_replayable():
    gen = pa.random.Generator(7)
    with pa.backend("dask"), lazily():
        state = gen.get_state()
        a = gen.normal(size=(3, 4))
        gen.set_state(state)
        b = gen.normal(size=(3, 4))
        c = gen.normal(size=(3, 4))
    assert isinstance(a, da.Array)
    a, b, c = dask.compute(a, b, c)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    with pa.backend("dask"):
        big = gen.normal(size=(100000,)).compute()
    assert abs(np.mean(big)) < 0.02 and abs(np.std(big) - 1) < 0.02  # standard normal: 5 sigma bounds


# ------------------------------------------------------------------------------ the extras


@pytest.mark.parametrize("axis", [0, 1])
def test_scatter_add_accumulates_across_chunks(axis):
    rng = np.random.default_rng(axis)
    target = rng.standard_normal((7, 5))
    idx = np.array([0, 6, 3, 3, -1, 2])
    vals = rng.standard_normal((6, 5) if axis == 0 else (7, 6))
    if axis == 1:
        idx = np.array([0, 4, 2, 2, -1, 1])
    with lazily():
        got = DASK.xp.scatter_add(chunked(target, 3), chunked(idx, 4), chunked(vals, 2), axis)
    expected = target.copy()
    np.add.at(np.moveaxis(expected, axis, 0), idx, np.moveaxis(vals, axis, 0))
    np.testing.assert_allclose(got.compute(), expected, rtol=1e-14)
    assert got.chunks[1 - axis] == chunked(target, 3).chunks[1 - axis]


def test_index_add_and_index_updates():
    target = np.arange(12.0).reshape(3, 4)
    key = (np.array([0, 2, 0]), slice(1, 3))
    vals = np.ones((3, 2))
    got = DASK.xp.index_add(chunked(target, 2), key, chunked(vals, 2)).compute()
    expected = target.copy()
    np.add.at(expected, key, vals)
    np.testing.assert_array_equal(got, expected)

    def f(v):  # an index update inside grad: Dask's own assignment, lazily
        out = xp.zeros((3, 4), device=v.device)
        out[xp.asarray([0, 2]), 1:3] = v  # a NumPy index array (the default backend's) among Dask arrays
        return xp.sum(out * xp.reshape(xp.arange(12.0, device=v.device), (3, 4)))

    with lazily():
        g = pa.grad(f)(chunked(np.array([[1.0, 2.0], [3.0, 4.0]]), 1))
    np.testing.assert_array_equal(g.compute(), [[1.0, 2.0], [9.0, 10.0]])


# ------------------------------------------------------------------------------ the op table, lazily


def _lazy_cases():
    sampler = Sampler(DASK)
    cases = []
    for row in OP_TABLE:
        samples = row.samples(sampler)
        pick = next((i for i, s in enumerate(samples) if s.name in ("2-d", "broadcast", "1-d")), 0)
        cases.append(pytest.param(row, pick, id=f"{row.name}-{samples[pick].name or pick}"))
    return cases


@pytest.mark.parametrize("row,i", _lazy_cases())
def test_op_table_is_lazy(row, i):
    """Each function, and its vjp, jvp and vmap, on Dask arrays (Dask the default backend, so creation
    functions make Dask arrays too) computes nothing and returns Dask arrays; what is known to compute, or
    to fail on Dask, is the rows' data (``backend_failures``)."""
    reason = row.skip_reason("lazy", "dask") or row.skip_reason("value", "dask")
    if reason:
        pytest.xfail(reason)
    sample = row.samples(Sampler(DASK))[i]
    f = row.function()
    nums = float_argnums(sample) if row.differentiable else ()

    def fn(*diff):
        args = list(sample.args)
        for n, d in zip(nums, diff):
            args[n] = d
        return f(*args, **sample.kwargs)

    def check(name):
        return not row.skip_reason(name, "dask")

    primals = tuple(sample.args[n] for n in nums)
    arrays = [p for p, a in enumerate(sample.args) if dispatch.backend_of_array(a) is not None]
    with pa.backend("dask"), lazily(), warnings.catch_warnings():
        warnings.simplefilter("ignore", LoopFallbackWarning)
        outs = [fn(*primals)]
        if primals and check("vjp"):
            out, vjp_fn = pa.vjp(fn, *primals)
            outs.append(vjp_fn(optree.tree_map(xp.ones_like, out)))
        if primals and check("jvp"):
            outs.append(pa.jvp(fn, primals, tuple(xp.ones_like(p) for p in primals))[1])
        if arrays and (row.vmap_dims is None or arrays[0] in row.vmap_dims) and check("vmap"):
            p0 = arrays[0]

            def batched(a):
                return f(*[a if p == p0 else v for p, v in enumerate(sample.args)], **sample.kwargs)

            outs.append(pa.vmap(batched)(xp.stack([sample.args[p0]] * 2)))
    for leaf in optree.tree_leaves(outs):
        assert dispatch.backend_of_array(leaf) in (None, DASK), type(leaf)


# ------------------------------------------------------------------------------ out of core

_OUT_OF_CORE = textwrap.dedent(
    """
    import json, resource, sys, time
    limit = int(sys.argv[1])
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))  # address space below the array's size
    import dask, dask.array as da, numpy as np
    import polyad as pa
    from polyad import xp

    dask.config.set({"array.chunk-size": "32MiB"})  # each chunk 4 * 10**6 float64
    n, h = 2 * 10**8, 1e-7
    start = time.perf_counter()
    x = da.arange(n, dtype=np.float64) * h  # generated chunk by chunk, never whole
    value, g = pa.value_and_grad(lambda v: xp.sum(xp.sin(v) ** 2))(x)
    assert isinstance(g, da.Array) and g.shape == (n,)
    idx = np.array([0, 1, 12345678, 123456789, n - 1])
    v, g_sum, g_at = dask.compute(value, xp.sum(g), g[idx])
    print(json.dumps({
        "n": n, "h": h, "value": float(v), "grad_sum": float(g_sum), "idx": idx.tolist(),
        "grad_at": np.asarray(g_at).tolist(), "seconds": time.perf_counter() - start,
        "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }))
    """
)


def test_grad_of_a_reduction_larger_than_memory():
    """``grad`` of ``sum(sin(x)**2)`` over 2 * 10**8 float64 (1.6 GB) in a process whose address space
    is limited to 1 GB (``RLIMIT_AS``: more than that cannot even be mapped): the array is created chunk
    by chunk, the gradient is a lazy array whose chunks stream through the scheduler with the value's.
    Checked against the closed forms sum_k sin(2kh) = sin(nh) sin((n-1)h) / sin(h) and
    sin^2 = (1 - cos 2x) / 2."""

    limit = 2**30
    r = subprocess.run(
        [sys.executable, "-c", _OUT_OF_CORE, str(limit)], capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    n, h = out["n"], out["h"]
    assert 8 * n > limit  # the array is larger than the memory the process may use
    assert out["peak_rss"] < limit and out["peak_rss"] < 8 * n / 2
    value = n / 2 - 0.5 * np.cos((n - 1) * h) * np.sin(n * h) / np.sin(h)
    grad_sum = np.sin(n * h) * np.sin((n - 1) * h) / np.sin(h)
    assert np.isclose(out["value"], value, rtol=1e-9)
    assert np.isclose(out["grad_sum"], grad_sum, rtol=1e-7)
    np.testing.assert_allclose(out["grad_at"], np.sin(2 * h * np.array(out["idx"])), rtol=1e-12, atol=1e-15)


# ------------------------------------------------------------------------------ README


def test_readme_dask_example_runs_and_is_right():
    import pathlib
    import re

    readme = (pathlib.Path(__file__).resolve().parent.parent / "README.md").read_text()
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if "import dask.array" in b]
    scope = {}
    exec(block, scope)
    x = scope["x"].compute()
    z = 0.5 * x
    value = np.mean(np.log1p(np.exp(-z)))
    grad = -x * np.exp(-z) / (1 + np.exp(-z)) / x.size  # d/dw of mean(log(1 + exp(-w x)))
    assert np.isclose(scope["value"], value, rtol=1e-12)
    assert np.isclose(scope["g_norm"], np.linalg.norm(grad), rtol=1e-10)


def test_python_values_compute_where_asked():
    """``float()`` and an ``if`` on a value inside ``grad`` compute what they need (and only then)."""
    x = da.linspace(0.5, 1.5, 6, chunks=3)

    def f(v):
        s = xp.sum(v)
        scale = 2.0 if float(s) > 0 else -1.0  # computes s, as Dask does for float()
        return xp.sum(v**2) * scale

    g = pa.grad(f)(x)
    assert isinstance(g, da.Array)
    np.testing.assert_allclose(g.compute(), 4 * np.linspace(0.5, 1.5, 6), rtol=1e-13)
    with lazily(), pytest.raises(AssertionError, match="was computed"):
        pa.grad(f)(x)


# ------------------------------------------------------------------------------ loops that read values


def _while_chunk_steps(n):
    """(chunk multiplications run, the result) of a while_loop of ``n`` steps on a carry of two chunks;
    each step's condition is a value, so the loop computes at every step."""
    runs = []

    def scaled(block):
        runs.append(1)
        return block * 0.99

    x0 = chunked(np.linspace(1.0, 2.0, 6), chunks=3)
    meta = np.empty((0,), dtype=np.float64)  # no call on an empty block to find it
    x = pa.while_loop(lambda x: x[0] > 0.99 ** (n - 0.5), lambda x: x.map_blocks(scaled, meta=meta), x0)
    return len(runs), x.compute()


def test_a_while_loop_computes_each_step_once():
    """The carry is persisted at each step (the backend's ``persist``), so each chunk of each step is
    computed once. Before, step ``n`` computed the ``n`` steps before it again (quadratic: 30 s for 300
    steps of a 10-element carry, 2.3 s now)."""
    for n in (10, 40):
        runs, value = _while_chunk_steps(n)
        np.testing.assert_allclose(value, np.linspace(1.0, 2.0, 6) * 0.99**n, rtol=1e-13)
        assert runs == 2 * n, (n, runs)  # two chunks a step


def test_persisted_leaves_other_values_alone():
    x = chunked(np.arange(4.0))
    plain = np.arange(3.0)
    out = dispatch.persisted([x + 1, plain, 2.5])
    assert isinstance(out[0], da.Array) and out[1] is plain and out[2] == 2.5
    assert len(out[0].__dask_graph__()) == out[0].npartitions  # its chunks' values, no task left
    np.testing.assert_array_equal(out[0].compute(), np.arange(4.0) + 1)


def test_a_while_loops_backward_pass_keeps_its_graph_small():
    """grad of a while_loop on Dask: the backward pass persists its cotangents at each step, so the
    gradient's graph does not grow with the steps (it did, and each new op merged every layer before it:
    an ODE solve of 80 steps took 127 s, 31 s now) and the value is the loop's."""

    def grad_graph(n):
        x0 = chunked(np.linspace(1.0, 2.0, 6), chunks=3)

        def f(k):
            x, _ = pa.while_loop(lambda c: c[1] < n, lambda c: (c[0] * k, c[1] + 1), (x0, xp.asarray(0)))
            return xp.sum(x)

        g = pa.grad(f)(da.from_array(np.float64(0.99)))
        np.testing.assert_allclose(g.compute(), n * 0.99 ** (n - 1) * 9.0, rtol=1e-12)
        return len(g.__dask_graph__())

    assert grad_graph(40) == grad_graph(10)


def test_an_ode_solve_computes_each_attempt_once():
    """solve_ivp outside transforms reads its step control's values at every attempt: the state is
    persisted then, so each chunk of each right-hand-side call is computed once (100 steps took 232 s,
    each attempt recomputing all before it)."""
    from polyad.integrate import solve_ivp

    runs = []

    def decay(block):
        runs.append(1)
        return -0.5 * block

    meta = np.empty((0,), dtype=np.float64)
    y0 = chunked(np.linspace(1.0, 2.0, 6), chunks=3)
    sol = solve_ivp(lambda t, y: y.map_blocks(decay, meta=meta), (0.0, 1.0), y0, max_step=0.05)
    np.testing.assert_allclose(sol.y[:, -1].compute(), np.linspace(1.0, 2.0, 6) * np.exp(-0.5), rtol=1e-6)
    assert sol.nfev > 100 and len(runs) == 2 * sol.nfev, (sol.nfev, len(runs))  # two chunks a call
