"""``pa.while_loop(..., compiled=True)``: under grad outside ``pa.jit`` the steps replay the body's traced
graph (eager's kernels), so the gradient is the Python body's bit for bit, the body function runs only at
the traces (not once a step), a second call reuses the compiled code, a large carry keeps the Python
body; and ``solve_ivp``, which asks for it, calls ``fun`` a fixed number of times under grad."""

import numpy as np
import pytest
from helpers import to_numpy

import polyad as pa
from polyad import xp
from polyad.control import closure
from polyad.integrate import solve_ivp


def arr(values):
    """A float64 array of the backend under test."""
    return xp.asarray(np.asarray(values, dtype=np.float64).tolist(), dtype=xp.float64)


def _loop(compiled, calls, n=3):
    def f(k):
        def body(c):
            calls[0] += 1
            x, i = c
            return xp.sin(x) * k + 0.1 * x * x, i + 1

        x, _ = pa.while_loop(lambda c: c[1] < 40, body, (xp.ones(n) * 0.3, xp.asarray(0)), compiled=compiled)
        return xp.sum(x * x)

    return f


def _unrolled(k, n=3):
    x = np.ones(n) * 0.3
    dx = np.zeros(n)  # d x / d k, forward by hand
    for _ in range(40):
        x, dx = np.sin(x) * k + 0.1 * x * x, np.cos(x) * dx * k + np.sin(x) + 0.2 * x * dx
    return np.sum(x * x), np.sum(2 * x * dx)


def test_compiled_gradient_is_the_python_bodys_bit_for_bit_and_the_body_runs_at_the_traces_only():
    k = xp.asarray(0.9, dtype=xp.float64)
    python_calls, compiled_calls = [0], [0]
    expected = to_numpy(pa.grad(_loop(False, python_calls))(k))
    got = to_numpy(pa.grad(_loop(True, compiled_calls))(k))
    assert got.tobytes() == expected.tobytes()
    np.testing.assert_allclose(got, _unrolled(0.9)[1], rtol=1e-12)
    # the Python body: the trace, 40 forward steps, the schedule's turns (and advances); compiled: the
    # trace and the pullback's trace
    assert python_calls[0] >= 81
    assert compiled_calls[0] == 2
    # called again (a new trace of the same graph): the compiled step and pullback are reused
    again = to_numpy(pa.grad(_loop(True, compiled_calls))(k))
    assert again.tobytes() == expected.tobytes() and compiled_calls[0] == 3
    # the value itself, outside transforms, runs the Python body as every while loop does
    value = float(_loop(True, compiled_calls)(k))
    assert value == pytest.approx(_unrolled(0.9)[0], rel=1e-13) and compiled_calls[0] == 43


def test_a_large_carry_and_a_jvp_run_the_python_body():
    k = xp.asarray(0.9, dtype=xp.float64)
    calls = [0]
    n = closure.REPLAY_ELEMENTS + 1
    g = to_numpy(pa.grad(_loop(True, calls, n))(k))
    np.testing.assert_allclose(g, _unrolled(0.9, n)[1], rtol=1e-12)
    assert calls[0] >= 81
    calls[0] = 0
    _, t = pa.jvp(_loop(True, calls), (k,), (xp.asarray(1.0, dtype=xp.float64),))
    np.testing.assert_allclose(to_numpy(t), _unrolled(0.9)[1], rtol=1e-12)
    assert calls[0] == 41  # the trace, then each step on the jvp's tensors


def test_grad_of_grad_through_a_compiled_loop():
    k = xp.asarray(0.9, dtype=xp.float64)
    h = pa.grad(pa.grad(_loop(True, [0])))(k)
    eps = 1e-5
    fd = (_unrolled(0.9 + eps)[1] - _unrolled(0.9 - eps)[1]) / (2 * eps)
    np.testing.assert_allclose(to_numpy(h), fd, rtol=1e-6)


def test_compiled_must_be_a_bool():
    with pytest.raises(TypeError, match="compiled must be True or False, got 'yes'"):
        pa.while_loop(lambda x: x < 1, lambda x: x + 1, xp.asarray(0.0), compiled="yes")


def test_solve_ivp_under_grad_calls_fun_a_fixed_number_of_times():
    # an SIR model (3 states) fitted to observations: fun runs in the traces of an attempt and of its
    # pullback (and in the initial step selection), not at every one of the ~16 attempts
    calls = [0]

    def sir(t, y, p):
        calls[0] += 1
        infection = p[0] * y[0] * y[1]
        return xp.stack([-infection, infection - p[1] * y[1], p[1] * y[1]])

    t_obs = np.linspace(0.0, 100.0, 11)
    obs = np.linspace(0.0, 0.5, 33).reshape(3, 11)

    def loss(p, rtol=1e-3, atol=1e-6):
        sol = solve_ivp(sir, (0.0, 100.0), arr([0.99, 0.01, 0.0]), t_eval=arr(t_obs), args=(p,), rtol=rtol,
                        atol=atol)  # fmt: skip
        return xp.sum((sol.y - arr(obs)) ** 2)

    p0 = np.array([0.4, 0.15])
    g = to_numpy(pa.grad(loss)(arr(p0), 1e-7, 1e-9))

    def scipy_loss(p):  # the reference: SciPy's solution, tighter, by central differences
        from scipy.integrate import solve_ivp as scipy_solve_ivp

        def f(t, y):
            return [-p[0] * y[0] * y[1], p[0] * y[0] * y[1] - p[1] * y[1], p[1] * y[1]]

        sol = scipy_solve_ivp(f, (0.0, 100.0), [0.99, 0.01, 0.0], t_eval=t_obs, rtol=1e-11, atol=1e-13)
        return np.sum((sol.y - obs) ** 2)

    eps = 1e-6
    fd = [(scipy_loss(p0 + eps * e) - scipy_loss(p0 - eps * e)) / (2 * eps) for e in np.eye(2)]
    np.testing.assert_allclose(g, fd, rtol=1e-4)
    calls[0] = 0
    pa.grad(loss)(arr(p0))
    first = calls[0]
    calls[0] = 0
    pa.grad(loss)(arr(p0))
    # the Python attempt calls fun 6 times a step (200 here); a second call reuses the compiled pullback
    # where the graph's constants can be keyed (NumPy's)
    assert first <= 20 and calls[0] <= first, (first, calls[0])


def test_a_body_holding_a_loop_is_replayed_but_its_code_not_kept():
    # the inner loop's body is a parameter of the outer step's graph, compared by identity: a key would
    # keep it (and what it closes over) alive in the cache, and never be met again
    def f(k):
        def body(c):
            x, i = c
            x = pa.while_loop(lambda y: y[0] < 2.0, lambda y: y * 1.5, x)  # x grows past 2 by factors 1.5
            return x * k * 0.5, i + 1

        x, _ = pa.while_loop(lambda c: c[1] < 3, body, (xp.ones(2), xp.asarray(0)), compiled=True)
        return xp.sum(x)

    def unrolled(k):
        x = np.ones(2)
        for _ in range(3):
            while x[0] < 2.0:
                x = x * 1.5
            x = x * k * 0.5
        return np.sum(x)

    closure._REPLAYS.clear()
    k = xp.asarray(1.1, dtype=xp.float64)
    g = to_numpy(pa.grad(f)(k))
    eps = 1e-6
    np.testing.assert_allclose(g, (unrolled(1.1 + eps) - unrolled(1.1 - eps)) / (2 * eps), rtol=1e-7)
    assert len(closure._REPLAYS) == 1  # the outer condition's code; not the step's
