"""``solve_ivp(method="BDF")``: SciPy's variable-order BDF. Outside transforms the same steps as SciPy's
BDF (with the same Jacobian: bit for bit on NumPy); under transforms one checkpointed ``while_loop`` whose
Newton solves are differentiated through ``custom_root``: Robertson's sensitivities against SUNDIALS
CVODES's published ones, forward against reverse mode, vmap against a loop; HIRES against Mazzia et al.'s
reference solution (slow)."""

import numpy as np
import pytest
from helpers import to_numpy

import polyad as pa
from polyad.integrate import solve_ivp
from polyad.testing.ode_problems import robertson, robertson_jacobian_numpy
from polyad.testing.ode_problems import robertson_numpy as np_robertson

scipy_integrate = pytest.importorskip("scipy.integrate")

xp = pa.xp
P = [0.04, 1e4, 3e7]


def arr(values):
    return xp.asarray(np.asarray(values, dtype=np.float64).tolist(), dtype=xp.float64)


def close(a, b, rtol, atol=0.0):
    np.testing.assert_allclose(to_numpy(a), to_numpy(b), rtol=rtol, atol=atol)


def np_robertson_jac(t, y, p):
    return robertson_jacobian_numpy(t, to_numpy(y), to_numpy(p))


@pytest.mark.parametrize("rtol", [1e-4, 1e-6])
def test_robertson_takes_scipys_steps(rtol):
    """With the same Jacobian (jac=) the steps are SciPy's: on NumPy bit for bit; without it (polyad's
    Jacobians are exact, SciPy's finite differences) as many steps, the times to 1e-7."""
    y0, span = [1.0, 0.0, 0.0], (0.0, 40.0)
    ref = scipy_integrate.solve_ivp(np_robertson, span, y0, "BDF", args=(P,), rtol=rtol, atol=1e-10,
                                    jac=np_robertson_jac)  # fmt: skip
    ours = solve_ivp(
        robertson, span, arr(y0), "BDF", args=(arr(P),), rtol=rtol, atol=1e-10, jac=np_robertson_jac
    )
    assert ours.success and (ours.nlu, ours.njev) == (ref.nlu, ref.njev)
    t = to_numpy(ours.t)
    assert t.shape == ref.t.shape
    np.testing.assert_allclose(t, ref.t, rtol=0 if pa.get_backend() == "numpy" else 1e-12)
    close(ours.y, ref.y, 1e-12, 1e-300)
    ours = solve_ivp(robertson, span, arr(y0), "BDF", args=(arr(P),), rtol=rtol, atol=1e-10)
    ref = scipy_integrate.solve_ivp(np_robertson, span, y0, "BDF", args=(P,), rtol=rtol, atol=1e-10)
    assert to_numpy(ours.t).shape == ref.t.shape and ours.nlu == ref.nlu
    close(ours.t, ref.t, 1e-7)


A_LIN = np.array([[-50.0, 1.0], [2.0, -1.0]])


@pytest.mark.parametrize(
    "options", [{}, {"first_step": 1e-3}, {"max_step": 0.05}, {"t_eval": np.linspace(0.013, 1.97, 11)}]
)
def test_options_and_interpolant_as_scipys(options):
    """A stiff forced linear system with a constant jac: SciPy's steps and nfev with first_step,
    max_step, and t_eval, whose values (BDF's interpolant) equal SciPy's dense output to rounding."""
    A = arr(A_LIN)
    t_eval = options.get("t_eval")
    rest = {k: v for k, v in options.items() if k != "t_eval"}
    tol = dict(rtol=1e-6, atol=1e-9, jac=A_LIN, **rest)
    ours = solve_ivp(lambda t, y: A @ y + xp.sin(t), (0.0, 2.0), arr([1.0, 0.5]), "BDF",
                     None if t_eval is None else arr(t_eval), **tol)  # fmt: skip
    ref = scipy_integrate.solve_ivp(lambda t, y: A_LIN @ y + np.sin(t), (0.0, 2.0), [1.0, 0.5], "BDF",
                                    dense_output=True, **tol)  # fmt: skip
    if t_eval is None:
        assert ours.nfev == ref.nfev and to_numpy(ours.t).shape == ref.t.shape
        close(ours.t, ref.t, 1e-13)
        close(ours.y, ref.y, 1e-12, 1e-15)
    else:
        close(ours.y, ref.sol(t_eval), 1e-12, 1e-15)


@pytest.mark.parametrize("t_span", [(0.0, 40.0), (40.0, 0.0)])
def test_dense_output_equals_scipys(t_span):
    """``dense_output=True`` with BDF: SciPy's interpolant (the differences anchored at each step's end)
    on the same steps, forward and backward in time, at points across every step and on its ends."""
    p, y0 = arr(P), [1.0, 2e-5, 0.1] if t_span[0] else [1.0, 0.0, 0.0]
    jac = lambda t, y, _: np_robertson_jac(t, y, P)  # noqa: E731
    ours = solve_ivp(robertson, t_span, arr(y0), "BDF", args=(p,), rtol=1e-6, atol=1e-10, jac=jac,
                     dense_output=True)  # fmt: skip
    ref = scipy_integrate.solve_ivp(np_robertson, t_span, y0, "BDF", args=(P,), rtol=1e-6, atol=1e-10,
                                    jac=jac, dense_output=True)  # fmt: skip
    close(ours.t, ref.t, 1e-13)
    times = np.concatenate([np.linspace(*t_span, 301), ref.t])
    scale = np.max(np.abs(ref.y), axis=1, keepdims=True)
    error = np.max(np.abs(to_numpy(ours.sol(arr(times))) - ref.sol(times)) / scale)
    assert error < 1e-13, error
    close(ours.sol(arr(3.3)), ref.sol(3.3), 1e-12, 1e-18)


def test_dense_output_derivative_by_a_parameter():
    """``sol(t)`` of a BDF solve under ``grad``: the derivative of ``y(t)`` for ``y' = -k y`` by the rate,
    against central differences of the eager interpolant (the same steps: smooth in ``k``)."""

    def y_at(k, t):
        sol = solve_ivp(lambda t, y: -k * y, (0.0, 2.0), arr([1.0]), "BDF", rtol=1e-8, atol=1e-12,
                        dense_output=True).sol  # fmt: skip
        return sol(t)[0]

    k, t, eps = 0.7, arr(1.3), 1e-6
    central = (to_numpy(y_at(k + eps, t)) - to_numpy(y_at(k - eps, t))) / (2 * eps)
    close(pa.grad(y_at)(arr(k), t), central, 1e-6)
    close(pa.grad(y_at)(arr(k), t), -1.3 * np.exp(-0.7 * 1.3), 1e-6)


def at_04(p, sensitivity="discrete"):
    sol = solve_ivp(robertson, (0.0, 0.4), arr([1.0, 0.0, 0.0]), "BDF", arr([0.4]), args=(p,), rtol=1e-6,
                    atol=1e-10, sensitivity=sensitivity)  # fmt: skip
    return sol.y[:, -1]


def test_robertson_sensitivities_match_cvodes_and_each_other():
    """dy/dp1 at t = 0.4 by forward mode (a tangent through the loop) against CVODES's published values
    (cvsRoberts_FSA_dns, its own tolerances: to 1e-4); the discrete adjoint (reverse mode through the
    checkpointed loop) of w . y agrees with it to 1e-8 (w weighs the small y2 up: the columns of the
    Jacobian sum to zero, the total mass being conserved)."""
    p = arr(P)
    cvodes = np.array([-3.5595e-01, 3.9025e-04, 3.5556e-01])
    e1 = arr([1.0, 0.0, 0.0])
    column = to_numpy(pa.jvp(at_04, (p,), (e1,))[1])
    close(column, cvodes, 1e-4)
    w = np.array([1.0, 1e4, 1.0])
    row = to_numpy(pa.grad(lambda p: xp.sum(arr(w) * at_04(p)))(p))
    close(row[0], w @ column, 1e-8)


@pytest.mark.slow
def test_robertson_full_jacobians_agree():
    """The whole 3 x 3 Jacobian by jacfwd, jacrev (the discrete adjoint) and jacrev with
    sensitivity="forward": each column to 1e-8 of its largest entry."""
    p = arr(P)
    forward = to_numpy(pa.jacfwd(at_04)(p))
    size = np.abs(forward).max(axis=0)
    for other in (pa.jacrev(at_04)(p), pa.jacrev(lambda p: at_04(p, "forward"))(p)):
        np.testing.assert_allclose(to_numpy(other) / size, forward / size, rtol=1e-8, atol=1e-8)


def test_vmap_over_a_rate_equals_a_loop():
    """Each example its own steps and orders (vmap masks the finished ones): the traced tries agree with
    the eager solve (SciPy's loop) example by example."""
    scales = [1.0, 3.0]
    ps = arr([[0.04 * s, 1e4, 3e7] for s in scales])
    batched = pa.vmap(at_04)(ps)
    for i in range(len(scales)):
        close(batched[i, ...], at_04(ps[i, ...]), 1e-9, 1e-14)


def test_decay_derivatives_and_the_adjoint():
    """y' = -k y: the value, d/dk and d/dy0 against exp(-k t), by the discrete solve's reverse mode and
    by the continuous adjoint (to the tolerance)."""
    k = xp.asarray(0.5, dtype=xp.float64)

    def final(k, y0, sensitivity="discrete"):
        sol = solve_ivp(lambda t, y, k: -k * y, (0.0, 2.0), xp.reshape(y0, (1,)), "BDF", args=(k,),
                        rtol=1e-8, atol=1e-12, sensitivity=sensitivity)  # fmt: skip
        return sol.y[0, -1]

    y0 = xp.asarray(2.0, dtype=xp.float64)
    close(final(k, y0), 2 * np.exp(-1.0), 1e-7)
    for sensitivity, tol in (("discrete", 1e-7), ("forward", 1e-7), ("adjoint", 1e-5)):
        dk, dy0 = pa.grad(lambda k, y0, s=sensitivity: final(k, y0, s), argnums=(0, 1))(k, y0)
        close(dk, -4 * np.exp(-1.0), tol)
        close(dy0, np.exp(-1.0), tol)
    close(
        pa.jvp(lambda k: final(k, y0), (k,), (xp.asarray(1.0, dtype=xp.float64),))[1], -4 * np.exp(-1.0), 1e-7
    )


def test_derivatives_with_respect_to_the_times():
    """d y(t1) / d t1 (under vmap) and d y(te) / d te against central differences of the eager solve:
    the last step, cut at t1, rescales the differences by a factor of t1, which carries part of the
    derivative (a stopped factor gave -0.64 for -1.39)."""

    def forced(t, y):
        return -0.5 * y + xp.sin(3 * t)

    def end(t1, te=None):
        t_eval = None if te is None else xp.reshape(te, (1,))
        sol = solve_ivp(forced, (0.0, t1), arr([2.0]), "BDF", t_eval, rtol=1e-6, atol=1e-10)
        return sol.y[0, -1]

    def central(f, x, eps=1e-6):
        return (
            float(f(xp.asarray(x + eps, dtype=xp.float64))) - float(f(xp.asarray(x - eps, dtype=xp.float64)))
        ) / (2 * eps)

    two = xp.asarray(2.0, dtype=xp.float64)
    # under vmap each example stops at its own t1 (the first frozen while the second runs on)
    close(pa.vmap(pa.grad(end))(arr([0.5, 1.3])), [central(end, 0.5), central(end, 1.3)], 1e-6)
    at = lambda te: end(two, te)  # noqa: E731
    close(pa.grad(at)(xp.asarray(0.77, dtype=xp.float64)), central(at, 0.77), 1e-6)


def test_jac_options_and_refusals():
    """A constant jac (SciPy never refreshes it) on a linear system: SciPy's steps; vectorized=True is
    accepted (fun is called on one state); LSODA, jac for an explicit method and a jac of the wrong
    shape are refused by name."""
    A = np.array([[-100.0, 1.0], [0.0, -0.5]])
    Ax = arr(A)
    ours = solve_ivp(lambda t, y: Ax @ y, (0.0, 5.0), arr([1.0, 1.0]), "BDF", jac=A, vectorized=True)
    ref = scipy_integrate.solve_ivp(lambda t, y: A @ y, (0.0, 5.0), [1.0, 1.0], "BDF", jac=A, vectorized=True)
    assert ours.njev == 0 and to_numpy(ours.t).shape == ref.t.shape
    close(ours.t, ref.t, 1e-12)
    # jac_sparsity (a pattern or "detect"): the same Jacobians, the same steps; the Newton matrix is
    # factorised by SuperLU, not LAPACK, so the step times agree to rounding, not to the bit
    pattern = np.abs(A) > 0
    for sparsity in (pattern, "detect"):
        sparse = solve_ivp(lambda t, y: Ax @ y, (0.0, 5.0), arr([1.0, 1.0]), "BDF", jac_sparsity=sparsity)
        dense = solve_ivp(lambda t, y: Ax @ y, (0.0, 5.0), arr([1.0, 1.0]), "BDF")
        assert (sparse.nfev, sparse.njev, sparse.nlu) == (dense.nfev, dense.njev, dense.nlu)
        close(sparse.t, dense.t, 1e-10)
    with pytest.raises(ValueError, match="method='LSODA' is not supported.*'BDF'"):
        solve_ivp(lambda t, y: -y, (0.0, 1.0), arr([1.0]), "LSODA")
    with pytest.raises(ValueError, match="jac is for method='Radau' or 'BDF'.*got method='RK45'"):
        solve_ivp(lambda t, y: -y, (0.0, 1.0), arr([1.0]), jac=np.eye(1))
    with pytest.raises(ValueError, match=r"jac must be of shape \(2, 2\).*got \(3, 3\)"):
        solve_ivp(lambda t, y: Ax @ y, (0.0, 1.0), arr([1.0, 1.0]), "BDF", jac=np.eye(3))


def hires(t, y):
    return xp.stack([
        -1.71 * y[0] + 0.43 * y[1] + 8.32 * y[2] + 0.0007,
        1.71 * y[0] - 8.75 * y[1],
        -10.03 * y[2] + 0.43 * y[3] + 0.035 * y[4],
        8.32 * y[1] + 1.71 * y[2] - 1.12 * y[3],
        -1.745 * y[4] + 0.43 * y[5] + 0.43 * y[6],
        -280.0 * y[5] * y[7] + 0.69 * y[3] + 1.71 * y[4] - 0.43 * y[5] + 0.69 * y[6],
        280.0 * y[5] * y[7] - 1.81 * y[6],
        -280.0 * y[5] * y[7] + 1.81 * y[6],
    ])  # fmt: skip


@pytest.mark.slow
def test_hires_against_the_reference_solution():
    """HIRES (Test Set for IVP Solvers, Mazzia et al.): y(321.8122) at rtol 1e-8 within 10 x rtol of
    the published reference solution (relative error of each component above 1e-5 of its size)."""
    y0 = arr([1.0, 0, 0, 0, 0, 0, 0, 0.0057])
    sol = solve_ivp(hires, (0.0, 321.8122), y0, "BDF", rtol=1e-8, atol=1e-12)
    ref = np.array([0.7371312573325668e-3, 0.1442485726316185e-3, 0.5888729740967575e-4,
                    0.1175651343283149e-2, 0.2386356198831331e-2, 0.6238968252742796e-2,
                    0.2849998395185769e-2, 0.2850001604814231e-2])  # fmt: skip
    assert sol.success
    np.testing.assert_allclose(to_numpy(sol.y)[:, -1], ref, rtol=10 * 1e-8)
