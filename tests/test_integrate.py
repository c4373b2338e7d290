"""``polyad.integrate.solve_ivp``: the primal against SciPy's ``solve_ivp`` on SciPy's own test problems
(the same steps, so the same solution to rounding, and the same count of evaluations) and against exact
solutions; the derivatives of ``y' = -k y`` against the analytic ones under every transform; vmap against a
loop; reverse mode's memory against its budget (tracemalloc)."""

import math
import tracemalloc

import numpy as np
import pytest
from helpers import start_tracemalloc, to_numpy

import polyad as pa
from polyad.integrate import solve_ivp
from polyad.testing.ode_problems import robertson
from polyad.testing.ode_problems import robertson_numpy as np_robertson

scipy_integrate = pytest.importorskip("scipy.integrate")

xp = pa.xp
METHODS = ("RK45", "DOP853")


def arr(values):
    """A float64 array of the backend under test."""
    return xp.asarray(np.asarray(values, dtype=np.float64).tolist(), dtype=xp.float64)


def close(a, b, rtol, atol=0.0):
    np.testing.assert_allclose(to_numpy(a), to_numpy(b), rtol=rtol, atol=atol)


# ------------------------------------------------------------------------------ the primal against SciPy


def fun_rational(t, y):  # SciPy's test problem, written with polyad.xp
    return xp.stack([y[1] / t, y[1] * (y[0] + 2 * y[1] - 1) / (t * (y[0] - 1))])


def np_fun_rational(t, y):
    return np.array([y[1] / t, y[1] * (y[0] + 2 * y[1] - 1) / (t * (y[0] - 1))])


def sol_rational(t):
    return np.asarray((t / (t + 10), 10 * t / (t + 10) ** 2))


def fun_linear(t, y):
    return xp.stack([-y[0] - 5 * y[1], y[0] + y[1]])


def np_fun_linear(t, y):
    return np.array([-y[0] - 5 * y[1], y[0] + y[1]])


def sol_linear(t):
    return np.vstack((-5 * np.sin(2 * t), 2 * np.cos(2 * t) + np.sin(2 * t)))


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("t_span", [(5.0, 9.0), (5.0, 1.0)])
@pytest.mark.parametrize("with_t_eval", [False, True])
def test_rational_problem_equals_scipy(method, t_span, with_t_eval):
    """SciPy's test_integration problem at its tolerances: the same accepted steps (times), the same
    states to rounding, the same number of evaluations; and the exact solution to the tolerance."""
    rtol, atol = 1e-3, 1e-6
    t_eval = np.linspace(*t_span, 11) if with_t_eval else None
    ours_t_eval = None if t_eval is None else arr(t_eval)
    ours = solve_ivp(fun_rational, t_span, arr([1 / 3, 2 / 9]), method, ours_t_eval, rtol=rtol, atol=atol)
    ref = scipy_integrate.solve_ivp(
        np_fun_rational, t_span, [1 / 3, 2 / 9], method, t_eval, rtol=rtol, atol=atol
    )
    assert ours.status == ref.status == 0 and ours.success
    assert ours.nfev == ref.nfev and ours.njev == 0 and ours.nlu == 0
    close(ours.t, ref.t, 1e-13)
    close(ours.y, ref.y, 1e-10, 1e-12)
    t = to_numpy(ours.t)
    assert np.all(np.abs(to_numpy(ours.y) - sol_rational(t)) < 10 * (atol + rtol * np.abs(sol_rational(t))))


@pytest.mark.parametrize("method", METHODS)
def test_linear_problem_tight_tolerance(method):
    t_eval = np.linspace(0.0, 10.0, 25)
    ours = solve_ivp(fun_linear, (0.0, 10.0), arr([0.0, 2.0]), method, arr(t_eval), rtol=1e-8, atol=1e-10)
    ref = scipy_integrate.solve_ivp(
        np_fun_linear, (0.0, 10.0), [0.0, 2.0], method, t_eval, rtol=1e-8, atol=1e-10
    )
    close(ours.y, ref.y, 1e-9, 1e-11)
    assert ours.nfev == ref.nfev
    close(ours.y, sol_linear(t_eval), 0, 1e-6)


def test_failure_and_max_steps_reported():
    """A solution that blows up in finite time: the step size falls below the spacing of floating-point
    numbers (SciPy's status -1); and a run cut by max_steps."""
    blowup = solve_ivp(lambda t, y: y * y, (0.0, 2.0), arr([1.0]))
    ref = scipy_integrate.solve_ivp(lambda t, y: y * y, (0.0, 2.0), [1.0])
    assert blowup.status == ref.status == -1 and not blowup.success
    assert blowup.message == ref.message
    cut = solve_ivp(fun_linear, (0.0, 10.0), arr([0.0, 2.0]), max_steps=5)
    assert cut.status == -1 and "max_steps" in cut.message
    for method in ("DOP853", "Radau"):
        blowup = solve_ivp(lambda t, y: y * y, (0.0, 2.0), arr([1.0]), method)
        ref = scipy_integrate.solve_ivp(lambda t, y: y * y, (0.0, 2.0), [1.0], method)
        assert blowup.status == ref.status == -1 and blowup.message == ref.message
        cut = solve_ivp(fun_linear, (0.0, 10.0), arr([0.0, 2.0]), method, max_steps=5)
        assert cut.status == -1 and "max_steps" in cut.message


# ------------------------------------------------------------------------------ y' = -k y under transforms

Y_T = 0.446260320296860  # 2 exp(-1.5)
DY_DK = -1.338780960890579  # -3 * 2 exp(-1.5)
D2Y_DK2 = 9 * Y_T
# on the array_api_strict lane (per-op Python overhead about 10x NumPy's) the same checks at 1e-8: the steps
# scale as rtol^(-1/5), 2.5x fewer, and the transforms are covered as on the numpy lane
RTOL = 1e-10 if pa.get_backend() == "numpy" else 1e-8
TOL = 10 * RTOL  # the global error is a few times the local tolerance


def decay(k, method="RK45", y0=2.0, sensitivity="discrete", rtol=RTOL):
    y0 = xp.reshape(xp.asarray(y0, dtype=xp.float64), (1,))
    sol = solve_ivp(lambda t, y, k: -k * y, (0.0, 3.0), y0, method, arr([1.5, 3.0]), args=(k,), rtol=rtol,
                    atol=1e-12, sensitivity=sensitivity)  # fmt: skip
    return sol.y[0, -1]


@pytest.mark.parametrize("method", METHODS)
def test_decay_under_every_transform(method):
    k = xp.asarray(0.5, dtype=xp.float64)
    one = xp.asarray(1.0, dtype=xp.float64)
    f = lambda k: decay(k, method)  # noqa: E731
    close(f(k), Y_T, TOL)
    close(pa.grad(f)(k), DY_DK, TOL)
    out, vjp_fn = pa.vjp(f, k)
    close(out, Y_T, TOL)
    close(vjp_fn(one)[0], DY_DK, TOL)
    close(pa.jvp(f, (k,), (one,))[1], DY_DK, TOL)
    close(pa.jacfwd(f)(k), DY_DK, TOL)
    close(pa.jacrev(f)(k), DY_DK, TOL)
    close(pa.hessian(f)(k), D2Y_DK2, 1e3 * TOL)
    ks = np.array([0.5, 1.0, 2.0])
    close(pa.vmap(f)(arr(ks)), 2 * np.exp(-3 * ks), TOL)
    close(pa.vmap(pa.grad(f))(arr(ks)), -6 * np.exp(-3 * ks), TOL)
    close(pa.jit(f)(k), Y_T, TOL)
    close(pa.jit(pa.grad(f))(k), DY_DK, TOL)


def test_derivatives_with_respect_to_y0_times_and_closures():
    """dy/dy0, dy(t)/dt for a point of t_eval, dy(t1)/dt1 (t_eval None: the ends), a closed-over k."""
    k = 0.5
    close(pa.grad(lambda y0: decay(k, y0=y0))(xp.asarray(2.0, dtype=xp.float64)), math.exp(-1.5), TOL)

    def at(t):
        sol = solve_ivp(
            lambda t, y: -k * y, (0.0, 3.0), arr([2.0]), t_eval=xp.stack([t]), rtol=RTOL, atol=1e-12
        )
        return sol.y[0, 0]

    t = xp.asarray(1.2, dtype=xp.float64)
    close(pa.grad(at)(t), -k * 2 * math.exp(-k * 1.2), 1e-7)

    def end(t1, kk):
        sol = solve_ivp(lambda t, y: -kk * y, (0.0, t1), arr([2.0]), rtol=RTOL, atol=1e-12)
        return sol.y[0, -1]

    t1, kk = xp.asarray(3.0, dtype=xp.float64), xp.asarray(0.5, dtype=xp.float64)
    g_t1, g_k = pa.grad(end, argnums=(0, 1))(t1, kk)
    close(g_t1, -0.5 * Y_T, 1e-7)
    close(g_k, DY_DK, TOL)


def lotka_volterra(t, y, p):
    a, b, c, d = p[0], p[1], p[2], p[3]
    return xp.stack([a * y[0] - b * y[0] * y[1], -c * y[1] + d * y[0] * y[1]])


def test_vmap_over_64_initial_conditions_equals_a_loop():
    # 16 on the array_api_strict lane: the loop of eager solves is what costs there
    batch = 64 if pa.get_backend() == "numpy" else 16
    rng = np.random.default_rng(0)
    y0s = arr(rng.uniform(0.5, 2.0, size=(batch, 2)))
    p = arr([1.5, 1.0, 3.0, 1.0])
    t_eval = arr(np.linspace(0.0, 5.0, 6))

    def final(y0, p):
        sol = solve_ivp(lambda t, y, p: lotka_volterra(t, y, p), (0.0, 5.0), y0, t_eval=t_eval, args=(p,),
                        rtol=1e-6, atol=1e-9)  # fmt: skip
        return sol.y

    batched = to_numpy(pa.vmap(final, in_dims=(0, None))(y0s, p))
    looped = np.stack([to_numpy(final(y0s[i, ...], p)) for i in range(batch)])
    np.testing.assert_allclose(batched, looped, rtol=1e-12, atol=1e-12)
    loss = lambda y0, p: xp.sum(final(y0, p)[:, -1] ** 2)  # noqa: E731
    grads = to_numpy(pa.vmap(pa.grad(loss, argnums=1), in_dims=(0, None))(y0s[:8, ...], p))
    looped = np.stack([to_numpy(pa.grad(loss, argnums=1)(y0s[i, ...], p)) for i in range(8)])
    np.testing.assert_allclose(grads, looped, rtol=1e-10, atol=1e-12)


def test_gradient_of_a_nonlinear_system_against_finite_differences():
    p0 = np.array([1.5, 1.0, 3.0, 1.0])

    def loss(p):
        sol = solve_ivp(lotka_volterra, (0.0, 2.0), arr([1.0, 1.0]), "DOP853", arr([1.0, 2.0]), args=(p,),
                        rtol=1e-11, atol=1e-12)  # fmt: skip
        return xp.sum(sol.y**2)

    g = to_numpy(pa.grad(loss)(arr(p0)))
    eps = 1e-6
    fd = [(float(loss(arr(p0 + eps * e))) - float(loss(arr(p0 - eps * e)))) / (2 * eps) for e in np.eye(4)]
    np.testing.assert_allclose(g, fd, rtol=1e-6)


@pytest.mark.skipif(
    pa.get_backend() != "numpy",
    reason="the budget is backend-neutral and measured on the numpy lane (under tracemalloc and "
    "array_api_strict's wrappers this test took 100 s)",
)
def test_reverse_mode_memory_within_its_budget():
    """Integrations with a 64 KiB state differentiated with checkpoints="auto" under a 16 MiB budget
    (pa.while_loop's: the stored states and one step's recording, estimated from the step's graph):
    tracemalloc's peak does not grow with the number of steps once the budget's 39 slots are filled (at
    150 steps; 50 steps fill them too, but their sweep stores little) and stays within the budget, where
    storing every state of 400 steps would take 400 x 128 KiB = 50 MiB. (The runs are short:
    scripts/bench_ode.py differentiates 10^5 steps.)"""
    n = 8192
    y0 = arr(np.linspace(1.0, 2.0, n))

    def final(k, steps):
        sol = solve_ivp(lambda t, y, k: -k * y, (0.0, 1.0), y0, args=(k,), max_step=1.0 / steps,
                        checkpoints="auto", max_memory="16MiB")  # fmt: skip
        return xp.sum(sol.y[:, -1])

    k = xp.asarray(0.5, dtype=xp.float64)
    peaks = []
    for steps in (150, 400):
        start_tracemalloc()
        try:
            g = pa.grad(final)(k, steps)
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
        close(g, -float(np.sum(to_numpy(y0))) * math.exp(-0.5), 1e-6)
    assert peaks[1] < 1.1 * peaks[0], [p / 2**20 for p in peaks]
    assert peaks[1] < 16 * 2**20, [p / 2**20 for p in peaks]
    assert peaks[1] * 3 < 400 * 2 * 8 * n  # storing every state (the budget is a third of it)


# ------------------------------------------------------------------------------ bad input


def test_bad_input_names_the_argument():
    f = lambda t, y: -y  # noqa: E731
    with pytest.raises(ValueError, match="method"):
        solve_ivp(f, (0.0, 1.0), arr([1.0]), method="Euler")
    with pytest.raises(TypeError, match="args must be a tuple"):
        solve_ivp(f, (0.0, 1.0), arr([1.0]), args=[1.0])
    with pytest.raises(ValueError, match="t_eval must lie within t_span"):
        solve_ivp(f, (0.0, 1.0), arr([1.0]), t_eval=arr([0.5, 2.0]))
    with pytest.raises(ValueError, match="y0 must be 1-D"):
        solve_ivp(f, (0.0, 1.0), arr([[1.0]]))
    with pytest.raises(ValueError, match="must return an array of the state's shape"):
        solve_ivp(lambda t, y: xp.sum(y), (0.0, 1.0), arr([1.0, 2.0]))
    with pytest.raises(ValueError, match="sensitivity"):
        solve_ivp(f, (0.0, 1.0), arr([1.0]), sensitivity="exact")


# ------------------------------------------------------------------------------ sensitivity= forward, adjoint


@pytest.mark.parametrize("sensitivity", ["forward", "adjoint"])
def test_decay_sensitivities(sensitivity):
    """ "forward" is the discrete derivative again; "adjoint" the continuous one, to the tolerance."""
    k = xp.asarray(0.5, dtype=xp.float64)
    f = lambda k: decay(k, sensitivity=sensitivity)  # noqa: E731
    close(f(k), Y_T, TOL)
    close(pa.grad(f)(k), DY_DK, TOL)
    close(pa.vjp(f, k)[1](xp.asarray(1.0, dtype=xp.float64))[0], DY_DK, TOL)
    close(pa.hessian(f)(k), D2Y_DK2, 1e3 * TOL)
    close(pa.grad(lambda y0: decay(k, y0=y0, sensitivity=sensitivity))(xp.asarray(2.0, dtype=xp.float64)),
          math.exp(-1.5), TOL)  # fmt: skip
    ks = np.array([0.5, 1.0, 2.0])
    close(pa.vmap(pa.grad(f))(arr(ks)), -6 * np.exp(-3 * ks), TOL)
    close(pa.jit(pa.grad(f))(k), DY_DK, TOL)
    if sensitivity == "forward":
        close(pa.grad(f)(k), pa.grad(decay)(k), 1e-13)


@pytest.mark.parametrize("sensitivity", ["forward", "adjoint"])
def test_nonlinear_sensitivities_against_discrete(sensitivity):
    """Lotka-Volterra: the gradient of a loss of the solution at several times with respect to the
    parameters, y0 and t_eval, by each sensitivity against the discrete one (forward: to rounding;
    adjoint: to the tolerance, 1e-9 here); p closed over, t_eval differentiated."""
    rtol = 1e-10

    def loss(p, y0, t_eval, sensitivity):
        sol = solve_ivp(lambda t, y: lotka_volterra(t, y, p), (0.0, 2.0), y0, "DOP853", t_eval, rtol=rtol,
                        atol=1e-12, sensitivity=sensitivity)  # fmt: skip
        return xp.sum(sol.y**2)

    args = (arr([1.5, 1.0, 3.0, 1.0]), arr([1.0, 1.2]), arr([0.5, 1.0, 2.0]))
    ours = pa.grad(loss, argnums=(0, 1, 2))(*args, sensitivity)
    ref = pa.grad(loss, argnums=(0, 1, 2))(*args, "discrete")
    for a, b in zip(ours, ref):
        close(a, b, 1e-12 if sensitivity == "forward" else 1e-7, 1e-9)


# ------------------------------------------------------------------------------ Radau (stiff)


def test_radau_primal_against_scipy():
    """Robertson's stiff kinetics and SciPy's rational problem: Radau's solution agrees with SciPy's
    Radau to the tolerance (the Newton iterations differ, so the steps are close, not equal)."""
    p = [0.04, 1e4, 3e7]
    for rtol in (1e-4, 1e-7):
        ours = solve_ivp(
            robertson, (0.0, 40.0), arr([1.0, 0.0, 0.0]), "Radau", args=(arr(p),), rtol=rtol, atol=1e-10
        )
        ref = scipy_integrate.solve_ivp(np_robertson, (0.0, 40.0), [1.0, 0.0, 0.0], "Radau", args=(p,),
                                        rtol=rtol, atol=1e-10)  # fmt: skip
        assert ours.success and ours.njev > 0 and ours.nlu > 0
        assert abs(ours.t.shape[0] - len(ref.t)) <= 0.25 * len(ref.t)
        close(to_numpy(ours.y)[:, -1], ref.y[:, -1], 20 * rtol, 1e-9)
    t_eval = np.linspace(5.0, 9.0, 5)
    ours = solve_ivp(
        fun_rational, (5.0, 9.0), arr([1 / 3, 2 / 9]), "Radau", arr(t_eval), rtol=1e-6, atol=1e-9
    )
    close(ours.y, sol_rational(t_eval), 1e-5)


@pytest.mark.parametrize("method", ["RK45", "DOP853", "Radau"])
def test_eager_steps_agree_with_the_transformed_ones(method):
    """Outside transforms each method runs its own attempt (SciPy's control flow on Python floats) and
    under one the where-selected attempt: the same decisions, so the same solution to rounding (Radau:
    the same sums, bit for bit; RK45 and DOP853 sum their stages as SciPy's np.dot outside, by additions
    under transforms)."""
    if method == "Radau":
        fun, y0, span, args = robertson, [1.0, 0.0, 0.0], (0.0, 40.0), (arr([0.04, 1e4, 3e7]),)
    else:
        fun, y0, span, args = fun_rational, [1 / 3, 2 / 9], (5.0, 9.0), ()

    def end(y0):
        return solve_ivp(fun, span, y0, method, args=args, rtol=1e-6, atol=1e-10).y[:, -1]

    eager = end(arr(y0))
    close(pa.jit(end)(arr(y0)), eager, 1e-13 if method == "Radau" else 1e-10)
    close(pa.vmap(end)(xp.reshape(arr(y0), (1, -1)))[0, ...], eager, 1e-10)


def test_robertson_sensitivities_match_cvodes():
    """CVODES's published dy/dp1 at t = 0.4 (cvsRoberts_FSA_dns, rtol 1e-4), by reverse mode (discrete),
    forward mode and sensitivity="forward"."""
    p = arr([0.04, 1e4, 3e7])
    cvodes = np.array([-3.5595e-01, 3.9025e-04, 3.5556e-01])

    def at_04(p, sensitivity="discrete"):
        sol = solve_ivp(robertson, (0.0, 0.4), arr([1.0, 0.0, 0.0]), "Radau", arr([0.4]), args=(p,),
                        rtol=1e-6, atol=1e-10, sensitivity=sensitivity)  # fmt: skip
        return sol.y[:, -1]

    close(to_numpy(pa.jacrev(at_04)(p))[:, 0], cvodes, 1e-4)
    close(to_numpy(pa.jacfwd(at_04)(p))[:, 0], cvodes, 1e-4)
    close(to_numpy(pa.jacrev(lambda p: at_04(p, "forward"))(p))[:, 0], cvodes, 1e-4)


def test_radau_derivatives_of_the_decay():
    """The implicit derivative of the Newton solve (pa.custom_root): first and second derivatives to the
    tolerance, vmap of grad (examples finishing at different steps), jit of grad, against the analytic
    values."""
    k = xp.asarray(0.5, dtype=xp.float64)
    f = lambda k: decay(k, "Radau", rtol=1e-8)  # noqa: E731  (order 5: rtol 1e-8 is within TOL)
    close(f(k), Y_T, TOL)
    close(pa.grad(f)(k), DY_DK, TOL)
    close(pa.jvp(f, (k,), (xp.asarray(1.0, dtype=xp.float64),))[1], DY_DK, TOL)
    close(pa.hessian(f)(k), D2Y_DK2, 1e3 * TOL)
    ks = np.array([0.5, 1.0])
    close(pa.vmap(pa.grad(f))(arr(ks)), -6 * np.exp(-3 * ks), TOL)
    close(pa.jacrev(f)(k), DY_DK, TOL)
    close(pa.jacfwd(f)(k), DY_DK, TOL)
    close(pa.jit(f)(k), Y_T, TOL)
    close(pa.jit(pa.grad(f))(k), DY_DK, TOL)  # the collocation root (custom_root) compiled with its pullback


def test_progress_bar_reports_the_interval(capsys):
    """progress=True draws a tqdm bar of t (outside transforms) and changes nothing of the solution."""
    pytest.importorskip("tqdm")
    with_bar = solve_ivp(fun_linear, (0.0, 2.0), arr([0.0, 2.0]), progress=True)
    without = solve_ivp(fun_linear, (0.0, 2.0), arr([0.0, 2.0]))
    close(with_bar.y, without.y, 0)
    err = capsys.readouterr().err
    assert "2.00/2.00" in err or "2/2" in err, err[-200:]


def test_vmap_over_the_end_time_in_both_directions():
    """Each example its own interval, forwards or backwards, and d y(t1) / d t1 = f(y(t1))."""

    def end(t1):
        return solve_ivp(lambda t, y: -0.5 * y, (0.0, t1), arr([2.0]), rtol=RTOL, atol=1e-12).y[0, -1]

    t1s = np.array([1.0, 3.0, -2.0])
    close(pa.vmap(end)(arr(t1s)), 2 * np.exp(-0.5 * t1s), TOL)
    close(pa.vmap(pa.grad(end))(arr(t1s)), -np.exp(-0.5 * t1s), 1e-7)


def test_adjoint_refuses_an_equation_unstable_backwards():
    """Robertson's kinetics integrated backwards leave the forward solution at once: the adjoint,
    integrated along that state, would be wrong; it is refused, naming the alternatives."""

    def y1(p):
        return solve_ivp(robertson, (0.0, 0.4), arr([1.0, 0.0, 0.0]), "Radau", arr([0.4]), args=(p,),
                         rtol=1e-6, atol=1e-10, sensitivity="adjoint").y[0, -1]  # fmt: skip

    with pytest.raises(ValueError, match="unstable backwards.*'discrete' or 'forward'"):
        pa.grad(y1)(arr([0.04, 1e4, 3e7]))


@pytest.mark.parametrize("method", METHODS)
def test_first_step_as_scipy(method):
    ours = solve_ivp(fun_linear, (0.0, 3.0), arr([0.0, 2.0]), method, first_step=1e-3, rtol=1e-6, atol=1e-9)
    ref = scipy_integrate.solve_ivp(np_fun_linear, (0.0, 3.0), [0.0, 2.0], method, first_step=1e-3, rtol=1e-6,
                                    atol=1e-9)  # fmt: skip
    # the first steps' error estimates are rounding noise (summed in another order than SciPy's): the
    # step sizes agree to the noise's share, not to the last digit
    assert ours.nfev == ref.nfev
    close(ours.t, ref.t, 1e-6)
    close(ours.y, ref.y, 1e-6, 1e-9)


def test_radau_sparse_jacobians_give_the_same_solution():
    """jac_sparsity (a pattern, or "detect"): the Newton Jacobians from pa.sparse_jacfwd, the same
    solution as with dense pa.jacfwd ones; refused for an explicit method."""

    def reaction_diffusion(t, u):  # stiff, tridiagonal Jacobian
        lap = xp.concat([u[1:2] - 2 * u[:1], u[2:] - 2 * u[1:-1] + u[:-2], u[-2:-1] - 2 * u[-1:]])
        return 100.0 * lap - 10.0 * u**3

    u0 = arr(np.sin(np.linspace(0.0, np.pi, 20)))
    dense = solve_ivp(reaction_diffusion, (0.0, 0.5), u0, "Radau", rtol=1e-6, atol=1e-9)
    pattern = pa.jacobian_sparsity(lambda u: reaction_diffusion(0.0, u))(u0)
    for sparsity in (pattern, "detect"):
        sparse = solve_ivp(
            reaction_diffusion, (0.0, 0.5), u0, "Radau", rtol=1e-6, atol=1e-9, jac_sparsity=sparsity
        )
        assert sparse.success and sparse.njev == dense.njev
        close(sparse.y, dense.y, 1e-10, 1e-12)
    with pytest.raises(ValueError, match="jac_sparsity is for method='Radau'"):
        solve_ivp(reaction_diffusion, (0.0, 0.5), u0, jac_sparsity="detect")
