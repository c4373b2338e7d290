"""Large stiff systems (issue 36, item 5): ``solve_ivp(..., jac_sparsity=)`` with BDF and Radau forms its
Newton matrices from ``pa.sparse_jacfwd`` and factorises them by the backend's sparse LU (SuperLU through
the contract), outside transforms and under grad, jvp, vmap (per example) and jit. The problem is the 2-D
Brusselator PDE of DifferentialEquations.jl's "Solving Large Stiff Equations" tutorial (periodic N x N
grid, alpha = 10 / dx^2, dx = 1 / (N - 1), the forcing disc switched on at t = 1.1); the reference is
SciPy's BDF (Radau) with the same ``jac_sparsity`` (finite-difference Jacobians: the solutions agree to
the tolerance, 10 x rtol), the derivative's forward mode against the discrete adjoint and central
differences."""

import tracemalloc

import numpy as np
import pytest
from helpers import start_tracemalloc, to_numpy

import polyad as pa
from polyad import backends
from polyad.integrate import solve_ivp

scipy_integrate = pytest.importorskip("scipy.integrate")

xp = pa.xp
RTOL, ATOL = 1e-6, 1e-8


def arr(values):
    """An array of the backend under test (a NumPy array to ``xp.asarray`` stays NumPy's)."""
    return xp.asarray(np.asarray(values, dtype=np.float64).tolist(), dtype=xp.float64)


def grid(n):
    """The forcing's disc (values 5 inside) and the initial state ``(u, v)`` flattened, on the host."""
    s = np.linspace(0.0, 1.0, n)
    x, y = np.meshgrid(s, s, indexing="ij")
    disc = np.where((x - 0.3) ** 2 + (y - 0.6) ** 2 <= 0.1**2, 5.0, 0.0)
    u0, v0 = 22.0 * (y * (1 - y)) ** 1.5, 27.0 * (x * (1 - x)) ** 1.5
    return disc, np.concatenate([u0.ravel(), v0.ravel()])


def brusselator(n, disc, lib):
    """The right-hand side ``f(t, z, alpha)`` in the namespace ``lib`` (polyad's or NumPy's)."""

    def lap(w):  # the periodic five-point Laplacian
        rolled = lib.roll(w, 1, axis=0) + lib.roll(w, -1, axis=0) + lib.roll(w, 1, axis=1)
        return rolled + lib.roll(w, -1, axis=1) - 4 * w

    def f(t, z, alpha):
        u, v = lib.reshape(z[: n * n], (n, n)), lib.reshape(z[n * n :], (n, n))
        a = alpha * (n - 1) ** 2
        force = lib.where(t >= 1.1, disc, 0.0)
        du = a * lap(u) + 1.0 + u * u * v - 4.4 * u + force
        dv = a * lap(v) + 3.4 * u - u * u * v
        return lib.concat([lib.reshape(du, (-1,)), lib.reshape(dv, (-1,))])

    return f


def problem(n):
    disc, y0 = grid(n)
    f = brusselator(n, arr(disc), xp)
    pattern = pa.jacobian_sparsity(lambda z: f(arr(0.0), z, 10.0))(arr(y0))
    host_f = brusselator(n, disc, np)
    if not hasattr(np, "concat"):  # NumPy < 2
        np.concat = np.concatenate
    return f, host_f, y0, pattern


def counted_splu(monkeypatch):
    """The calls to the backend's sparse LU, counted (the support object of the default backend)."""
    support = pa.dispatch.backend_of_array(xp.asarray([0.0])).sparse
    calls = []
    original = support.splu

    def splu(matrix, **options):
        calls.append(matrix.shape)
        return original(matrix, **options)

    monkeypatch.setattr(support, "splu", splu)
    return calls


@pytest.mark.parametrize("method", ["BDF", "Radau"])
def test_brusselator_matches_scipy_with_sparse_newton(method, monkeypatch):
    """N = 32 (2,048 states; Radau N = 8), over the forcing's switch at t = 1.1: the final state agrees
    with SciPy's (same method, same jac_sparsity) to 10 x rtol; every Newton matrix is a sparse LU (BDF:
    one factorisation per matrix, ``nlu`` of them; Radau: two per attempt, the stages' 3n one and the
    error's), none dense."""
    n, span = (32, (1.05, 1.15)) if method == "BDF" else (8, (1.05, 1.15))
    f, host_f, y0, pattern = problem(n)
    ref = scipy_integrate.solve_ivp(
        host_f, span, y0, method, args=(10.0,), rtol=RTOL, atol=ATOL, jac_sparsity=pattern
    )
    calls = counted_splu(monkeypatch)
    ours = solve_ivp(f, span, arr(y0), method, args=(10.0,), rtol=RTOL, atol=ATOL, jac_sparsity=pattern)
    assert ours.success and ref.success
    np.testing.assert_allclose(to_numpy(ours.y)[:, -1], ref.y[:, -1], rtol=10 * RTOL, atol=10 * ATOL)
    size = 2 * n * n
    assert len(calls) == ours.nlu > 0
    expected = {(size, size)} if method == "BDF" else {(size, size), (3 * size, 3 * size)}
    assert set(calls) == expected


def test_sparse_newton_memory_is_far_below_a_dense_jacobian():
    """N = 32: the solve's peak memory (tracemalloc) stays under a quarter of one dense Jacobian (2,048^2
    doubles, 32 MiB), where forming I - c J densely takes three such matrices."""
    n = 32
    f, _, y0, pattern = problem(n)
    z0 = arr(y0)
    solve_ivp(f, (0.0, 1e-4), z0, "BDF", args=(10.0,), jac_sparsity=pattern)  # warm-up: caches, imports
    dense_bytes = (2 * n * n) ** 2 * 8
    start_tracemalloc()
    try:
        result = solve_ivp(
            f, (1.0, 1.01), z0, "BDF", args=(10.0,), rtol=RTOL, atol=ATOL, jac_sparsity=pattern
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.success
    assert peak < dense_bytes / 4, (
        f"peak {peak / 2**20:.1f} MiB, a dense Jacobian {dense_bytes / 2**20:.0f} MiB"
    )


def test_detected_pattern_and_host_copies():
    """jac_sparsity="detect" finds the pattern once and gives the same solution as the given pattern; on a
    library without sparse matrices (array_api_strict) the factorisation goes through SuperLU by counted
    host copies (the CSR arrays once per factorisation, each solve's vector), on NumPy none."""
    n = 16
    f, _, y0, pattern = problem(n)
    z0 = arr(y0)
    given = solve_ivp(f, (0.0, 0.05), z0, "BDF", args=(10.0,), jac_sparsity=pattern)
    before = backends.host_copies()
    detected = solve_ivp(f, (0.0, 0.05), z0, "BDF", args=(10.0,), jac_sparsity="detect")
    copies = backends.host_copies() - before
    np.testing.assert_array_equal(to_numpy(detected.y), to_numpy(given.y))
    assert detected.nlu == given.nlu
    backend = pa.dispatch.backend_of_array(z0)
    if (
        backend.sparse.container == "csr"
        and backend.sparse.library == "scipy.sparse"
        and backend.name == "numpy"
    ):
        assert copies == 0
    else:
        assert copies > 0


def test_jac_sparsity_of_the_wrong_shape_is_refused():
    f, _, y0, _ = problem(4)
    with pytest.raises(ValueError, match=r"jac_sparsity must be of shape \(32, 32\).*got \(31, 31\)"):
        solve_ivp(f, (0.0, 0.1), arr(y0), "BDF", args=(10.0,), jac_sparsity=np.ones((31, 31), bool))


@pytest.mark.slow
def test_brusselator_n128_matches_scipy():
    """N = 128 (32,768 states), BDF with the detected pattern against SciPy's BDF with jac_sparsity: the
    final state to 10 x rtol (a dense Jacobian would be 8 GiB)."""
    n, span = 128, (1.0, 1.2)
    f, host_f, y0, pattern = problem(n)
    ref = scipy_integrate.solve_ivp(
        host_f, span, y0, "BDF", args=(10.0,), rtol=RTOL, atol=ATOL, jac_sparsity=pattern
    )
    ours = solve_ivp(f, span, arr(y0), "BDF", args=(10.0,), rtol=RTOL, atol=ATOL, jac_sparsity="detect")
    assert ours.success
    np.testing.assert_allclose(to_numpy(ours.y)[:, -1], ref.y[:, -1], rtol=10 * RTOL, atol=10 * ATOL)


def mean_u_of(f, n, z0, method, sparsity, span=(0.0, 0.005)):
    """alpha -> mean u(T), the solve with the Newton matrices sparse (``sparsity`` a pattern) or dense."""

    def mean_u(alpha):
        r = solve_ivp(f, span, z0, method, args=(alpha,), rtol=RTOL, atol=ATOL, jac_sparsity=sparsity)
        return xp.mean(r.y[: n * n, -1])

    return mean_u


@pytest.mark.parametrize(
    "method, n, against_dense",
    [
        ("BDF", 8, False),
        ("Radau", 4, False),
        pytest.param("BDF", 4, True, marks=pytest.mark.slow),
        pytest.param("Radau", 4, True, marks=pytest.mark.slow),
        pytest.param("BDF", 128, False, marks=pytest.mark.slow),
    ],
)
def test_mean_u_derivative_through_the_sparse_newton_solves(method, n, against_dense, monkeypatch):
    """d(mean u(T))/d(alpha) under grad and jvp with jac_sparsity: the Newton, tangent and adjoint solves
    are sparse LU factorisations (counted; none on main, where transforms went dense), the discrete
    adjoint (pa.grad) agrees with forward mode (pa.jvp) to 1e-8 and both with central differences of the
    eager solve; ``against_dense`` (slow, N = 4): it equals the dense path's to 1e-10 (the same steps: the
    same Newton iterates, solved by another LU)."""
    f, _, y0, pattern = problem(n)
    z0 = arr(y0)
    span = (1.0, 1.0005) if n > 16 else (0.0, 0.005)
    mean_u = mean_u_of(f, n, z0, method, pattern, span)
    alpha = xp.asarray(10.0)
    calls = counted_splu(monkeypatch)
    adjoint = float(pa.grad(mean_u)(alpha))
    assert calls, "the adjoint went through no sparse factorisation"
    size = 2 * n * n
    expected = {(size, size)} if method == "BDF" else {(size, size), (3 * size, 3 * size)}
    assert set(calls) == expected  # the tangent systems too: no dense 3n x 3n matrix
    calls.clear()
    forward = float(pa.jvp(mean_u, (alpha,), (xp.asarray(1.0),))[1])
    assert calls
    h = 1e-3
    central = (float(mean_u(xp.asarray(10.0 + h))) - float(mean_u(xp.asarray(10.0 - h)))) / (2 * h)
    assert abs(adjoint - forward) <= 1e-8 * abs(forward)
    assert abs(forward - central) <= 1e-3 * abs(central)
    if against_dense:
        dense = float(pa.grad(mean_u_of(f, n, z0, method, None, span))(alpha))
        assert abs(adjoint - dense) <= 1e-10 * abs(dense)


def test_sparse_newton_under_vmap_runs_each_example():
    """vmap over alpha with jac_sparsity: each example's factorisations in a per-example loop (the solve
    refuses a batch; control/bodies.each_example runs it once per example), the values those of the eager
    solves one by one."""
    n = 4
    f, _, y0, pattern = problem(n)
    mean_u = mean_u_of(f, n, arr(y0), "BDF", pattern)
    alphas = [9.0, 10.0]
    batched = to_numpy(pa.vmap(mean_u)(xp.asarray(alphas)))
    one_by_one = [float(mean_u(xp.asarray(a))) for a in alphas]
    np.testing.assert_allclose(batched, one_by_one, rtol=1e-12)


@pytest.mark.slow  # about 20 s: two solves under grad at N = 32
def test_sparse_newton_memory_under_grad_is_far_below_a_dense_jacobian():
    """N = 32 (2,048 states): pa.grad through the BDF solve keeps no n x n array: its peak (the loop's
    checkpoints of a state of O(n) arrays, about 24 MiB) stays under one dense Jacobian (32 MiB), where the
    dense path carries the Jacobian and its inverse Newton matrix through the loop and its checkpoints."""
    small_f, _, small_y0, small_pattern = problem(4)  # warm-up on a small grid: caches, imports
    pa.grad(mean_u_of(small_f, 4, arr(small_y0), "BDF", small_pattern, (1.0, 1.0005)))(xp.asarray(10.0))
    n = 32
    f, _, y0, pattern = problem(n)
    mean_u = mean_u_of(f, n, arr(y0), "BDF", pattern, (1.0, 1.0005))
    dense_bytes = (2 * n * n) ** 2 * 8
    start_tracemalloc()
    try:
        pa.grad(mean_u)(xp.asarray(10.0))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < dense_bytes, f"peak {peak / 2**20:.1f} MiB, a dense Jacobian {dense_bytes / 2**20:.0f} MiB"


@pytest.mark.slow
def test_sparse_newton_under_jit():
    """pa.jit(pa.grad(...)) with jac_sparsity: the factorisations run when the compiled function runs (on
    concrete values), the same derivative as eagerly; a pattern to detect is refused under jit."""
    n = 4
    f, _, y0, pattern = problem(n)
    mean_u = mean_u_of(f, n, arr(y0), "BDF", pattern)
    expected = float(pa.grad(mean_u)(xp.asarray(10.0)))
    compiled = pa.jit(pa.grad(mean_u))
    assert abs(float(compiled(xp.asarray(10.0))) - expected) <= 1e-12 * abs(expected)
    with pytest.raises(TypeError, match="jac_sparsity='detect' under pa.jit"):
        pa.jit(mean_u_of(f, n, arr(y0), "BDF", "detect"))(xp.asarray(10.0))
