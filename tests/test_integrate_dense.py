"""``solve_ivp(dense_output=True)``: the ``OdeSolution`` against SciPy's interpolant on the same steps
(SciPy's ``solve_ivp(..., dense_output=True).sol`` where the steps are SciPy's, SciPy's dense output
classes on polyad's steps for Radau, whose steps are close to SciPy's, not equal), both directions, scalar
and array ``t``; under transforms its derivative with respect to the parameters and ``t`` against central
differences of SciPy's interpolant, and under vmap against a loop."""

import numpy as np
import pytest
from helpers import to_numpy

import polyad as pa
from polyad.integrate import solve_ivp

scipy_integrate = pytest.importorskip("scipy.integrate")
scipy_ivp = pytest.importorskip("scipy.integrate._ivp")

xp = pa.xp


def arr(values):
    return xp.asarray(np.asarray(values, dtype=np.float64).tolist(), dtype=xp.float64)


def duffing(t, y, k):  # a mildly nonlinear oscillator
    return xp.stack([y[1], -k * y[0] * (1 + 0.1 * y[0] ** 2) + 0.0 * t])


def np_duffing(t, y, k):
    return np.array([y[1], -k * y[0] * (1 + 0.1 * y[0] ** 2)])


Y0, K = [1.0, 0.5], 1.3
TOL = dict(rtol=1e-6, atol=1e-9)


def queries(t_span):
    a, b = t_span
    inner = np.linspace(a, b, 41)
    return np.concatenate([inner, np.random.default_rng(0).uniform(min(a, b), max(a, b), 30)])


def scipy_pieces(method, sol):
    """SciPy's interpolant of each of polyad's steps: SciPy's solver started at the step's start with the
    step's size as its first step (and its end as the bound), one step, its ``dense_output()``."""
    ts, y_old = to_numpy(sol.ts), to_numpy(sol.y_old)
    solver_class = getattr(scipy_ivp, method)
    pieces = []
    for i in range(len(ts) - 1):
        solver = solver_class(
            lambda t, y: np_duffing(t, y, K),
            ts[i],
            y_old[i],
            ts[i + 1],
            first_step=abs(ts[i + 1] - ts[i]),
            **TOL,
        )
        solver.step()
        assert solver.t_old == ts[i] and abs(solver.t - ts[i + 1]) <= 1e-15 * abs(ts[i + 1])
        pieces.append(solver.dense_output())
    return scipy_ivp.common.OdeSolution(ts, pieces)


@pytest.mark.parametrize("method", ["RK45", "DOP853"])
@pytest.mark.parametrize("t_span", [(0.0, 10.0), (10.0, 0.0)])
def test_dense_output_equals_scipys_interpolant(method, t_span):
    ours = solve_ivp(duffing, t_span, arr(Y0), method=method, dense_output=True, args=(K,), **TOL)
    ref = scipy_pieces(method, ours.sol)
    tq = queries(t_span)
    np.testing.assert_allclose(to_numpy(ours.sol(arr(tq))), ref(tq), rtol=0, atol=1e-13)
    t_ours = to_numpy(ours.t)
    for t in (tq[3], t_span[0], t_span[1], t_ours[5]):  # scalars, the ends, a step boundary
        np.testing.assert_allclose(to_numpy(ours.sol(float(t))), ref(t), rtol=0, atol=1e-13)
    # SciPy's own run: the same steps up to rounding (to the last bit on NumPy), so the same interpolant
    scipy_sol = scipy_integrate.solve_ivp(
        np_duffing, t_span, Y0, method=method, dense_output=True, args=(K,), **TOL
    )
    np.testing.assert_allclose(t_ours, scipy_sol.t, rtol=1e-7)
    np.testing.assert_allclose(to_numpy(ours.sol(arr(tq))), scipy_sol.sol(tq), rtol=0, atol=1e-7)
    assert ours.nfev == scipy_sol.nfev  # DOP853's three extra evaluations per step counted, as SciPy's


@pytest.mark.parametrize("t_span", [(0.0, 10.0), (10.0, 0.0)])
def test_radau_dense_output_is_scipys_on_its_steps(t_span):
    ours = solve_ivp(duffing, t_span, arr(Y0), method="Radau", dense_output=True, args=(K,), **TOL)
    sol = ours.sol
    ts, coeffs = to_numpy(sol.ts), to_numpy(sol.coeffs)
    y_old = to_numpy(sol.y_old)
    pieces = [
        scipy_ivp.radau.RadauDenseOutput(ts[i], ts[i + 1], y_old[i], coeffs[i].T) for i in range(len(ts) - 1)
    ]
    ref = scipy_ivp.common.OdeSolution(ts, pieces)
    tq = queries(t_span)
    np.testing.assert_allclose(to_numpy(sol(arr(tq))), ref(tq), rtol=0, atol=1e-13)
    # it passes through the accepted states, and is the solution (SciPy's own Radau, to the tolerance)
    np.testing.assert_allclose(to_numpy(sol(arr(ts))), to_numpy(ours.y), rtol=0, atol=1e-13)
    scipy_sol = scipy_integrate.solve_ivp(
        np_duffing, t_span, Y0, method="Radau", dense_output=True, args=(K,), rtol=1e-10, atol=1e-12
    ).sol
    np.testing.assert_allclose(to_numpy(sol(arr(tq))), scipy_sol(tq), rtol=0, atol=1e-4)


def test_dense_output_bad_input():
    with pytest.raises(TypeError, match="dense_output must be True or False"):
        solve_ivp(duffing, (0.0, 1.0), arr(Y0), dense_output="yes", args=(K,))
    sol = solve_ivp(duffing, (0.0, 1.0), arr(Y0), dense_output=True, args=(K,)).sol
    with pytest.raises(ValueError, match="t must be a scalar or 1-D"):
        sol(arr([[0.5]]))


def scipy_sol(method, k, **tol):
    return scipy_integrate.solve_ivp(
        np_duffing, (0.0, 5.0), Y0, method=method, dense_output=True, args=(k,), **tol
    ).sol


SLOW_RADAU = pytest.param("Radau", marks=pytest.mark.slow)  # minutes on two cores: a tangent solve per step


@pytest.mark.parametrize("method", ["RK45", pytest.param("DOP853", marks=pytest.mark.slow), SLOW_RADAU])
def test_dense_output_derivatives_equal_central_differences_of_scipys(method):
    tight = dict(rtol=1e-8, atol=1e-10)
    tq = np.array([3.3, 0.7, 4.6])

    def sol(k):
        return solve_ivp(
            duffing, (0.0, 5.0), arr(Y0), method=method, dense_output=True, args=(k,), **tight
        ).sol

    def weighted(k):  # a weighted sum over states and times (the points unsorted)
        return xp.sum(sol(k)(arr(tq)) * arr([[1.0, -0.5, 2.0], [0.3, 1.0, -1.0]]))

    def np_weighted(k):
        return np.sum(scipy_sol(method, k, **tight)(tq) * np.array([[1.0, -0.5, 2.0], [0.3, 1.0, -1.0]]))

    eps = 1e-5
    central = (np_weighted(K + eps) - np_weighted(K - eps)) / (2 * eps)
    np.testing.assert_allclose(to_numpy(pa.grad(weighted)(arr(K))), central, rtol=1e-6)
    # with respect to t (a scalar point): the interpolant's slope
    ref = scipy_sol(method, K, **tight)
    d_t = pa.jacfwd(lambda t: sol(K)(t))(arr(3.3))
    central_t = (ref(3.3 + 1e-6) - ref(3.3 - 1e-6)) / 2e-6
    np.testing.assert_allclose(to_numpy(d_t), central_t, rtol=1e-6)


@pytest.mark.parametrize("method", ["RK45", "DOP853", SLOW_RADAU])
def test_dense_output_under_vmap_equals_the_loop(method):
    tq, ks = np.array([3.3, 0.7, 9.1]), [1.0, 1.3, 2.0]

    def values(k):
        return solve_ivp(
            duffing, (0.0, 10.0), arr(Y0), method=method, dense_output=True, args=(k,), **TOL
        ).sol(arr(tq))

    batched = pa.vmap(values)(arr(ks))
    loop = np.stack([to_numpy(values(k)) for k in ks])
    np.testing.assert_allclose(to_numpy(batched), loop, rtol=0, atol=1e-10)


@pytest.mark.parametrize("dense_output", [False, True])
def test_dop853_evaluates_its_interpolant_once_a_step_as_scipy(dense_output):
    """t_eval, dense output and events share the step's interpolant: DOP853's three extra evaluations
    are made (and counted in nfev) once a step, as SciPy's."""

    def crossing(t, y, k):
        return y[0]

    t_eval = np.linspace(0.0, 10.0, 50)
    opts = dict(method="DOP853", t_eval=t_eval, dense_output=dense_output, args=(K,), **TOL)
    ours = solve_ivp(duffing, (0.0, 10.0), arr(Y0), events=crossing, **dict(opts, t_eval=arr(t_eval)))
    ref = scipy_integrate.solve_ivp(np_duffing, (0.0, 10.0), Y0, events=crossing, **opts)
    assert ours.nfev == ref.nfev
    np.testing.assert_allclose(to_numpy(ours.y), ref.y, rtol=0, atol=1e-7)
    np.testing.assert_allclose(to_numpy(ours.t_events[0]), ref.t_events[0], rtol=0, atol=1e-9)
