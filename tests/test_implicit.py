"""pa.custom_root and pa.custom_linear_solve (polyad/custom/implicit.py): derivatives at the solution by
the implicit function theorem, against closed forms and against differentiating a direct computation;
second order (hessian through a root and through a linear solve); vmap (batched without a loop for solves
written in polyad ops; per example, warned, for a SciPy solve); the solve's iterations cost the derivative
nothing (tracemalloc peak at 60 and 2,000 iterations); bad solvers refused."""

import tracemalloc
import warnings

import numpy as np
import pytest
from helpers import assert_close, raises_cleanly, start_tracemalloc, to_numpy

import polyad as pa
from polyad.transforms.batching import LoopFallbackWarning

xp = pa.xp
TOL = dict(rtol=1e-10, atol=1e-12)


def arr(values):
    return xp.asarray(np.asarray(values, dtype=np.float64).tolist(), dtype=xp.float64)


def newton(f, x):
    """A scalar Newton solve in polyad ops (its iterations are never differentiated)."""
    for _ in range(40):
        x = x - f(x) / pa.jacfwd(f)(x)
    return x


def scalar_tangent_solve(g, y):
    return y / g(1.0)


def cubic_root(a, b):
    """The real root of x^3 + a x - b."""
    return pa.custom_root(lambda x: x**3 + a * x - b, xp.asarray(1.0, dtype=xp.float64), newton,
                          scalar_tangent_solve)  # fmt: skip


A0, B0 = xp.asarray(1.0, dtype=xp.float64), xp.asarray(2.0, dtype=xp.float64)
# x = 1 at (1, 2): dx/da = -x / (3x^2 + a) = -1/4, dx/db = 1/4, d2x/db2 = -6x (dx/db)^2 / (3x^2 + a) = -3/32


def test_root_first_and_second_derivatives():
    with warnings.catch_warnings():
        warnings.simplefilter("error", LoopFallbackWarning)  # jacfwd's and hessian's vmaps batch the solves
        assert_close(cubic_root(A0, B0), xp.asarray(1.0, dtype=xp.float64), **TOL)
        da, db = pa.grad(cubic_root, argnums=(0, 1))(A0, B0)
        assert_close(da, xp.asarray(-0.25, dtype=xp.float64), **TOL)
        assert_close(db, xp.asarray(0.25, dtype=xp.float64), **TOL)
        _, t = pa.jvp(
            cubic_root, (A0, B0), (xp.asarray(1.0, dtype=xp.float64), xp.asarray(2.0, dtype=xp.float64))
        )
        assert_close(t, xp.asarray(0.25, dtype=xp.float64), **TOL)
        assert_close(pa.hessian(cubic_root, argnums=1)(A0, B0), xp.asarray(-0.09375, dtype=xp.float64), **TOL)
        assert_close(pa.jacrev(pa.jacrev(cubic_root, argnums=1), argnums=1)(A0, B0),
                     xp.asarray(-0.09375, dtype=xp.float64), **TOL)  # fmt: skip
        assert_close(pa.jacfwd(pa.grad(cubic_root, argnums=1), argnums=1)(A0, B0),
                     xp.asarray(-0.09375, dtype=xp.float64), **TOL)  # fmt: skip


def test_root_vmap_both_orders_batched_without_a_loop():
    a, b = arr([1.0, 1.0, 2.0]), arr([2.0, 10.0, 3.0])
    x = np.array([1.0, 2.0, 1.0])  # x^3 + a x = b
    expected = 1.0 / (3.0 * x**2 + to_numpy(a))
    with warnings.catch_warnings():
        warnings.simplefilter("error", LoopFallbackWarning)
        assert_close(pa.vmap(cubic_root)(a, b), arr(x), **TOL)
        assert_close(pa.vmap(pa.grad(cubic_root, argnums=1))(a, b), arr(expected), **TOL)
        got = pa.grad(lambda b: xp.sum(pa.vmap(cubic_root, in_dims=(None, 0))(A0, b)))(arr([2.0, 10.0]))
        assert_close(got, arr([0.25, 1.0 / 13.0]), **TOL)


def test_root_with_scipy_solve_runs_per_example_under_vmap():
    optimize = pytest.importorskip("scipy.optimize")

    calls = []

    def brent(f, x0):
        calls.append(x0)
        return xp.asarray(optimize.brentq(lambda x: float(f(xp.asarray(x, dtype=xp.float64))), -10.0, 10.0,
                                          xtol=1e-15, rtol=1e-15), dtype=xp.float64)  # fmt: skip

    def root(a, b):
        return pa.custom_root(lambda x: x**3 + a * x - b, xp.asarray(0.0, dtype=xp.float64), brent,
                              scalar_tangent_solve)  # fmt: skip

    assert_close(pa.grad(root, argnums=(0, 1))(A0, B0), (xp.asarray(-0.25, dtype=xp.float64),
                 xp.asarray(0.25, dtype=xp.float64)), **TOL)  # fmt: skip
    assert_close(pa.hessian(root, argnums=1)(A0, B0), xp.asarray(-0.09375, dtype=xp.float64), **TOL)
    calls.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LoopFallbackWarning)  # (warned once per process, by vmap's loop)
        got = pa.vmap(pa.grad(root, argnums=1))(arr([1.0, 1.0]), arr([2.0, 10.0]))
    assert_close(got, arr([0.25, 1.0 / 13.0]), **TOL)
    # SciPy needs one example's values: after one try on the batch, vmap ran the solve once per example
    assert len([c for c in calls if not isinstance(c, pa.Tensor)]) == 2


def dense_tangent_solve(g, y):
    """Solve g(x) = y for a linear g on vectors, by its Jacobian."""
    return xp.linalg.solve(pa.jacfwd(g)(y), y)


def fixed_point_root(theta, iterations):
    """x = 0.5 cos(x) + theta (a contraction by 1/2), solved by plain iteration."""

    def solve(f, x):
        for _ in range(iterations):
            x = x - f(x)
        return x

    return pa.custom_root(
        lambda x: x - 0.5 * xp.cos(x) - theta, xp.zeros_like(theta), solve, dense_tangent_solve
    )


def test_fixed_point_gradient_and_memory_do_not_depend_on_iterations():
    theta = xp.asarray(np.linspace(0.0, 1.0, 2000).tolist(), dtype=xp.float64)

    def loss(theta, n):
        return xp.sum(fixed_point_root(theta, n) ** 2)

    def unrolled(theta, n):  # the iterations differentiated: what the implicit rule avoids
        x = xp.zeros_like(theta)
        for _ in range(n):
            x = 0.5 * xp.cos(x) + theta
        return xp.sum(x**2)

    def diagonal_solve(g, y):  # the Jacobian here is diagonal: one matvec of ones gives it
        return y / g(xp.ones_like(y))

    def loss_diag(theta, n):
        def solve(f, x):
            for _ in range(n):
                x = x - f(x)
            return x

        x = pa.custom_root(lambda x: x - 0.5 * xp.cos(x) - theta, xp.zeros_like(theta), solve, diagonal_solve)
        return xp.sum(x**2)

    def peak(fn, n):
        start_tracemalloc()
        try:
            g = pa.grad(fn)(theta, n)
            return g, tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    g60, peak60 = peak(loss_diag, 60)
    g2000, peak2000 = peak(loss_diag, 2000)
    x = to_numpy(fixed_point_root(theta, 200))
    expected = 2.0 * x / (1.0 + 0.5 * np.sin(x))  # dx/dtheta = 1 / (1 + sin(x) / 2)
    assert_close(g60, arr(expected), **TOL)
    assert_close(g2000, g60, **TOL)
    assert peak2000 < 1.25 * peak60 + 200_000, (peak60, peak2000)
    # the measurement sees growth where there is some: the unrolled loop's peak grows with n
    _, unrolled60 = peak(unrolled, 60)
    _, unrolled600 = peak(unrolled, 600)
    assert unrolled600 > 5 * unrolled60
    # the dense tangent solve (a Jacobian) agrees on a small problem
    small = theta[:5]
    assert_close(pa.grad(loss)(small, 60), pa.grad(loss_diag)(small, 60), **TOL)


def test_linear_solve_derivatives_match_a_direct_solve():
    M = arr([[4.0, 1.0, 0.5], [2.0, 3.0, 0.0], [0.3, -1.0, 5.0]])
    b = arr([1.0, 2.0, -1.0])

    def by_custom(M, b):
        return pa.custom_linear_solve(
            lambda v: M @ v,
            b,
            lambda mv, r: xp.linalg.solve(M, r),  # the solve closes over M: allowed, not differentiated
            transpose_solve=lambda vm, r: xp.linalg.solve(xp.matrix_transpose(M), r),
        )

    def direct(M, b):
        return xp.linalg.solve(M, b)

    with warnings.catch_warnings():
        warnings.simplefilter("error", LoopFallbackWarning)
        assert_close(by_custom(M, b), direct(M, b), **TOL)
        assert_close(
            pa.jacrev(by_custom, argnums=(0, 1))(M, b), pa.jacrev(direct, argnums=(0, 1))(M, b), **TOL
        )
        assert_close(
            pa.jacfwd(by_custom, argnums=(0, 1))(M, b), pa.jacfwd(direct, argnums=(0, 1))(M, b), **TOL
        )
        h = pa.hessian(lambda M: xp.sum(by_custom(M, b) ** 2))(M)
        assert_close(h, pa.hessian(lambda M: xp.sum(direct(M, b) ** 2))(M), **TOL)
        got = pa.vmap(by_custom, in_dims=(None, 0))(M, xp.stack([b, 2.0 * b]))
        assert_close(got, xp.stack([direct(M, b), direct(M, 2.0 * b)]), **TOL)


def test_linear_solve_symmetric_needs_no_transpose_and_nonsymmetric_refuses_without_one():
    S = arr([[4.0, 1.0], [1.0, 3.0]])
    b = arr([1.0, 2.0])

    def sym(b):
        return pa.custom_linear_solve(lambda v: S @ v, b, lambda mv, r: xp.linalg.solve(S, r), symmetric=True)

    assert_close(pa.jacrev(sym)(b), xp.linalg.inv(S), **TOL)

    def no_transpose(b):
        return pa.custom_linear_solve(lambda v: S @ v, b, lambda mv, r: xp.linalg.solve(S, r))

    assert_close(pa.jacfwd(no_transpose)(b), xp.linalg.inv(S), **TOL)  # forward mode needs none
    with raises_cleanly(pa.ImplicitError, "transpose_solve"):
        pa.jacrev(no_transpose)(b)


def test_linear_solve_has_aux_and_bad_solvers():
    S = arr([[4.0, 1.0], [1.0, 3.0]])

    def with_aux(b):
        x, info = pa.custom_linear_solve(
            lambda v: S @ v,
            b,
            lambda mv, r: (xp.linalg.solve(S, r), xp.asarray(7)),
            symmetric=True,
            has_aux=True,
        )
        return xp.sum(x), info

    g, info = pa.grad(with_aux, has_aux=True)(arr([1.0, 2.0]))
    assert_close(g, xp.sum(xp.linalg.inv(S), axis=0), **TOL)
    assert int(info) == 7

    def wrong_shape(b):
        return pa.custom_linear_solve(lambda v: S @ v, b, lambda mv, r: r[:1], symmetric=True)

    with raises_cleanly(
        pa.ImplicitError, "custom_linear_solve", "(2,) float64 in b and (1,) float64 in solve"
    ):
        pa.grad(lambda b: xp.sum(wrong_shape(b)))(arr([1.0, 2.0]))


def test_root_with_pytree_unknowns_and_parameters():
    # x^2 = p, y = x q: a root in a dict
    def solve(f, guess):
        x = xp.sqrt(guess["x"] * 0.0 + 4.0)
        return {"x": x, "y": x * 3.0}

    def tangent(g, y):
        J = pa.jacfwd(lambda v: g({"x": v[0], "y": v[1]}))(xp.stack([y["x"], y["y"]]))
        sol = xp.linalg.solve(xp.stack([xp.stack([J["x"][0], J["x"][1]]), xp.stack([J["y"][0], J["y"][1]])]),
                              xp.stack([y["x"], y["y"]]))  # fmt: skip
        return {"x": sol[0], "y": sol[1]}

    def root(p, q):
        one = xp.asarray(1.0, dtype=xp.float64)
        residual = lambda z: {"x": z["x"] ** 2 - p, "y": z["y"] - z["x"] * q}  # noqa: E731
        return pa.custom_root(residual, {"x": one, "y": one}, solve, tangent)

    p, q = xp.asarray(4.0, dtype=xp.float64), xp.asarray(3.0, dtype=xp.float64)
    dp, dq = pa.grad(lambda p, q: root(p, q)["y"], argnums=(0, 1))(p, q)
    # y = sqrt(p) q: dy/dp = q / (2 sqrt p) = 0.75, dy/dq = sqrt p = 2
    assert_close(dp, xp.asarray(0.75, dtype=xp.float64), **TOL)
    assert_close(dq, xp.asarray(2.0, dtype=xp.float64), **TOL)


def test_root_under_jit_and_eval_shape():
    compiled = pa.jit(pa.grad(cubic_root, argnums=(0, 1)))
    assert_close(
        compiled(A0, B0), (xp.asarray(-0.25, dtype=xp.float64), xp.asarray(0.25, dtype=xp.float64)), **TOL
    )
    b = xp.asarray(10.0, dtype=xp.float64)
    assert_close(compiled(A0, b)[1], xp.asarray(1.0 / 13.0, dtype=xp.float64), **TOL)
    shape = pa.eval_shape(cubic_root, A0, B0)
    assert shape.shape == () and shape.dtype == xp.float64


def test_root_has_aux_and_initial_guess_without_derivative():
    def newton_counting(f, x):
        steps = 0
        while abs(float(f(x))) > 1e-14 and steps < 50:
            x = x - f(x) / pa.jacfwd(f)(x)
            steps += 1
        return x, xp.asarray(steps)

    def root(a, guess_scale):
        x, steps = pa.custom_root(lambda x: x**3 + a * x - 2.0, guess_scale * 1.5, newton_counting,
                                  scalar_tangent_solve, has_aux=True)  # fmt: skip
        return x, steps

    a, s = xp.asarray(1.0, dtype=xp.float64), xp.asarray(1.0, dtype=xp.float64)
    (da, ds), steps = pa.grad(root, argnums=(0, 1), has_aux=True)(a, s)
    assert_close(da, xp.asarray(-0.25, dtype=xp.float64), **TOL)
    assert_close(ds, xp.asarray(0.0, dtype=xp.float64), **TOL)  # the initial guess carries no derivative
    assert 0 < int(steps) < 50


def test_vmap_over_the_operator_that_matvec_and_solve_close_over():
    Ms = xp.stack([arr([[4.0, 1.0], [2.0, 3.0]]), arr([[5.0, -1.0], [0.5, 2.0]])])
    b = arr([1.0, 2.0])

    def x_of(M, b):
        return pa.custom_linear_solve(
            lambda v: M @ v,
            b,
            lambda mv, r: xp.linalg.solve(M, r),
            transpose_solve=lambda vm, r: xp.linalg.solve(xp.matrix_transpose(M), r),
        )

    with warnings.catch_warnings():
        warnings.simplefilter("error", LoopFallbackWarning)  # the solve closes over a batched M: batched
        got = pa.vmap(pa.jacrev(x_of, argnums=(0, 1)), in_dims=(0, None))(Ms, b)
    expected = pa.vmap(pa.jacrev(lambda M, b: xp.linalg.solve(M, b), argnums=(0, 1)), in_dims=(0, None))(
        Ms, b
    )
    assert_close(got, expected, **TOL)


def test_a_residual_of_another_structure_than_its_unknowns_is_refused():
    with raises_cleanly(pa.ImplicitError, "custom_root", "structure"):
        pa.grad(
            lambda a: pa.custom_root(lambda x: (x - a, x), a * 0.0, lambda f, x: x, scalar_tangent_solve)
        )(A0)


def test_the_arrays_kept_for_the_backward_pass_do_not_depend_on_iterations():
    theta = xp.asarray(np.linspace(0.0, 1.0, 50).tolist(), dtype=xp.float64)

    def loss(theta, n):
        def solve(f, x):
            for _ in range(n):
                x = x - f(x)
            return x

        x = pa.custom_root(lambda x: x - 0.5 * xp.cos(x) - theta, xp.zeros_like(theta), solve,
                           lambda g, y: y / g(xp.ones_like(y)))  # fmt: skip
        return xp.sum(x**2)

    kept = {n: sum(r.nbytes for r in pa.saved_residuals(loss, theta, n)) for n in (60, 2000)}
    assert kept[60] == kept[2000] <= 4 * 50 * 8, kept  # theta, the root and its square's input, at most
