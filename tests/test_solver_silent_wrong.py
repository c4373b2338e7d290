"""Solvers that answered wrongly with no error (issue 31): right-hand sides and residuals that fill a
buffer, DOP853 past a nan, ``t_eval`` outside ``t_span`` under transforms, residuals of another shape,
solves that give up, singular Jacobians, nan and complex initial states, and SciPy's iterative solvers
differentiated through their iterations. Each against an independent reference: SciPy, finite
differences, closed forms."""

import math
import warnings

import numpy as np
import pytest
from helpers import to_numpy

import polyad as pa
from polyad.custom.implicit import ImplicitError, SolverNotConvergedError
from polyad.integrate import solve_ivp

scipy_integrate = pytest.importorskip("scipy.integrate")

xp = pa.xp
NUMPY = pa.get_backend() == "numpy"


def arr(values):
    return xp.asarray(np.asarray(values, dtype=np.float64).tolist(), dtype=xp.float64)


def close(a, b, rtol, atol=0.0):
    np.testing.assert_allclose(to_numpy(a), to_numpy(b), rtol=rtol, atol=atol)


# ------------------------------------------------------------------------------ buffers filled in place

Y0 = [0.99, 0.01, 0.0]  # susceptible, infected, recovered


def sir_buffer(zeros_like):
    def rhs(t, y, beta, gamma):
        dydt = zeros_like(y)
        dydt[0] = -beta * y[0] * y[1]
        dydt[1] = beta * y[0] * y[1] - gamma * y[1]
        dydt[2] = gamma * y[1]
        return dydt

    return rhs


def sir_stacked(t, y, beta, gamma):
    return xp.stack([-beta * y[0] * y[1], beta * y[0] * y[1] - gamma * y[1], gamma * y[1]])


def sir_loss(rhs, tol, t1=10.0):
    observed = arr([0.3, 0.2, 0.1, 0.05])

    def loss(p):
        sol = solve_ivp(rhs, (0.0, t1), arr(Y0), args=(p[0], p[1]), t_eval=arr([0.25, 0.5, 0.75, 1.0]) * t1,
                        **tol)  # fmt: skip
        return xp.sum((sol.y[1, :] - observed) ** 2)

    return loss


FIXED_STEPS = dict(rtol=1e3, atol=1e3, first_step=0.25, max_step=0.25)
BUFFERS = [("xp.zeros_like", xp.zeros_like)] + ([("np.zeros_like", np.zeros_like)] if NUMPY else [])


@pytest.mark.parametrize("name, zeros_like", BUFFERS, ids=[n for n, _ in BUFFERS])
def test_buffer_filling_rhs_keeps_the_first_stage_derivative(name, zeros_like):
    """The gradient with respect to ``args`` alone: the buffer's right-hand side gives the stacked one's
    gradient at default tolerances (it lost the first stage's derivative: 3.7e-4 relative), with no
    lost-derivative warning, and central differences' on a fixed grid of steps."""
    p = arr([1.5, 0.3])
    with warnings.catch_warnings():
        warnings.simplefilter("error", pa.DerivativeLostWarning)
        g_buffer = pa.grad(sir_loss(sir_buffer(zeros_like), {}, t1=5.0))(p)
    g_stacked = pa.grad(sir_loss(sir_stacked, {}, t1=5.0))(p)
    close(g_buffer, g_stacked, rtol=1e-12, atol=1e-15)
    # every step 0.25 (tolerances no step fails): the solution is a smooth function of p, whose central
    # differences the discrete derivative matches to their rounding
    loss = sir_loss(sir_buffer(zeros_like), FIXED_STEPS, t1=3.0)
    g = to_numpy(pa.grad(loss)(p))
    h, base = 1e-6, to_numpy(p)
    for i in range(2):
        e = np.zeros(2)
        e[i] = h
        fd = (float(loss(arr(base + e))) - float(loss(arr(base - e)))) / (2 * h)
        np.testing.assert_allclose(g[i], fd, rtol=1e-8)


def test_buffer_filling_rhs_under_jvp_and_vmap():
    """The same right-hand side under jvp (against the stacked one's) and vmap (against a loop)."""
    rhs = sir_buffer(xp.zeros_like)
    p, dp = arr([1.5, 0.3]), arr([0.3, -0.7])
    _, t_buffer = pa.jvp(sir_loss(rhs, FIXED_STEPS, t1=1.0), (p,), (dp,))
    _, t_stacked = pa.jvp(sir_loss(sir_stacked, FIXED_STEPS, t1=1.0), (p,), (dp,))
    close(t_buffer, t_stacked, rtol=1e-12, atol=1e-15)
    ps = arr([[1.5, 0.3], [1.2, 0.4]])
    batched = pa.vmap(pa.grad(sir_loss(rhs, FIXED_STEPS, t1=1.0)))(ps)
    for k in range(2):
        expected = pa.grad(sir_loss(sir_stacked, FIXED_STEPS, t1=1.0))(ps[k, :])
        close(batched[k, :], expected, rtol=1e-9, atol=1e-13)


@pytest.mark.parametrize("name, zeros_like", BUFFERS, ids=[n for n, _ in BUFFERS])
def test_buffer_filling_rhs_closing_over_the_parameter(name, zeros_like):
    """The parameter closed over, not in ``args``: solve_ivp finds it in fun's closure (the same
    gradient as the stacked right-hand side's, no lost derivative)."""

    def final(beta, buffered):
        def rhs(t, y):
            if not buffered:
                return sir_stacked(t, y, beta, 0.3)
            dydt = zeros_like(y)
            dydt[0] = -beta * y[0] * y[1]
            dydt[1] = beta * y[0] * y[1] - 0.3 * y[1]
            dydt[2] = 0.3 * y[1]
            return dydt

        return solve_ivp(rhs, (0.0, 3.0), arr(Y0)).y[1, -1]

    beta = arr(1.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", pa.DerivativeLostWarning)
        got = pa.grad(lambda b: final(b, True))(beta)
    close(got, pa.grad(lambda b: final(b, False))(beta), rtol=1e-12)


def test_buffer_filling_residual_in_optimize_root():
    """``polyad.optimize.root`` on a residual that fills a buffer: the implicit gradient of the sum of
    ``x = (a^(1/3), a^(4/3))``."""
    from polyad import optimize

    def total(a):
        def f(x, a):
            out = xp.zeros_like(x)
            out[0] = x[0] ** 3 - a
            out[1] = x[1] - x[0] * a
            return out

        return xp.sum(optimize.root(f, xp.ones(2, dtype=xp.float64), args=(a,), tol=1e-12).x)

    expected = (1 / 3) * 2 ** (-2 / 3) + (4 / 3) * 2 ** (1 / 3)
    close(pa.grad(total)(arr(2.0)), expected, rtol=1e-9)


def test_buffer_filling_residual_in_custom_root():
    """A residual that fills a buffer: reverse mode gave [0, 0] (its pullback called it on plain
    arrays); now the implicit gradient, ``x = (sqrt(a0), a1 sqrt(a0))``."""

    def newton(f, x):
        for _ in range(40):
            x = x - xp.linalg.solve(pa.jacfwd(f)(x), f(x))
        return x

    def tangent_solve(g, y):
        cols = [g(xp.asarray([1.0, 0.0], dtype=xp.float64)), g(xp.asarray([0.0, 1.0], dtype=xp.float64))]
        return xp.linalg.solve(xp.stack(cols, axis=1), y)

    def total(a):
        def f(x):
            r = xp.zeros_like(x)
            r[0] = x[0] ** 2 - a[0]
            r[1] = x[1] - a[1] * x[0]
            return r

        return xp.sum(pa.custom_root(f, xp.ones(2, dtype=xp.float64), newton, tangent_solve))

    a = arr([4.0, 3.0])
    expected = [(1 + 3.0) / (2 * 2.0), 2.0]  # d/da of (1 + a1) sqrt(a0)
    close(pa.grad(total)(a), expected, rtol=1e-10)
    close(pa.jvp(total, (a,), (arr([1.0, 0.0]),))[1], expected[0], rtol=1e-10)


# ------------------------------------------------------------------------------ solve_ivp against SciPy


def nan_after_half(t, y):
    return -y + xp.where(t > 0.5, xp.full_like(y, xp.nan), xp.zeros_like(y))


@pytest.mark.parametrize("method", ["RK45", "DOP853", "Radau"])
def test_rhs_turning_nan_fails_as_scipy(method):
    """A right-hand side that turns nan at t > 0.5: SciPy's status -1 at t = 0.5 (DOP853 reported
    success with y(1) = nan: its error norm read nan as zero)."""
    ref = scipy_integrate.solve_ivp(lambda t, y: -y + (np.nan if t > 0.5 else 0.0), (0.0, 1.0), [1.0],
                                    method=method)  # fmt: skip
    sol = solve_ivp(nan_after_half, (0.0, 1.0), arr([1.0]), method=method)
    assert (sol.status, sol.message) == (ref.status, ref.message) == (-1, ref.message)
    np.testing.assert_allclose(float(sol.t[-1]), ref.t[-1], atol=1e-12)
    assert not bool(sol.success) and math.isfinite(float(sol.y[0, -1]))
    if method != "DOP853" or not NUMPY:  # (the others' error norms were right; array_api_strict's eager
        return  # runs use the transformed runs' error norm, and its transformed loop is slow)
    # under a transform: the same failure, no nan reported as a success
    status = pa.jvp(lambda y0: solve_ivp(nan_after_half, (0.0, 1.0), y0, method=method).status,
                    (arr([1.0]),), (arr([1.0]),))[0]  # fmt: skip
    assert int(status) == -1


def t_eval_outside(k):
    sol = solve_ivp(lambda t, y: -k * y, (0.0, 1.0), arr([1.0]), t_eval=arr([0.5, 2.0]))
    return sol.y[0, :]


def t_eval_unsorted(k):
    sol = solve_ivp(lambda t, y: -k * y, (0.0, 1.0), arr([1.0]), t_eval=arr([0.5, 0.2]))
    return sol.y[0, :]


@pytest.mark.parametrize(
    "transform",
    ["eager", "grad", "jvp", "vmap", "jit"],
)
def test_t_eval_outside_t_span_raises_under_every_transform(transform):
    """Eagerly a ValueError; under jvp, vmap and pa.jit it returned the initial value with status 0."""
    k = arr(1.0)
    calls = {
        "eager": lambda f: f(k),
        "grad": lambda f: pa.jacrev(f)(k),
        "jvp": lambda f: pa.jvp(f, (k,), (k,)),
        "vmap": lambda f: pa.vmap(f)(arr([1.0, 2.0])),
        "jit": lambda f: pa.jit(f)(k),
    }
    with pytest.raises(ValueError, match="t_eval must lie within t_span"):
        calls[transform](t_eval_outside)
    with pytest.raises(ValueError, match="t_eval must be sorted in the direction of integration"):
        calls[transform](t_eval_unsorted)


def test_t_eval_given_to_pa_jit_fails_at_each_call():
    """A ``t_eval`` that is an input of the compiled function has no values when it is traced: each call
    with points outside ``t_span`` fails with status -1 (no step taken), one inside solves."""

    def final(t_eval):
        sol = solve_ivp(lambda t, y: -y, (0.0, 1.0), arr([1.0]), t_eval=t_eval, rtol=1e-8, atol=1e-10)
        return sol.status, sol.y[0, -1]

    compiled = pa.jit(final)
    status, _ = compiled(arr([0.5, 2.0]))
    assert int(status) == -1
    status, y = compiled(arr([0.5, 1.0]))
    assert int(status) == 0
    close(y, math.exp(-1.0), rtol=1e-7)


def test_nan_y0_is_refused_up_front():
    """SciPy raises for a non-finite y0; polyad ran 600,000 evaluations. Now the same refusal, eagerly
    and under transforms."""
    with pytest.raises(ValueError, match="must be finite"):
        scipy_integrate.solve_ivp(lambda t, y: -y, (0.0, 1.0), [np.nan, 1.0])
    y0 = arr([np.nan, 1.0])
    with pytest.raises(ValueError, match="y0 must be finite"):
        solve_ivp(lambda t, y: -y, (0.0, 1.0), y0)
    with pytest.raises(ValueError, match="y0 must be finite"):
        pa.grad(lambda y: xp.sum(solve_ivp(lambda t, u: -u, (0.0, 1.0), y).y))(y0)
    with pytest.raises(ValueError, match="y0 must be finite"):
        pa.vmap(lambda y: solve_ivp(lambda t, u: -u, (0.0, 1.0), y).y)(arr([[1.0, 1.0], [np.nan, 1.0]]))


def test_complex_y0_is_refused_naming_y0():
    """A complex ``y0`` failed in ``float()``; now a TypeError naming solve_ivp, y0 and the way out."""
    with pytest.raises(TypeError, match=r"solve_ivp: y0 must be real, got a complex128 array.*xp.real\(y0\)"):
        solve_ivp(lambda t, y: -1j * y, (0.0, 1.0), xp.asarray([1.0 + 0j]))


# ------------------------------------------------------------------ custom_root and custom_linear_solve


def pair_residual(a):
    return pa.custom_root(lambda x: xp.concat([x - a, x + a]), xp.ones(2, dtype=xp.float64),
                          lambda f, x: x, lambda g, y: y)  # fmt: skip


@pytest.mark.parametrize("transform", ["eager", "grad", "jvp", "vmap"])
def test_residual_of_another_shape_raises(transform):
    """A residual of shape (4,) for x of shape (2,) returned a gradient; the docs promise ImplicitError."""
    a = arr([1.0, 2.0])
    calls = {
        "eager": lambda: pair_residual(a),
        "grad": lambda: pa.grad(lambda a: xp.sum(pair_residual(a)))(a),
        "jvp": lambda: pa.jvp(pair_residual, (a,), (a,)),
        "vmap": lambda: pa.vmap(pair_residual)(arr([[1.0, 2.0], [3.0, 4.0]])),
    }
    with pytest.raises(ImplicitError, match=r"f returned shape \(4,\) for initial_guess of shape \(2,\)"):
        calls[transform]()


def giving_up(a):
    """A solve that gives up at once: its result leaves the residual at -(1 + a) = -7."""
    return pa.custom_root(lambda x: x**2 - 3 - a, xp.asarray(1.0, dtype=xp.float64), lambda f, x: x,
                          lambda g, y: y / g(1.0))  # fmt: skip


@pytest.mark.parametrize("transform", ["grad", "jvp", "vmap_grad", "jit_grad"])
def test_solve_that_gave_up_makes_every_derivative_raise(transform):
    a = arr(5.0)
    assert float(giving_up(a)) == 1.0  # the primal comes back as the solve gives it
    calls = {
        "grad": lambda: pa.grad(giving_up)(a),
        "jvp": lambda: pa.jvp(giving_up, (a,), (a,)),
        "vmap_grad": lambda: pa.vmap(pa.grad(giving_up))(arr([5.0, 6.0])),
        "jit_grad": lambda: pa.jit(pa.grad(giving_up))(a),
    }
    with pytest.raises(SolverNotConvergedError, match=r"solve did not converge \(max\|f\(x\)\| = [78] "):
        calls[transform]()


def test_compiled_root_judges_every_call():
    """``pa.jit`` reuses the op: each call's solve is judged afresh (a failing call raises, the next
    converged one differentiates)."""

    def root(a, guess):  # the solve returns its start: a root when the start is one
        return pa.custom_root(lambda x: x - a, guess, lambda f, x: x, lambda g, y: y / g(1.0))

    compiled = pa.jit(pa.grad(root))
    close(compiled(arr(2.0), arr(2.0)), 1.0, rtol=0)
    with pytest.raises(SolverNotConvergedError, match=r"max\|f\(x\)\| = 1 "):
        compiled(arr(2.0), arr(3.0))
    close(compiled(arr(2.0), arr(2.0)), 1.0, rtol=0)


def test_converged_solve_passes_the_residual_test():
    """The same problem solved: the gradient of ``sqrt(2 + a)``, with the test on (its default)."""

    def root(a):
        def newton(f, x):
            for _ in range(60):
                x = x - f(x) / (2 * x)
            return x

        return pa.custom_root(lambda x: x**2 - 2 - a, xp.asarray(1.0, dtype=xp.float64), newton,
                              lambda g, y: y / g(1.0))  # fmt: skip

    close(pa.grad(root)(arr(5.0)), 0.5 / math.sqrt(7.0), rtol=1e-12)


def test_singular_jacobian_at_the_root_is_named():
    """A double root (f' = 0 there) and a singular 2x2 Jacobian: the error names custom_root, the
    singular Jacobian and what to do, not a bare LinAlgError (or a silent inf)."""
    double = lambda a: pa.custom_root(lambda x: (x - a) ** 2, a, lambda f, x: x, lambda g, y: y / g(1.0))  # noqa: E731
    with (
        np.errstate(divide="ignore"),
        pytest.raises(np.linalg.LinAlgError, match="Jacobian of the residual f"),
    ):
        pa.grad(double)(arr(1.0))

    def tangent_solve(g, y):
        cols = [g(xp.asarray([1.0, 0.0], dtype=xp.float64)), g(xp.asarray([0.0, 1.0], dtype=xp.float64))]
        return np.linalg.solve(to_numpy(xp.stack(cols, axis=1)), to_numpy(y))

    def degenerate(a):
        f = lambda x: xp.stack([x[0] + x[1] - a, 2 * x[0] + 2 * x[1] - 2 * a])  # noqa: E731
        x = pa.custom_root(f, xp.stack([a, 0.0 * a]), lambda f, x: x, tangent_solve)
        return xp.sum(x)

    if NUMPY:
        with pytest.raises(
            np.linalg.LinAlgError, match=r"custom_root.*Singular matrix.*Jacobian of the residual f"
        ):
            pa.grad(degenerate)(arr(1.0))


def test_wrong_shaped_matvec_is_named():
    """A matvec of shape (3,) for b of shape (2,) failed in broadcasting; now ImplicitError naming both."""
    A = arr(np.ones((3, 2)))

    def x_of(b):
        return xp.sum(pa.custom_linear_solve(lambda v: A @ v, b, lambda mv, r: r, symmetric=True))

    with pytest.raises(ImplicitError, match=r"matvec returned shape \(3,\) for b of shape \(2,\)"):
        x_of(arr([1.0, 1.0]))
    with pytest.raises(ImplicitError, match=r"matvec returned shape \(3,\) for b of shape \(2,\)"):
        pa.grad(x_of)(arr([1.0, 1.0]))
