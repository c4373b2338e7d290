"""The device-resident lane: inputs on array_api_strict's second device, ``Device("device1")``.

Arrays there refuse ``np.asarray`` and any mixing with arrays on the CPU device, as CuPy's arrays refuse
NumPy and CPU arrays. Every path below that converts to the host by accident, or makes an array on the
default device (a creation without a device, a constant folded at compile time, a draw), fails here on a
CPU the way it would fail (or silently leave the GPU) on CuPy. Each check asks that the result lives on
device1 and equals the same computation on CPU-device inputs (or a closed form).

It runs whatever POLYAD_BACKEND says (numpy, array_api_strict): results follow their inputs' library and
device, not the default backend.
"""

import contextlib

import numpy as np
import pytest
from helpers import assert_close, to_numpy

import polyad as pa
from polyad.backends.numpy.compiler import fusion_compile

xs = pytest.importorskip("array_api_strict")
xp = pa.xp

DEVICE = xs.Device("device1")
CPU = xs.Device("CPU_DEVICE")


def on(values, device=DEVICE, dtype=None):
    return xs.asarray(np.asarray(values, dtype=np.float64 if dtype is None else dtype), device=device)


def assert_on_device(result, device=DEVICE):
    """Every array leaf of ``result`` is an array_api_strict array on ``device``."""
    leaves = result if isinstance(result, tuple | list) else [result]
    for leaf in leaves:
        assert isinstance(leaf, type(xs.asarray(0.0))), type(leaf)
        assert leaf.device == device, f"the result is on {leaf.device}, its inputs on {device}"


def same_on_both_devices(fn, *values, rtol=1e-12, atol=1e-14):
    """``fn`` on device1 inputs: on device1, equal to ``fn`` on CPU-device inputs (the reference)."""
    got = fn(*[on(v) for v in values])
    assert_on_device(got)
    expected = fn(*[on(v, CPU) for v in values])
    assert_close(to_numpy(got), to_numpy(expected), rtol=rtol, atol=atol)
    return got


X = [0.3, -0.5, 0.7, 1.1]


@pytest.fixture(params=["first call", "compiled"])
def compiled_mode(request, monkeypatch):
    """pa.jit's two ways of running a graph: its first calls run the traced graph node by node
    (``interpret_graph``), later ones the optimised, compiled code (made at once with "wait")."""
    if request.param == "compiled":
        monkeypatch.setenv(fusion_compile.ENV_COMPILE, "wait")
    return request.param


# ------------------------------------------------------------------------------ loops under pa.jit


def _scan_loss(v):
    def step(c, _):
        return c * 0.9 + 0.1 * xp.sin(c), None

    c, _ = pa.scan(step, v, None, length=4)
    return xp.sum(c * c)


def _while_loss(v):
    count = xp.asarray(0, device=v.device)
    out = pa.while_loop(lambda c: c[1] < 3, lambda c: (c[0] * 1.1 + xp.sin(c[0]), c[1] + 1), (v, count),
                        checkpoints=2)  # fmt: skip
    return xp.sum(out[0] * out[0])


def _fori_loss(v):
    return xp.sum(pa.fori_loop(0, 3, lambda i, c: c * 1.1 + xp.sin(c) * xp.astype(i, c.dtype), v) ** 2)


def _cond_loss(v):
    return xp.sum(pa.cond(xp.sum(v) > 0, lambda u: u * u, lambda u: 3 * u, v))


def _checkpoint_loss(v):
    return xp.sum(pa.checkpoint(lambda u: xp.sin(u) * u)(v))


def _solve_ivp_loss(v):
    t_eval = xp.asarray([0.5], device=v.device)
    sol = pa.integrate.solve_ivp(lambda t, y: -y * y, (0.0, 0.5), v, t_eval=t_eval, rtol=1e-10, atol=1e-12)
    return xp.sum(sol.y)


LOOPS = {
    "scan": _scan_loss,
    "while_loop": _while_loss,
    "fori_loop": _fori_loss,
    "cond": _cond_loss,
    "checkpoint": _checkpoint_loss,
}


@pytest.mark.parametrize("name", list(LOOPS))
def test_jitted_gradients_of_loops_stay_on_the_device(name, compiled_mode):
    loss = LOOPS[name]
    jitted = pa.jit(pa.grad(loss))
    got = same_on_both_devices(jitted, X)
    same_on_both_devices(jitted, X)  # the cached entry (compiled in the background by now, or not)
    assert_close(to_numpy(got), to_numpy(pa.grad(loss)(on(X, CPU))))  # eager gradient as the reference


def test_jitted_gradient_of_solve_ivp_stays_on_the_device(compiled_mode):
    x = [0.5, 1.0]
    got = same_on_both_devices(pa.jit(pa.grad(_solve_ivp_loss)), x, rtol=1e-10)
    # y' = -y^2: y(t) = y0 / (1 + y0 t), dy(t)/dy0 = 1 / (1 + y0 t)^2 (to the integrator's tolerance)
    y0 = np.asarray(x)
    assert_close(to_numpy(got), 1 / (1 + 0.5 * y0) ** 2, rtol=1e-7)


@pytest.mark.parametrize("name", ["fori_loop", "while_loop", "cond"])
def test_loops_over_another_librarys_arrays_with_the_numpy_default(name):
    # the index of fori_loop, the Python int in a carry and cond's branch number are made without a
    # device, on the default backend (NumPy's int64): traced for array_api_strict's arrays they become
    # its dtype and device
    with pa.backend("numpy"):
        got = same_on_both_devices(pa.grad(LOOPS[name]), X)
        jitted = same_on_both_devices(pa.jit(pa.grad(LOOPS[name])), X)
    assert_close(to_numpy(jitted), to_numpy(got))


def test_a_compiled_graph_makes_its_creations_on_the_given_device():
    def f(v):
        return xp.sin(v) * xp.ones_like(v) + xp.zeros_like(v) + xp.full_like(v, 2.0)

    graph = pa.make_graph(pa.grad(lambda v: xp.sum(f(v))), on(X))
    compiled = graph.compile("array_api_strict", device=DEVICE)
    got = compiled(on(X))
    assert_on_device(got)
    assert_close(to_numpy(got), np.cos(X))


def test_jit_traces_on_the_device_not_on_its_cache_key(monkeypatch):
    # CuPy's devices cannot be hashed: pa.jit's cache keys them as a tuple, which is no device (CuPy raised
    # "int() argument must be ... not 'tuple'" making an array there); here device1 is keyed that way too
    from polyad.core import dispatch

    key = dispatch.device_key
    monkeypatch.setattr(dispatch, "device_key", lambda d: ("Device", repr(d)) if d == DEVICE else key(d))

    def f(v):
        return xp.sum(xp.asarray([1.0, 2.0, 3.0, 4.0], device=v.device) * xp.arange(4.0, device=v.device) * v)

    got = same_on_both_devices(pa.jit(pa.grad(f)), X)
    assert_close(to_numpy(got), np.arange(4.0) * np.arange(1.0, 5.0))


def test_jit_refuses_an_array_of_another_library_beside_the_inputs():
    # an array made without a device (on the default backend, NumPy) or a NumPy closure beside device
    # inputs: eager transforms refuse the mix by name; pa.jit failed with array_api_strict's own
    # "result_type() inputs must be Array API arrays" (CuPy's raw errors on a GPU)
    weights = np.eye(4) * 2.0
    with pa.backend("numpy"):
        for f in (lambda v: v + xp.ones(4), lambda v: weights @ v):
            with pytest.raises(
                TypeError, match=r"pa\.jit\(.*arrays of two libraries.*array_api_strict.*numpy"
            ):
                pa.jit(f)(on(X))
        got = pa.jit(lambda v: v + xp.ones(4, device=v.device))(on(X))  # the fix the message names
    assert_on_device(got)
    assert_close(to_numpy(got), np.asarray(X) + 1.0)


def test_arange_with_device_tensor_bounds():
    # the length is read from the bounds: on purpose, through the backend (CuPy's arange refused its own
    # 0-d arrays: "Implicit conversion to a NumPy array")
    got = same_on_both_devices(pa.grad(lambda a: xp.sum(xp.arange(a, a + 3.0))), 1.0)
    assert float(to_numpy(got)) == 3.0
    got = same_on_both_devices(pa.grad(lambda s: xp.sum(xp.arange(0.0, 2.0, s))), 0.5)
    assert float(to_numpy(got)) == 6.0  # d/ds of 0 + s + 2s + 3s
    values = xp.arange(pa.Tensor(on(1.0)), 3.0, 0.5)
    assert values.device == DEVICE
    assert_close(to_numpy(values), np.asarray([1.0, 1.5, 2.0, 2.5]))


# ------------------------------------------------------------------------------ random, NumPy dispatch


def test_draws_shifted_by_arrays_are_made_on_their_device():
    loc, scale = on([0.0, 10.0, -5.0]), on([1.0, 0.5, 2.0])
    gen, ref = pa.random.Generator(3), pa.random.Generator(3)
    z = gen.normal(loc=loc, scale=scale)
    assert_on_device(z)
    # the same stream on the CPU device, shifted and scaled there
    expected = to_numpy(ref.normal(size=3, device=CPU)) * to_numpy(scale) + to_numpy(loc)
    assert_close(to_numpy(z), expected)
    u = gen.uniform(low=loc, high=loc + 1.0)
    assert_on_device(u)
    assert np.all((to_numpy(u) >= to_numpy(loc)) & (to_numpy(u) < to_numpy(loc) + 1.0))
    assert_on_device(pa.random.normal(0.0, scale))
    assert_on_device(pa.random.uniform(high=scale))


def test_numpy_delete_and_insert_take_a_device_index_array():
    index = xs.asarray([1, 3], device=DEVICE)

    def loss(v):
        return xp.sum(np.delete(v, index) ** 2) + xp.sum(np.insert(v, index, 2.0) ** 2)

    got = pa.grad(loss)(on(X))
    assert_on_device(got)
    x = np.asarray(X)
    keep = np.ones(4)
    keep[[1, 3]] = 0.0
    assert_close(to_numpy(got), 2 * x * keep + 2 * x)  # d/dx of both sums of squares


def test_numpy_functions_on_device_tensors():
    def loss(v):
        return np.sum(np.cumsum(v) ** 2) + np.mean(np.diff(v) ** 2) + np.linalg.norm(np.flip(v))

    got = same_on_both_devices(pa.grad(loss), X)
    x = np.asarray(X)
    eps = 1e-6
    fd = [(float(loss(x + eps * e)) - float(loss(x - eps * e))) / (2 * eps) for e in np.eye(4)]
    assert_close(to_numpy(got), np.asarray(fd), rtol=1e-6)


@pytest.mark.parametrize("name", ["fft", "rfft2", "ihfftn", "dct", "idstn"])
def test_scipy_fft_on_device_arrays_runs_on_their_device(name):
    # SciPy's own backend would np.asarray them (CuPy refuses): polyad's computes them by their library
    scipy_fft = pytest.importorskip("scipy.fft")
    x = np.random.default_rng(2).normal(size=(3, 4))
    with pa.use_scipy_fft_backend():
        got = getattr(scipy_fft, name)(on(x))
        assert_on_device(got)
        g = pa.grad(lambda v: xp.sum(xp.abs(getattr(scipy_fft, name)(v)) ** 2))(on(x))
        assert_on_device(g)
    assert_close(to_numpy(got), getattr(scipy_fft, name)(x), rtol=1e-12, atol=1e-12)
    eps, e = 1e-6, np.zeros_like(x)
    e[1, 2] = eps

    def energy(v):
        return np.sum(np.abs(getattr(scipy_fft, name)(v)) ** 2)

    assert abs(to_numpy(g)[1, 2] - (energy(x + e) - energy(x - e)) / (2 * eps)) < 1e-6


# ------------------------------------------------------------------------------ SciPy-backed solvers


def test_optimize_results_come_back_to_the_inputs_device():
    from polyad import optimize

    a = [1.0, 2.0]

    def minimised(a):
        return optimize.minimize(lambda x, a: xp.sum((x - a) ** 2 + 0.1 * x**4), xp.zeros_like(a), args=(a,),
                                 method="BFGS").x  # fmt: skip

    def rooted(a):
        return optimize.root(lambda x, a: x**3 + x - a, xp.ones_like(a), args=(a,), tol=1e-12).x

    def fixed(a):
        return optimize.fixed_point(lambda x, a: 0.5 * (x + a / x), xp.ones_like(a), args=(a,))

    def squares(a):
        return optimize.least_squares(lambda x, a: x * x - a, xp.ones_like(a), args=(a,), xtol=1e-14).x

    for solve in (minimised, rooted, fixed, squares):
        same_on_both_devices(solve, a, rtol=1e-6, atol=1e-8)
        same_on_both_devices(lambda a, solve=solve: pa.jacrev(solve)(a), a, rtol=1e-6, atol=1e-8)
    # closed forms: sqrt(a), and d sqrt(a) / da = 1 / (2 sqrt(a))
    assert_close(to_numpy(fixed(on(a))), np.sqrt(a))
    assert_close(to_numpy(pa.jacrev(squares)(on(a))), np.diag(0.5 / np.sqrt(a)), rtol=1e-7)

    # SciPy's report follows the solution to the inputs' device (it stayed NumPy arrays): fun, jac, grad at
    # the solution, the residuals and gradients there near zero, the Jacobian of x^2 - a diag(2 sqrt(a))
    squares_report = optimize.least_squares(lambda x, a: x * x - a, xp.ones(2, device=DEVICE), args=(on(a),),
                                            xtol=1e-14)  # fmt: skip
    minimum_report = optimize.minimize(lambda x, a: xp.sum((x - a) ** 2), xp.zeros(2, device=DEVICE),
                                       args=(on(a),), method="BFGS")  # fmt: skip
    root_report = optimize.root(
        lambda x, a: x**3 + x - a, xp.ones(2, device=DEVICE), args=(on(a),), tol=1e-12
    )
    reports = [
        squares_report.fun,
        squares_report.jac,
        squares_report.grad,
        minimum_report.jac,
        root_report.fun,
    ]
    assert_on_device(reports)
    assert_close(to_numpy(squares_report.jac), np.diag(2 * np.sqrt(a)), rtol=1e-6)
    for near_zero in (squares_report.fun, squares_report.grad, minimum_report.jac, root_report.fun):
        assert_close(to_numpy(near_zero), np.zeros(2), atol=1e-6)

    def scalar_root(a):
        return optimize.root_scalar(lambda x, a: x**3 - a, args=(a,), bracket=(0.0, 2.0), method="brentq",
                                    xtol=1e-14).root  # fmt: skip

    r = scalar_root(on(2.0))
    assert_on_device(r)
    assert_close(to_numpy(r), 2.0 ** (1 / 3))
    g = pa.grad(scalar_root)(on(2.0))
    assert_on_device(g)
    assert_close(to_numpy(g), 1 / (3 * 2.0 ** (2 / 3)), rtol=1e-8)


def test_sparse_linalg_solves_return_to_the_right_hand_sides_device():
    # cg, gmres and spsolve: tests/test_solvers.py; here the factorisations, bicgstab and the derivatives
    sp = pytest.importorskip("scipy.sparse")
    from polyad.sparse import linalg as splinalg

    K = np.array([[4.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 2.0]])
    A, b = sp.csc_matrix(K), [1.0, 2.0, 3.0]
    solutions = [splinalg.splu(A).solve(on(b)), splinalg.factorized(A)(on(b)),
                 splinalg.bicgstab(on(K), on(b), rtol=1e-13)[0]]  # fmt: skip
    assert_on_device(solutions)
    for x in solutions:
        assert_close(to_numpy(x), np.linalg.solve(K, b), rtol=1e-10)

    def energy(v):  # d/db of |K^-1 b|^2 = 2 K^-T K^-1 b
        return xp.sum(splinalg.spsolve(A, v) ** 2) + xp.sum(splinalg.cg(A, v, rtol=1e-13)[0] ** 2)

    g = pa.grad(energy)(on(b))
    assert_on_device(g)
    inverse = np.linalg.inv(K)
    assert_close(to_numpy(g), 4 * inverse.T @ inverse @ np.asarray(b), rtol=1e-9)


# ------------------------------------------------------------------------------ CuPy behaviours, on CPU


def _cupy_extras_on_numpy(monkeypatch):
    """``polyad/backends/cupy/extras.py`` loaded against a stand-in ``cupy`` that computes with NumPy
    (its functions are CuPy's NumPy-compatible API)."""
    import importlib
    import sys
    import types

    stand_in = types.ModuleType("cupy")
    for name in ("stack", "moveaxis", "asarray", "int64", "uint64"):
        setattr(stand_in, name, getattr(np, name))
    cupyx = types.ModuleType("cupyx")

    def scatter_add(a, key, values):  # cupy.add.at's dtypes, else its error
        if a.dtype.name not in ("int32", "int64", "float16", "float32", "float64", "uint32", "uint64"):
            raise TypeError(
                "cupy.add.at only supports int32, int64, float16, float32, float64, uint32, uint64"
            )
        np.add.at(a, key, values)

    cupyx.scatter_add = scatter_add
    raising = []  # cupyx.errstate(linalg="raise") blocks open

    @contextlib.contextmanager
    def errstate(linalg=None):
        raising.append(linalg == "raise")
        try:
            yield
        finally:
            raising.pop()

    def inv(a):  # CuPy's: garbage for a singular matrix, LinAlgError only under errstate(linalg="raise")
        if abs(np.linalg.det(a)) < 1e-300:
            if raising and raising[-1]:
                raise np.linalg.LinAlgError("Singular matrix")
            return np.full_like(a, np.nan)
        return np.linalg.inv(a)

    cupyx.errstate = errstate
    stand_in.linalg = types.SimpleNamespace(inv=inv)
    monkeypatch.setitem(sys.modules, "cupy", stand_in)
    monkeypatch.setitem(sys.modules, "cupyx", cupyx)
    # extras.py also imports cupyx's sparse modules (the sparse contract): empty stand-ins, unused here
    for name in ("cupyx.scipy", "cupyx.scipy.sparse", "cupyx.scipy.sparse.linalg"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    cupyx.scipy = sys.modules["cupyx.scipy"]
    cupyx.scipy.sparse = sys.modules["cupyx.scipy.sparse"]
    cupyx.scipy.sparse.linalg = sys.modules["cupyx.scipy.sparse.linalg"]
    monkeypatch.delitem(sys.modules, "polyad.backends.cupy.extras", raising=False)
    extras = importlib.import_module("polyad.backends.cupy.extras")
    monkeypatch.delitem(sys.modules, "polyad.backends.cupy.extras")
    return extras


@pytest.mark.parametrize("name", ["eigh", "svd"])
def test_vmap_of_a_decomposition_gives_the_eager_answers_one_matrix_at_a_time(name, monkeypatch):
    # CuPy's batched eigh/svd (cuSOLVER's syevj, gesvdj) pick other vector signs than one matrix at a time:
    # its backend decomposes a stack matrix by matrix (extras.decompose_stack); here that code runs on
    # NumPy's arrays in place of the backend under test's own batched call
    from polyad.core import dispatch

    extras = _cupy_extras_on_numpy(monkeypatch)
    calls = []

    def decompose_stack(f, x):
        calls.append(tuple(x.shape))
        as_numpy = dispatch.default_backend().to_numpy
        parts = extras.decompose_stack(lambda m: tuple(as_numpy(p) for p in f(xs_of(m))), as_numpy(x))
        return tuple(xs_of(p) for p in parts)

    backend = dispatch.default_backend()

    def xs_of(a):
        return backend.xp.asarray(np.asarray(a))

    monkeypatch.setattr(backend.xp, "decompose_stack", decompose_stack, raising=False)
    rng = np.random.default_rng(0)
    a = rng.normal(size=(3, 4, 4))
    a = xs_of(a + np.swapaxes(a, -1, -2))
    f = getattr(pa.xp.linalg, name)
    batched = pa.vmap(f)(a)
    assert calls and calls[-1] == (3, 4, 4)
    eager = [f(a[i, ...]) for i in range(3)]
    for k, part in enumerate(batched):
        for i in range(3):
            assert_close(
                to_numpy(part)[i], to_numpy(eager[i][k]), rtol=0, atol=0
            )  # the same routine: bitwise


@pytest.mark.parametrize("dtype", ["complex128", "complex64", "int8", "uint16", "bool", "float32"])
def test_cupy_scatter_add_takes_every_dtype(dtype, monkeypatch):
    # cupy.add.at refuses complex and small integer arrays (the CuPy lane's lu_factor of complex matrices,
    # second order): the backend's scatter_add/index_add add parts or widen, then cast back
    extras = _cupy_extras_on_numpy(monkeypatch)
    rng = np.random.default_rng(1)
    target = (rng.normal(size=(4, 3)) * 3).astype(dtype)
    values = (rng.normal(size=(4, 5)) * 3).astype(dtype)
    if dtype.startswith("complex"):
        target, values = target + 1j * target[::-1], values - 2j * values[::-1]
    indices = np.asarray([0, 2, 2, 1, 0])  # repeats add up
    expected = target.copy()
    np.add.at(np.moveaxis(expected, 1, 0), indices, np.moveaxis(values, 1, 0))
    got = extras.scatter_add(target, indices, values, 1)
    assert got.dtype == target.dtype
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    expected = target.copy()
    np.add.at(expected, (indices[:4], indices[1:]), values[:, 0])
    got = extras.index_add(target, (indices[:4], indices[1:]), values[:, 0])
    assert got.dtype == target.dtype
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_cupy_inverse_of_a_singular_matrix_raises_as_numpys(monkeypatch):
    # CuPy's inv returns garbage for a singular matrix without an error; the backend's raises LinAlgError
    # as NumPy's does (hessian of det at a singular matrix: tests/test_edges.py)
    extras = _cupy_extras_on_numpy(monkeypatch)
    with pytest.raises(np.linalg.LinAlgError):
        extras.linalg["inv"](np.asarray([[1.0, 2.0], [2.0, 4.0]]))
    assert_close(extras.linalg["inv"](np.asarray([[2.0, 0.0], [0.0, 4.0]])), np.diag([0.5, 0.25]))


def _python_number_carries(x):
    # each loop's carry pairs the device array with a Python number (a counter, a scale)
    a, _ = pa.fori_loop(0, 3, lambda i, c: (c[0] * 1.5 + c[1], c[1] + 1.0), (x, 0.0))
    b, _ = pa.scan(lambda c, _: ((c[0] * c[1], c[1] + 1.0), None), (x, 1.0), length=3)[0]
    w, _ = pa.while_loop(lambda c: c[1] < 3.0, lambda c: (c[0] * c[1], c[1] + 1.0), (x, 1.0))
    c = pa.cond(True, lambda u, s: u * s, lambda u, s: u + s, x, 2.0)
    d = pa.checkpoint(lambda u, s: u * s)(x, 2.0)
    return xp.sum(a) + xp.sum(b) + xp.sum(w) + xp.sum(c) + xp.sum(d)


@pytest.mark.parametrize(
    "transform",
    [lambda f: f, pa.grad, lambda f: pa.jit(pa.grad(f)), lambda f: pa.jit(f)],
    ids=["eager", "grad", "jit(grad)", "jit"],
)
def test_python_numbers_in_a_carry_follow_the_arrays_device(transform):
    # a counter (x, 0.0) over a device x became an array of the default backend (NumPy), and the body's
    # x * n mixed two libraries: with CuPy inputs and NumPy the default, every such loop failed
    got = same_on_both_devices(transform(_python_number_carries), X)
    # a = 3.375 x + 3.5, b = 6 x, w = c = d = 2 x: the sum 15.375 sum(x) + 14, its gradient 15.375
    expected = 15.375 * np.sum(X) + 14.0 if got.ndim == 0 else np.full(4, 15.375)
    assert_close(to_numpy(got), expected, rtol=1e-13, atol=1e-13)
    batched = pa.vmap(pa.grad(_python_number_carries))(on([X, X]))
    assert_on_device(batched)
    assert_close(to_numpy(batched), np.full((2, 4), 15.375), rtol=1e-13, atol=1e-13)


# ------------------------------------------------------------------------------ integrators

# these pin the numpy default themselves (the case that failed): the same test on every lane, run once
numpy_lane_only = pytest.mark.skipif(
    pa.get_backend() != "numpy", reason="pins the numpy default backend itself: run on the numpy lane"
)


def _lattice(t, y):  # a 1-D diffusion lattice with a cubic sink: a tridiagonal Jacobian
    inner = y[2:] - 2 * y[1:-1] + y[:-2]
    return xp.concat([y[1:2] - 2 * y[:1], inner, y[-2:-1] - 2 * y[-1:]]) - y**3


def _decay(v, method, **options):
    return pa.integrate.solve_ivp(lambda t, y: -y * y, (0.0, 0.5), v, method=method, rtol=1e-8, atol=1e-10,
                                  **options)  # fmt: skip


def _decay_solution(y0, t):  # y' = -y^2: y(t) = y0 / (1 + y0 t), dy(t)/dy0 = 1 / (1 + y0 t)^2
    y0 = np.asarray(y0)[:, None]
    return y0 / (1 + y0 * np.asarray(t)), 1 / (1 + y0 * np.asarray(t)) ** 2


@numpy_lane_only
@pytest.mark.parametrize("method", ["RK45", "DOP853", "Radau", "BDF"])
def test_solve_ivp_outside_transforms_follows_the_device_with_the_numpy_default(method):
    # outside transforms the counters were made with polyad.xp.int64 (the default backend's: NumPy's) in
    # y0's own namespace: every eager call on another library's arrays failed
    y0, t_eval = [0.5, 1.0], [0.25, 0.5]
    with pa.backend("numpy"):
        sol = _decay(on(y0), method, t_eval=on(t_eval), dense_output=True)
        at = sol.sol(0.4)
    assert_on_device([sol.y, sol.t, at])
    assert_close(to_numpy(sol.t), np.asarray(t_eval))
    assert_close(to_numpy(sol.y), _decay_solution(y0, t_eval)[0], rtol=1e-6)
    assert_close(to_numpy(at), _decay_solution(y0, [0.4])[0][:, 0], rtol=1e-5)


@numpy_lane_only
def test_solve_ivp_under_transforms_follows_the_device_with_the_numpy_default():
    # BDF's step constants were made on the default device (its traced step mixed two libraries), and
    # sol(t) under a transform made its times there
    y0 = [0.5, 1.0]
    with pa.backend("numpy"):
        g = pa.grad(lambda v: xp.sum(_decay(v, "RK45", dense_output=True).sol(0.4)))(on(y0))
        batched = pa.vmap(lambda v: _decay(v, "BDF").y[:, -1])(on([y0, [2.0, 0.25]]))
    assert_on_device([g, batched])
    assert_close(to_numpy(g), _decay_solution(y0, [0.4])[1][:, 0], rtol=1e-6)
    assert_close(to_numpy(batched), _decay_solution([0.5, 1.0, 2.0, 0.25], [0.5])[0].reshape(2, 2), rtol=1e-5)


@numpy_lane_only
def test_solve_ivp_events_and_detected_sparsity_on_the_device():
    # the event's root is found by float iterations and made an array again (on the default device, before);
    # the sparse Newton matrices of a detected pattern go to SuperLU by counted host copies and their
    # solutions come back to the device
    from polyad import backends

    with pa.backend("numpy"):
        sol = pa.integrate.solve_ivp(lambda t, y: -y, (0.0, 5.0), on([0.5, 1.0]), method="BDF", rtol=1e-10,
                                     atol=1e-12, events=lambda t, y: y[0] - 0.25)  # fmt: skip
        assert_on_device([sol.t_events[0], sol.y_events[0]])
        assert_close(to_numpy(sol.t_events[0]), np.asarray([np.log(2.0)]), rtol=1e-7)  # 0.5 exp(-t) = 0.25
        y0 = np.linspace(0.2, 1.0, 6)
        for method in ("Radau", "BDF"):
            before = backends.host_copies()
            sparse = _lattice_solve(on(y0), method, jac_sparsity="detect")
            assert backends.host_copies() > before  # SuperLU's deliberate, counted copies
            assert_on_device(sparse)
            dense = _lattice_solve(y0, method)  # the dense Newton matrices, on NumPy
            assert_close(to_numpy(sparse), to_numpy(dense), rtol=1e-10)


def _lattice_solve(y0, method, **options):
    return pa.integrate.solve_ivp(_lattice, (0.0, 0.5), y0, method=method, rtol=1e-6, atol=1e-8,
                                  **options).y[:, -1]  # fmt: skip


@pytest.mark.parametrize("name", ["rtol", "tol"])
def test_cupyx_krylov_gets_the_tolerance_under_its_own_name(name, monkeypatch):
    # CuPy 14's cupyx names the relative tolerance rtol, older cupyx tol: the backend passes polyad's rtol
    # under the name the installed solver's signature has (a fixed name failed on the CuPy lane with "cg()
    # got an unexpected keyword argument 'tol'"); here a stand-in cupyx.cg with either signature solves
    # by SciPy's
    import scipy.sparse.linalg as spla

    extras = _cupy_extras_on_numpy(monkeypatch)
    seen = []

    def solve(A, b, x0, tolerance, atol, maxiter, M):
        seen.append(tolerance)
        return spla.cg(A, b, x0=x0, rtol=tolerance, atol=atol, maxiter=maxiter, M=M)

    if name == "rtol":

        def cg(A, b, x0=None, *, rtol=1e-5, maxiter=None, M=None, callback=None, atol=None):
            return solve(A, b, x0, rtol, atol, maxiter, M)
    else:

        def cg(A, b, x0=None, tol=1e-5, maxiter=None, M=None, callback=None, atol=None):
            return solve(A, b, x0, tol, atol, maxiter, M)

    monkeypatch.setattr(extras.cupyx_linalg, "cg", cg, raising=False)
    monkeypatch.setattr(extras.cupyx_linalg, "LinearOperator", spla.LinearOperator, raising=False)
    K = np.array([[4.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 2.0]])
    b = np.array([1.0, 2.0, 3.0])
    x, info = extras.sparse.krylov("cg", lambda v: K @ v, b, rtol=1e-13)
    assert seen == [1e-13] and info == 0
    assert_close(x, np.linalg.solve(K, b), rtol=1e-11)
    with pytest.raises(NotImplementedError, match="cupyx.scipy.sparse.linalg has no bicgstab"):
        extras.sparse.krylov("bicgstab", lambda v: K @ v, b)
