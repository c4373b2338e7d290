"""``polyad.optimize.root(method="newton_krylov")``: Jacobian-free Newton-Krylov (pa.jvp matvecs, the
backend's GMRES) on the 2-D Bratu problem, against SciPy's ``root(method="krylov")`` and Newton with a
hand-written sparse Jacobian; the root's derivative with respect to lambda against central differences
and the implicit function theorem with that Jacobian."""

import numpy as np
import pytest
from helpers import to_numpy
from test_sparsity import A

import polyad as pa
from polyad import optimize

so = pytest.importorskip("scipy.optimize")
sparse = pytest.importorskip("scipy.sparse")
sparse_linalg = pytest.importorskip("scipy.sparse.linalg")
xp = pa.xp
N = 12  # grid: 144 unknowns


def bratu(u, lam, n=N):
    """F(u) = A u - h^2 lam exp(u), A the 5-point Laplacian (times h^2) with zero boundary values."""
    g = xp.reshape(u, (n, n))
    zrow, zcol = xp.zeros((1, n), dtype=u.dtype), xp.zeros((n + 2, 1), dtype=u.dtype)
    p = xp.concat([zcol, xp.concat([zrow, g, zrow], axis=0), zcol], axis=1)
    lap = 4.0 * p[1:-1, 1:-1] - p[:-2, 1:-1] - p[2:, 1:-1] - p[1:-1, :-2] - p[1:-1, 2:]
    h = 1.0 / (n + 1)
    return xp.reshape(lap, (n * n,)) - (h * h * lam) * xp.exp(u)


def bratu_numpy(u, lam, n=N):
    """The same residual and its Jacobian (SciPy sparse) in plain NumPy: the independent reference."""
    T = sparse.diags_array([-1.0, 2.0, -1.0], offsets=[-1, 0, 1], shape=(n, n))
    I = sparse.eye_array(n)
    lap = (sparse.kron(I, T) + sparse.kron(T, I)).tocsc()
    h2 = 1.0 / (n + 1) ** 2
    return lap @ u - h2 * lam * np.exp(u), (lap - h2 * lam * sparse.diags_array(np.exp(u))).tocsc()


def reference_newton(lam):
    """Newton's method with the hand-written Jacobian, to the last digits."""
    u = np.zeros(N * N)
    for _ in range(30):
        F, J = bratu_numpy(u, lam)
        if np.max(np.abs(F)) < 1e-15:
            break
        u = u - sparse_linalg.spsolve(J, F)
    return u


def solve(lam, **kwargs):
    return optimize.root(bratu, A(np.zeros(N * N)), args=(lam,), method="newton_krylov", **kwargs)


def test_newton_krylov_solves_bratu_as_scipy_and_newton_do():
    lam = 5.0
    reference = reference_newton(lam)
    scipy_u = so.root(lambda v: bratu_numpy(v, lam)[0], np.zeros(N * N), method="krylov", tol=1e-12).x
    np.testing.assert_allclose(scipy_u, reference, rtol=1e-8, atol=1e-10)
    sizes = []
    plain = solve(A(lam), callback=lambda x, f: sizes.append(float(np.max(np.abs(to_numpy(f))))))
    assert len(sizes) == plain.nit + 1 and all(b < a for a, b in zip(sizes, sizes[1:]))
    preconditioned = solve(A(lam), options={"preconditioner": "sparse"})
    for res in (plain, preconditioned):
        assert res.success
        u = to_numpy(res.x)
        np.testing.assert_allclose(u, reference, rtol=1e-11, atol=1e-13)
        assert np.max(np.abs(bratu_numpy(u, lam)[0])) < 1e-12
    # the exact Jacobian's LU as preconditioner: GMRES converges in one iteration per Newton step
    assert preconditioned.nmatvec <= 2 * preconditioned.nit < plain.nmatvec


def test_the_roots_derivative_matches_central_differences_and_the_implicit_formula():
    lam = 5.0

    def total(lam):
        return xp.sum(solve(lam, tol=1e-13).x ** 2)

    u = reference_newton(lam)
    _, J = bratu_numpy(u, lam)
    du = sparse_linalg.spsolve(J, np.exp(u) / (N + 1) ** 2)  # dF/du du + dF/dlam = 0
    exact = 2 * u @ du
    eps = 1e-5
    central = (np.sum(reference_newton(lam + eps) ** 2) - np.sum(reference_newton(lam - eps) ** 2)) / (
        2 * eps
    )
    reverse = float(to_numpy(pa.grad(total)(A(lam))))
    forward = float(to_numpy(pa.jvp(total, (A(lam),), (A(1.0),))[1]))
    np.testing.assert_allclose([reverse, forward], exact, rtol=1e-9)
    np.testing.assert_allclose(reverse, central, rtol=1e-6)


def test_newton_krylov_that_did_not_converge_refuses_a_derivative():
    res = solve(A(5.0), options={"maxiter": 1})
    assert not res.success and "did not converge in 1 Newton steps" in res.message
    with pytest.raises(optimize.SolverNotConvergedError, match="did not converge"):
        pa.grad(lambda lam: xp.sum(solve(lam, options={"maxiter": 1}).x))(A(5.0))


def test_newton_krylov_names_bad_options():
    with pytest.raises(ValueError, match=r"newton_krylov' takes options .*got \['restart'\]"):
        solve(A(5.0), options={"restart": 20})
    with pytest.raises(ValueError, match=r"options\['preconditioner'\] must be None, 'sparse' or a function"):
        solve(A(5.0), options={"preconditioner": "ilu"})


# ------------------------------------------------------------------------------ under vmap and pa.jit

SMALL = 6  # grid: 36 unknowns, a batch of lambdas


def small_solve(lam, **options):
    guess = A(np.zeros(SMALL * SMALL))
    return optimize.root(
        bratu, guess, args=(lam, SMALL), method="newton_krylov", tol=1e-13, options=options or None
    )


def small_reference(lam):
    """Newton with the hand-written sparse Jacobian on the small grid (independent of polyad)."""
    u = np.zeros(SMALL * SMALL)
    for _ in range(30):
        F, J = bratu_numpy(u, lam, SMALL)
        u = u - sparse_linalg.spsolve(J, F)
    return u


def small_total(lam):
    return xp.sum(small_solve(lam).x ** 2)


def central_difference(lam, eps=1e-5):
    return (np.sum(small_reference(lam + eps) ** 2) - np.sum(small_reference(lam - eps) ** 2)) / (2 * eps)


LAMS = np.array([2.0, 4.0, 6.0])


@pytest.mark.parametrize("preconditioner", [None, "sparse"])
def test_newton_krylov_under_vmap_solves_each_lambda_as_the_eager_solve(preconditioner):
    # on main, vmap handed newton_krylov a BatchedTensor: AttributeError ('NoneType' has no 'xp')
    options = {"preconditioner": preconditioner} if preconditioner else {}
    batched = to_numpy(pa.vmap(lambda lam: small_solve(lam, **options).x)(A(LAMS)))
    for lam, row in zip(LAMS, batched, strict=True):
        eager = to_numpy(small_solve(A(lam), **options).x)
        np.testing.assert_allclose(row, eager, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(row, small_reference(lam), rtol=1e-11, atol=1e-13)


def test_newton_krylov_derivatives_under_vmap_and_jit_match_central_differences():
    central = np.array([central_difference(lam) for lam in LAMS])
    by_vmap = to_numpy(pa.vmap(pa.grad(small_total))(A(LAMS)))
    tangents = pa.vmap(lambda lam: pa.jvp(small_total, (lam,), (xp.ones_like(lam),))[1])(A(LAMS))
    np.testing.assert_allclose(by_vmap, central, rtol=1e-6)
    np.testing.assert_allclose(to_numpy(tangents), by_vmap, rtol=1e-9)
    jitted = pa.jit(pa.grad(small_total))
    for lam, expected in zip(LAMS[:2], central, strict=False):  # a compiled function solves at each call
        np.testing.assert_allclose(float(to_numpy(jitted(A(lam)))), expected, rtol=1e-6)
    outside = pa.grad(lambda lam: xp.sum(pa.jit(lambda v: small_solve(v).x)(lam) ** 2))
    np.testing.assert_allclose(float(to_numpy(outside(A(LAMS[2])))), central[2], rtol=1e-6)


def test_newton_krylov_under_jit_and_jit_of_vmap_equal_the_eager_solves():
    # on main, pa.jit(pa.vmap(...)) of any SciPy-backed root failed too: the traced batch rule ran no
    # solve, so the compiled kernel met the batch whole; BatchedProblem.run now loops per example there
    jitted = pa.jit(lambda lam: small_solve(lam).x)
    eager = np.stack([to_numpy(small_solve(A(lam)).x) for lam in LAMS])
    for lam, expected in zip(LAMS, eager, strict=True):
        np.testing.assert_allclose(to_numpy(jitted(A(lam))), expected, rtol=1e-12, atol=1e-14)
    over_batch = pa.jit(pa.vmap(lambda lam: small_solve(lam).x))
    np.testing.assert_allclose(to_numpy(over_batch(A(LAMS))), eager, rtol=1e-12, atol=1e-14)
    hybr = pa.jit(pa.vmap(lambda c: optimize.root(lambda y, c: y**3 + y - c, A(np.zeros(2)), args=(c,)).x))
    np.testing.assert_allclose(
        to_numpy(hybr(A(np.array([[2.0, 10.0], [0.0, 2.0]])))), [[1, 2], [0, 1]], atol=1e-12
    )

    def preconditioned_total(lam):  # its tangent solve is then the sparse direct one
        return xp.sum(small_solve(lam, preconditioner="sparse").x ** 2)

    grads = pa.jit(pa.vmap(pa.grad(preconditioned_total)))(A(LAMS))
    np.testing.assert_allclose(to_numpy(grads), [central_difference(lam) for lam in LAMS], rtol=1e-6)


def test_newton_krylov_under_vmap_refuses_a_derivative_if_one_example_did_not_converge():
    def total(lam):
        return xp.sum(small_solve(lam, maxiter=2).x)

    with pytest.raises(optimize.SolverNotConvergedError, match="did not converge in 2 Newton steps"):
        pa.vmap(pa.grad(total))(A(np.array([0.1, 6.0])))
