"""polyad.optimize and polyad.sparse.linalg: SciPy's solvers differentiable at their solution (issue 21's
"done when" checks among them), each derivative against a closed form or a direct differentiable
computation; non-convergence makes the derivative raise; the float32 CG adjoint at a tiny cotangent."""

import warnings

import numpy as np
import pytest
from helpers import assert_close, raises_cleanly, to_numpy

import polyad as pa
from polyad import optimize
from polyad.sparse import linalg as splinalg
from polyad.transforms.batching import LoopFallbackWarning

pytest.importorskip("scipy")
import scipy.sparse as sp  # noqa: E402

xp = pa.xp
TIGHT = dict(rtol=1e-10, atol=1e-10)


def arr(values, dtype=None):
    return xp.asarray(np.asarray(values, dtype=np.float64).tolist(), dtype=dtype or xp.float64)


def scalar(v):
    return xp.asarray(v, dtype=xp.float64)


# ------------------------------------------------------------------------------ root_scalar (done when 1)


def brent_root(a, b):
    """The root of x^3 + a x - b by SciPy's brentq."""
    result = optimize.root_scalar(lambda x, a, b: x**3 + a * x - b, args=(a, b), method="brentq",
                                  bracket=(-5.0, 5.0), xtol=1e-15, rtol=1e-15)  # fmt: skip
    return result.root


def test_root_scalar_brentq_every_transform_to_1e10():
    a, b = scalar(1.0), scalar(2.0)
    assert_close(brent_root(a, b), scalar(1.0), **TIGHT)
    da, db = pa.grad(brent_root, argnums=(0, 1))(a, b)
    assert_close(da, scalar(-0.25), **TIGHT)
    assert_close(db, scalar(0.25), **TIGHT)
    _, ta = pa.jvp(brent_root, (a, b), (scalar(1.0), scalar(0.0)))
    _, tb = pa.jvp(brent_root, (a, b), (scalar(0.0), scalar(1.0)))
    assert_close(ta, scalar(-0.25), **TIGHT)
    assert_close(tb, scalar(0.25), **TIGHT)
    assert_close(pa.jacfwd(brent_root, argnums=(0, 1))(a, b), (scalar(-0.25), scalar(0.25)), **TIGHT)
    assert_close(pa.jacrev(brent_root, argnums=(0, 1))(a, b), (scalar(-0.25), scalar(0.25)), **TIGHT)
    assert_close(pa.hessian(brent_root, argnums=1)(a, b), scalar(-0.09375), **TIGHT)
    assert_close(pa.jacrev(pa.grad(brent_root, argnums=1), argnums=1)(a, b), scalar(-0.09375), **TIGHT)


def test_root_scalar_methods_result_object_and_vmap():
    cases = (("newton", dict(x0=1.5)), ("halley", dict(x0=1.5)), ("bisect", dict(bracket=(0.0, 3.0))),
             ("secant", dict(x0=1.5, x1=1.4)))  # fmt: skip
    for method, kw in cases:
        res = optimize.root_scalar(
            lambda x, b: x**3 + x - b, args=(scalar(2.0),), method=method, xtol=1e-14, **kw
        )
        assert res.converged and abs(float(res.root) - 1.0) < 1e-9, method

        def root_of(b, method=method, kw=kw):
            return optimize.root_scalar(
                lambda x, b: x**3 + x - b, args=(b,), method=method, xtol=1e-14, **kw
            ).root

        g = pa.grad(root_of)(scalar(2.0))
        assert_close(g, scalar(0.25), rtol=1e-8, atol=1e-9)
    with warnings.catch_warnings():  # SciPy needs one example's values: vmap loops (warned once per process)
        warnings.simplefilter("ignore", LoopFallbackWarning)
        got = pa.vmap(pa.grad(brent_root, argnums=1), in_dims=(None, 0))(scalar(1.0), arr([2.0, 10.0]))
    assert_close(got, arr([0.25, 1.0 / 13.0]), **TIGHT)


def test_nonconvergence_makes_the_derivative_raise_or_warn():
    def root(b, on_failure="raise"):
        return optimize.root_scalar(lambda x, b: x**3 + x - b, args=(b,), method="newton", x0=1.5, maxiter=2,
                                    on_failure=on_failure).root  # fmt: skip

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # SciPy's own note that newton did not converge
        assert not optimize.root_scalar(
            lambda x: x**3 + x - 2.0, method="newton", x0=1.5, maxiter=2
        ).converged
        with raises_cleanly(optimize.SolverNotConvergedError, "root_scalar", "did not converge"):
            pa.grad(root)(scalar(2.0))
        with pytest.warns(optimize.SolverNotConvergedWarning):
            pa.grad(lambda b: root(b, "warn"))(scalar(2.0))


# ------------------------------------------------------------------------------ root, fixed_point


def test_root_and_fixed_point_against_closed_forms():
    def x_of(p):  # x0^2 = p0, x1 = x0 p1
        def fun(x, p):
            return xp.stack([x[0] ** 2 - p[0], x[1] - x[0] * p[1]])

        return optimize.root(fun, arr([1.0, 1.0]), args=(p,), tol=1e-14).x

    p = arr([4.0, 3.0])
    expected = arr([[0.25, 0.0], [0.75, 2.0]])  # d(sqrt p0, sqrt p0 p1)/dp
    assert_close(x_of(p), arr([2.0, 6.0]), **TIGHT)
    assert_close(pa.jacrev(x_of)(p), expected, **TIGHT)
    assert_close(pa.jacfwd(x_of)(p), expected, **TIGHT)
    for solver in ("sparse", "gmres", "bicgstab"):

        def x_by(p, solver=solver):
            def fun(x, p):
                return xp.stack([x[0] ** 2 - p[0], x[1] - x[0] * p[1]])

            return optimize.root(fun, arr([1.0, 1.0]), args=(p,), tol=1e-14, linear_solver=solver).x

        got = pa.jacrev(x_by)(p)
        assert_close(got, expected, rtol=1e-6, atol=1e-8)

    def fp(c):
        return optimize.fixed_point(lambda x, c: 0.5 * xp.cos(x) + c, xp.zeros_like(c), args=(c,), xtol=1e-14)

    c = arr([0.1, 0.7])
    x = to_numpy(fp(c))
    assert_close(pa.jacrev(fp)(c), arr(np.diag(1.0 / (1.0 + 0.5 * np.sin(x)))), **TIGHT)


# ------------------------------------------------------------------ minimize (done when 2), least_squares

X = np.array([[1.0, 0.2, -0.3], [1.0, 1.1, 0.5], [1.0, 2.0, 0.1], [1.0, -0.7, 1.3], [1.0, 0.4, -1.2]])
Y = np.array([1.0, 2.0, 2.5, 0.3, -0.4])


@pytest.mark.parametrize("method", ["BFGS", "L-BFGS-B", "Newton-CG", "trust-exact"])
def test_ridge_hypergradient_matches_its_closed_form(method):
    Xa, Ya = arr(X), arr(Y)

    def ridge(lam):
        def loss(w, lam):
            return xp.sum((Xa @ w - Ya) ** 2) + lam * xp.sum(w**2)

        options = {"gtol": 1e-12} if method in ("BFGS", "trust-exact") else {}
        tol = 1e-14 if method != "L-BFGS-B" else 1e-15
        return optimize.minimize(loss, np.zeros(3), args=(lam,), method=method, tol=tol, options=options).x

    lam = scalar(0.7)
    w = ridge(lam)
    H = X.T @ X + 0.7 * np.eye(3)
    assert_close(w, arr(np.linalg.solve(H, X.T @ Y)), rtol=1e-6, atol=1e-8)
    closed = -np.linalg.solve(H, to_numpy(w))  # dw*/dlambda = -(X^T X + lambda I)^{-1} w*
    assert_close(pa.jacfwd(ridge)(lam), arr(closed), rtol=1e-6, atol=1e-9)
    assert_close(pa.jacrev(ridge)(lam), arr(closed), rtol=1e-6, atol=1e-9)

    def ridge_cg(lam):
        def loss(w, lam):
            return xp.sum((Xa @ w - Ya) ** 2) + lam * xp.sum(w**2)

        opts = {"gtol": 1e-12}
        return optimize.minimize(
            loss, np.zeros(3), args=(lam,), method="BFGS", options=opts, linear_solver="cg"
        ).x

    cg = pa.jacrev(ridge_cg)(lam)
    assert_close(cg, arr(closed), rtol=1e-6, atol=1e-9)


def test_minimize_with_an_active_bound_or_constraints_refuses_the_derivative():
    def solve(c, bounds=None, constraints=()):
        method = "SLSQP" if constraints else "L-BFGS-B"

        def loss(w, c):
            return xp.sum((w - c) ** 2)

        return optimize.minimize(
            loss, np.zeros(2), args=(c,), method=method, bounds=bounds, constraints=constraints
        ).x

    c = arr([0.5, 2.0])
    inactive = pa.jacrev(lambda c: solve(c, bounds=[(-5, 5), (-5, 5)]))(c)
    assert_close(inactive, arr(np.eye(2)), rtol=1e-6, atol=1e-6)
    with raises_cleanly(pa.ImplicitError, "bound is active"):
        pa.jacrev(lambda c: solve(c, bounds=[(-5, 5), (-5, 1.0)]))(c)
    with raises_cleanly(pa.ImplicitError, "constrained"):
        pa.jacrev(lambda c: solve(c, constraints=({"type": "eq", "fun": lambda w: w[0] - 0.5},)))(c)


def test_least_squares_against_the_normal_equations():
    Xa = arr(X)

    def fit(y):
        return optimize.least_squares(lambda w, y: Xa @ w - y, np.zeros(3), args=(y,), xtol=1e-15, ftol=1e-15,
                                      gtol=1e-15).x  # fmt: skip

    pinv = np.linalg.solve(X.T @ X, X.T)  # w = (X^T X)^-1 X^T y: dw/dy
    assert_close(fit(arr(Y)), arr(pinv @ Y), rtol=1e-8, atol=1e-10)
    assert_close(pa.jacrev(fit)(arr(Y)), arr(pinv), rtol=1e-8, atol=1e-10)
    assert_close(pa.jacfwd(fit)(arr(Y)), arr(pinv), rtol=1e-8, atol=1e-10)


# ------------------------------------------------------------------------------ sparse linear solves

A_DENSE = np.array([[4.0, 1.0, 0.0, 0.5], [1.0, 5.0, 1.0, 0.0], [0.0, 1.0, 3.0, 1.0], [0.5, 0.0, 1.0, 6.0]])
A_NONSYM = A_DENSE + np.triu(np.ones((4, 4)), 1) * 0.7
B = np.array([1.0, -2.0, 0.5, 3.0])


def test_spsolve_and_splu_gradients_and_batching():
    A = sp.csr_matrix(A_NONSYM)
    inv = np.linalg.inv(A_NONSYM)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LoopFallbackWarning)  # the factors solve a batch as more columns
        assert_close(splinalg.spsolve(A, arr(B)), arr(inv @ B), **TIGHT)
        assert_close(pa.jacrev(lambda b: splinalg.spsolve(A, b))(arr(B)), arr(inv), **TIGHT)
        assert_close(pa.jacfwd(lambda b: splinalg.spsolve(A, b))(arr(B)), arr(inv), **TIGHT)
        lu = splinalg.splu(sp.csc_matrix(A_NONSYM))
        assert_close(pa.jacrev(lambda b: lu.solve(b, trans="T"))(arr(B)), arr(inv.T), **TIGHT)
        two = xp.stack([arr(B), 2.0 * arr(B)], axis=1)  # two right-hand sides at once
        direct = pa.grad(lambda b: xp.sum(xp.linalg.solve(arr(A_NONSYM), b) ** 2))(two)
        assert_close(pa.grad(lambda b: xp.sum(splinalg.spsolve(A, b) ** 2))(two), direct, **TIGHT)
        got = pa.vmap(lu.solve)(xp.stack([arr(B), 2.0 * arr(B)]))
        assert_close(got, xp.stack([arr(inv @ B), arr(2.0 * inv @ B)]), **TIGHT)


def test_krylov_solves_differentiate_through_the_operator_and_b():
    inv = np.linalg.inv(A_NONSYM)
    for method in (splinalg.gmres, splinalg.bicgstab):
        x, info = method(sp.csr_matrix(A_NONSYM), arr(B), rtol=1e-13)
        assert int(info) == 0
        assert_close(x, arr(inv @ B), rtol=1e-9, atol=1e-10)
        jac = pa.jacrev(lambda b, m=method: m(sp.csr_matrix(A_NONSYM), b, rtol=1e-13)[0])(arr(B))
        assert_close(jac, arr(inv), rtol=1e-8, atol=1e-10)

    # cg on a function operator with a parameter: d/dk of (A + k I)^-1 b = -(A + k I)^-1 x
    Ad = arr(A_DENSE)

    def x_of(k):
        return splinalg.cg(lambda v: Ad @ v + k * v, arr(B), rtol=1e-13)[0]

    def direct(k):
        return xp.linalg.solve(Ad + k * xp.eye(4, dtype=xp.float64), arr(B))

    k = scalar(0.3)
    assert_close(pa.jacrev(x_of)(k), pa.jacrev(direct)(k), rtol=1e-8, atol=1e-10)
    assert_close(pa.jacfwd(x_of)(k), pa.jacfwd(direct)(k), rtol=1e-8, atol=1e-10)
    assert_close(pa.hessian(x_of)(k), pa.hessian(direct)(k), rtol=1e-7, atol=1e-9)

    def unconverged(b):
        return splinalg.cg(sp.csr_matrix(A_DENSE), b, rtol=1e-14, maxiter=1)[0]

    with raises_cleanly(optimize.SolverNotConvergedError, "cg", "info="):
        pa.grad(lambda b: xp.sum(unconverged(b)))(arr(B))


def test_float32_preconditioned_cg_gradient_at_a_tiny_cotangent():
    # a poorly scaled SPD system in float32 with a Jacobi preconditioner; the cotangent scaled by 1e-13
    # must give a finite gradient with the relative error of scale 1 (jax-ml/jax#40317 gives NaN)
    n = 30
    rng = np.random.default_rng(0)
    Q = rng.standard_normal((n, n))
    A64 = Q @ Q.T / n + np.diag(np.linspace(1.0, 50.0, n))
    A = xp.asarray(A64.astype(np.float32).tolist(), dtype=xp.float32)
    diag = xp.asarray(np.diag(A64).astype(np.float32).tolist(), dtype=xp.float32)
    b = xp.asarray(rng.standard_normal(n).astype(np.float32).tolist(), dtype=xp.float32)
    w = rng.standard_normal(n)

    def loss(b, scale):
        x, _ = splinalg.cg(lambda v: A @ v, b, rtol=1e-6, M=lambda r: r / diag)
        return scale * xp.sum(x * xp.asarray(w.astype(np.float32).tolist(), dtype=xp.float32))

    exact = np.linalg.solve(A64.astype(np.float32).astype(np.float64), w)  # A^-T w (A symmetric)
    errors = []
    for scale in (1.0, 1e-13):
        g = to_numpy(pa.grad(loss)(b, xp.asarray(scale, dtype=xp.float32))).astype(np.float64)
        assert np.all(np.isfinite(g)), scale
        errors.append(np.linalg.norm(g / scale - exact) / np.linalg.norm(exact))
    assert errors[0] < 1e-4 and errors[1] < 1e-4, errors
    assert errors[1] < 3.0 * errors[0] + 1e-6, errors


def test_under_jit_each_call_solves_and_checks_its_own_convergence():
    def root(b):
        return optimize.root_scalar(
            lambda x, b: x**3 + x - b, args=(b,), method="newton", x0=1.0, maxiter=8
        ).root

    compiled = pa.jit(pa.grad(root))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # SciPy's note that newton stopped early
        assert_close(compiled(scalar(2.0)), scalar(0.25), **TIGHT)
        with raises_cleanly(optimize.SolverNotConvergedError, "did not converge"):
            compiled(scalar(1e12))  # eight Newton steps from 1 do not reach 1e4
        assert_close(compiled(scalar(10.0)), scalar(1.0 / 13.0), **TIGHT)  # a new call, a new report
    res = pa.jit(
        lambda b: optimize.root_scalar(lambda x, b: x**3 + x - b, args=(b,), bracket=(0.0, 5.0)).root
    )
    assert_close(res(scalar(2.0)), scalar(1.0), rtol=1e-10, atol=1e-10)


def test_sparsity_patterns_of_the_solver_ops():
    A = sp.diags([np.ones(5), 2.0 * np.ones(6), np.ones(5)], [-1, 0, 1]).tocsr()
    ones = xp.ones(6, dtype=xp.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("error", pa.SparsityFallbackWarning)
        pattern = pa.jacobian_sparsity(lambda v: splinalg.operator_matvec(A, v))(ones).toarray()
        assert (pattern == (A.toarray() != 0)).all()
        assert pa.jacobian_sparsity(lambda b: splinalg.spsolve(A, b))(ones).toarray().all()  # A^-1 is dense
    J = pa.sparse_jacfwd(lambda v: splinalg.operator_matvec(A, v))(ones)
    dense = pa.dispatch.backend_of_array(ones).sparse.to_dense(J)  # the backend's container, densified
    assert_close(xp.asarray(to_numpy(dense).tolist(), dtype=xp.float64), arr(A.toarray()), **TIGHT)


def test_complex_factorised_solves_take_the_conjugate_transpose_in_reverse():
    rng = np.random.default_rng(0)
    dense = rng.standard_normal((4, 4)) + 1j * rng.standard_normal((4, 4)) + 4.0 * np.eye(4)
    lu = splinalg.splu(sp.csc_matrix(dense))
    b = xp.asarray((rng.standard_normal(4) + 1j * rng.standard_normal(4)).tolist(), dtype=xp.complex128)
    for trans, matrix in (("N", dense), ("T", dense.T), ("H", dense.conj().T)):
        m = xp.asarray(matrix.tolist(), dtype=xp.complex128)

        def loss(b, trans=trans):
            return xp.sum(xp.abs(lu.solve(b, trans=trans)) ** 2)

        def direct(b, m=m):
            return xp.sum(xp.abs(xp.linalg.solve(m, b)) ** 2)

        assert_close(lu.solve(b, trans=trans), xp.linalg.solve(m, b), **TIGHT)
        assert_close(pa.grad(loss)(b), pa.grad(direct)(b), **TIGHT)


def test_minimize_tangent_solvers_agree_with_central_differences():
    n = 30

    def loss(w, c):  # a chain: a tridiagonal Hessian
        return xp.sum((w - c) ** 2) + 0.5 * xp.sum((w[1:] - w[:-1]) ** 2) + 0.1 * xp.sum(w**4)

    def objective(c, solver):
        x = optimize.minimize(
            loss, np.zeros(n), args=(c,), method="Newton-CG", tol=1e-13, linear_solver=solver
        ).x
        return xp.sum(x**3)

    c = arr(np.linspace(-1.0, 1.0, n))
    e = np.zeros(n)
    e[7] = 1e-5
    fd = (float(objective(c + arr(e), "dense")) - float(objective(c - arr(e), "dense"))) / 2e-5
    for solver in ("dense", "sparse", "cg"):
        g = pa.grad(objective)(c, solver)
        assert abs(float(g[7]) - fd) < 1e-6 * max(1.0, abs(fd)), (solver, float(g[7]), fd)


def test_a_krylov_solver_that_names_its_tolerance_tol(monkeypatch):
    """Krylov solvers name the relative tolerance ``rtol`` (SciPy >= 1.12, CuPy 14's cupyx) or ``tol``
    (older ones): the backend contract passes polyad's rtol under the installed solver's own name (the
    CuPy lane failed with "cg() got an unexpected keyword argument 'tol'" when a fixed name was used)."""
    import scipy.sparse.linalg as spla

    seen = {}
    real_cg = spla.cg

    def cg_with_tol(A, b, x0=None, *, tol=1e-5, maxiter=None, M=None, callback=None, atol=0.0):
        seen["tol"] = tol
        return real_cg(A, b, x0=x0, rtol=tol, maxiter=maxiter, M=M, atol=atol)

    monkeypatch.setattr(spla, "cg", cg_with_tol)
    K = np.array([[4.0, 1.0], [1.0, 3.0]])
    x, info = splinalg.cg(arr(K), arr(np.array([1.0, 2.0])), rtol=1e-12)
    assert seen["tol"] == 1e-12 and int(info) == 0
    assert_close(x, arr(np.linalg.solve(K, [1.0, 2.0])), rtol=1e-10, atol=1e-12)


def test_solves_on_a_device_that_refuses_numpy_return_there():
    """array_api_strict's "device1" stands for a GPU: SciPy runs on deliberate host copies, and the
    solution comes back on the right-hand side's device."""
    strict = pytest.importorskip("array_api_strict")
    device = strict.Device("device1")
    K = np.array([[4.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 2.0]])
    b = strict.asarray(np.array([1.0, 2.0, 3.0]), device=device)
    expected = np.linalg.solve(K, [1.0, 2.0, 3.0])
    cpu = strict.__array_namespace_info__().default_device()
    for x in (
        splinalg.cg(strict.asarray(K, device=device), b, rtol=1e-12)[0],
        splinalg.gmres(lambda v: strict.asarray(K, device=device) @ v, b, rtol=1e-12)[0],
        splinalg.spsolve(sp.csr_matrix(K), b),
    ):
        assert x.device == device
        np.testing.assert_allclose(np.asarray(x.to_device(cpu)), expected, rtol=1e-10)
