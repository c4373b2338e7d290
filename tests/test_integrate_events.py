"""``solve_ivp(events=...)``: event times and states against SciPy's (the same steps, zeros located on
the same interpolants) and against closed forms (free fall: ``t* = sqrt(2h/g)``); terminal events and
terminal counts; several events in one step; directions; under transforms the derivative of the event
time against the closed form and against central differences, and under vmap each example's own stop."""

import math

import numpy as np
import pytest
from helpers import to_numpy

import polyad as pa
from polyad.integrate import solve_ivp

scipy_integrate = pytest.importorskip("scipy.integrate")

xp = pa.xp
METHODS = ("RK45", "DOP853", "Radau")


def arr(values):
    return xp.asarray(np.asarray(values, dtype=np.float64).tolist(), dtype=xp.float64)


def fall(t, y, g):  # height and velocity
    return xp.stack([y[1], -g + 0.0 * y[0]])


def np_fall(t, y, g):
    return np.array([y[1], -g])


def ground(t, y, g):
    return y[0]


ground.terminal, ground.direction = True, -1


def apex(t, y, g):
    return y[1]


def halfway(t, y, g):
    return y[0] - 5.0


@pytest.mark.parametrize("method", METHODS)
def test_free_fall_event_times_equal_scipys_and_the_closed_form(method):
    h0, v0, g = 10.0, 3.0, 9.81
    ours = solve_ivp(
        fall, (0.0, 10.0), arr([h0, v0]), method=method, events=[apex, halfway, ground], args=(g,)
    )
    ref = scipy_integrate.solve_ivp(
        np_fall, (0.0, 10.0), [h0, v0], method=method, events=[apex, halfway, ground], args=(g,)
    )
    assert ours.status == ref.status == 1 and ours.message == ref.message
    exact = [
        v0 / g,
        (v0 + math.sqrt(v0**2 + 2 * g * (h0 - 5.0))) / g,
        (v0 + math.sqrt(v0**2 + 2 * g * h0)) / g,
    ]
    for i in range(3):
        te = to_numpy(ours.t_events[i])
        assert te.shape == ref.t_events[i].shape == (1,)
        np.testing.assert_allclose(te, ref.t_events[i], rtol=0, atol=1e-12)
        np.testing.assert_allclose(te, [exact[i]], rtol=0, atol=1e-12)  # the interpolant is exact: quadratic
        np.testing.assert_allclose(to_numpy(ours.y_events[i]), ref.y_events[i], rtol=0, atol=1e-11)
    # the solve stops at the terminal event's zero
    np.testing.assert_allclose(to_numpy(ours.t)[-1], exact[2], rtol=0, atol=1e-12)
    np.testing.assert_allclose(to_numpy(ours.y)[0, -1], 0.0, atol=1e-11)


def swing(t, y):  # sign changes at multiples of pi / 3
    return xp.sin(3 * t) * y[0]


def np_swing(t, y):
    return np.sin(3 * t) * y[0]


def slow_cos(t, y):
    return xp.cos(3 * t)


def np_slow_cos(t, y):
    return np.cos(3 * t)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("t_span", [(0.5, 10.0), (10.0, 0.5)])
@pytest.mark.parametrize("terminal", [False, 3])
def test_events_terminal_counts_and_directions_equal_scipys(method, t_span, terminal):
    swing.terminal = np_swing.terminal = terminal
    slow_cos.direction = np_slow_cos.direction = 1.0
    t_eval = np.linspace(*t_span, 12)
    opts = dict(method=method, rtol=1e-8, atol=1e-10)
    ours = solve_ivp(
        lambda t, y: -0.1 * y, t_span, arr([1.0]), events=[swing, slow_cos], t_eval=arr(t_eval), **opts
    )
    ref = scipy_integrate.solve_ivp(lambda t, y: -0.1 * y, t_span, [1.0], events=[np_swing, np_slow_cos],
                                    t_eval=t_eval, **opts)  # fmt: skip
    assert ours.status == ref.status
    for i in range(2):
        np.testing.assert_allclose(to_numpy(ours.t_events[i]), ref.t_events[i], rtol=0, atol=1e-9)
        np.testing.assert_allclose(to_numpy(ours.y_events[i]), ref.y_events[i], rtol=0, atol=1e-9)
    np.testing.assert_allclose(to_numpy(ours.t), ref.t, rtol=0, atol=1e-12)  # t_eval up to the stop
    np.testing.assert_allclose(to_numpy(ours.y), ref.y, rtol=0, atol=1e-8)
    np.testing.assert_allclose(to_numpy(ours.t_events[0]) * 3 / math.pi % 1, 0.0, atol=1e-7)


def test_several_events_in_one_step_stop_at_the_first_in_time():
    def early(t, y):
        return t - 0.3

    def late(t, y):
        return t - 0.6

    early.terminal = late.terminal = True
    # one step covers (0, 1): both zeros lie in it; the later event is listed first
    ours = solve_ivp(lambda t, y: 0.0 * y, (0.0, 1.0), arr([1.0]), events=[late, early], first_step=1.0)
    assert ours.t.shape == (2,)
    assert to_numpy(ours.t_events[0]).shape == (0,)
    np.testing.assert_allclose(to_numpy(ours.t_events[1]), [0.3], atol=1e-15)
    np.testing.assert_allclose(to_numpy(ours.t)[-1], 0.3, atol=1e-15)


def test_bad_events_name_the_argument():
    def g(t, y):
        return y[0]

    with pytest.raises(TypeError, match=r"events\[1\] must be callable"):
        solve_ivp(lambda t, y: -y, (0.0, 1.0), arr([1.0]), events=[g, 3.0])
    g.terminal = -2
    with pytest.raises(ValueError, match=r"events\[0\].terminal must be a boolean or a positive integer"):
        solve_ivp(lambda t, y: -y, (0.0, 1.0), arr([1.0]), events=g)
    g.terminal, g.direction = True, "up"
    with pytest.raises(ValueError, match=r"events\[0\].direction must be a number"):
        solve_ivp(lambda t, y: -y, (0.0, 1.0), arr([1.0]), events=g)


# ------------------------------------------------------------------------------ under transforms


def impact(method, h, g):
    """``(t*, v*)``: the time and velocity at which a ball dropped from ``h`` (at rest) hits the ground."""
    sol = solve_ivp(fall, (0.0, 10.0), xp.stack([h, 0.0 * h]), method=method, events=ground, args=(g,))
    return sol.t_events[0][0], sol.y[1, -1], sol.t[-1]


@pytest.mark.parametrize("method", METHODS)
def test_free_fall_event_time_derivatives_equal_the_closed_form(method):
    h, g = 10.0, 9.81
    t_star = math.sqrt(2 * h / g)
    dt_dh, dt_dg = 1 / math.sqrt(2 * g * h), -math.sqrt(2 * h) / (2 * g**1.5)
    dv_dh, dv_dg = -g / math.sqrt(2 * g * h), -h / math.sqrt(2 * g * h)  # v* = -sqrt(2 g h)
    ref = scipy_integrate.solve_ivp(np_fall, (0.0, 10.0), [h, 0.0], method=method, events=ground, args=(g,))
    t_events = impact(method, arr(h), arr(g))[0]
    np.testing.assert_allclose(to_numpy(t_events), ref.t_events[0][0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(to_numpy(t_events), t_star, rtol=0, atol=1e-12)
    # the event time, the final state (through the event time), the final time (one for DOP853 and Radau)
    for k in range(3) if method == "RK45" else (1,):
        grads = pa.grad(lambda h, g, k=k: impact(method, h, g)[k], argnums=(0, 1))(arr(h), arr(g))
        expected = (dv_dh, dv_dg) if k == 1 else (dt_dh, dt_dg)
        np.testing.assert_allclose([float(to_numpy(d)) for d in grads], expected, rtol=0, atol=1e-8)
    tangent = pa.jvp(lambda h: impact(method, h, arr(g))[0], (arr(h),), (arr(1.0),))[1]
    np.testing.assert_allclose(to_numpy(tangent), dt_dh, rtol=0, atol=1e-8)


def test_free_fall_under_vmap_each_example_stops_at_its_own_time():
    heights, g = np.array([1.0, 5.0, 10.0, 20.0]), 9.81
    t_star, v_star, t_end = pa.vmap(lambda h: impact("RK45", h, arr(g)))(arr(heights))
    np.testing.assert_allclose(to_numpy(t_star), np.sqrt(2 * heights / g), rtol=0, atol=1e-12)
    np.testing.assert_allclose(to_numpy(t_end), np.sqrt(2 * heights / g), rtol=0, atol=1e-12)
    np.testing.assert_allclose(to_numpy(v_star), -np.sqrt(2 * g * heights), rtol=0, atol=1e-11)
    grads = pa.vmap(pa.grad(lambda h: impact("RK45", h, arr(g))[0]))(arr(heights))
    np.testing.assert_allclose(to_numpy(grads), 1 / np.sqrt(2 * g * heights), rtol=0, atol=1e-8)


def pendulum(t, y, k):
    return xp.stack([y[1], -k * xp.sin(y[0])])


def np_pendulum(t, y, k):
    return np.array([y[1], -k * np.sin(y[0])])


def crossing(t, y, k):  # the pendulum passing the vertical
    return y[0]


def np_crossing(t, y, k):
    return y[0]


crossing.capacity = 4


@pytest.mark.parametrize("method", ["RK45", pytest.param("DOP853", marks=pytest.mark.slow)])
def test_non_terminal_event_times_under_grad_equal_central_differences_of_scipys(method):
    opts = dict(method=method, rtol=1e-8, atol=1e-10)

    def times(k):
        return solve_ivp(pendulum, (0.0, 7.0), arr([1.0, 0.0]), events=crossing, args=(k,), **opts).t_events[
            0
        ]

    def np_times(k):
        return scipy_integrate.solve_ivp(
            np_pendulum, (0.0, 7.0), [1.0, 0.0], events=np_crossing, args=(k,), **opts
        ).t_events[0]

    k, eps = 2.0, 1e-6
    ref = np_times(k)
    np.testing.assert_allclose(to_numpy(times(arr(k))), ref, rtol=0, atol=1e-9)  # as SciPy outside transforms
    traced, jac = pa.jvp(times, (arr(k),), (arr(1.0),))
    traced, jac = to_numpy(traced), to_numpy(jac)
    assert len(ref) == 3 and traced.shape == (4,) and np.isnan(traced[3])  # three zeros in four slots
    np.testing.assert_allclose(traced[:3], ref, rtol=0, atol=1e-9)
    central = (np_times(k + eps) - np_times(k - eps)) / (2 * eps)
    np.testing.assert_allclose(jac[:3], central, rtol=1e-5)
    weights = arr([1.0, -2.0, 0.5, 0.0])
    grad = pa.grad(lambda k: xp.sum(xp.where(xp.isnan(times(k)), 0.0, times(k)) * weights))(arr(k))
    np.testing.assert_allclose(to_numpy(grad), central @ np.array([1.0, -2.0, 0.5]), rtol=1e-5)


def test_events_under_a_transform_need_a_fixed_shape():
    def g(t, y):
        return y[0] - 0.5

    with pytest.raises(NotImplementedError, match="capacity"):
        pa.grad(lambda y0: solve_ivp(lambda t, y: -y, (0.0, 1.0), y0, events=g).y[0, -1])(arr([1.0]))
    g.terminal = True
    with pytest.raises(NotImplementedError, match="sensitivity='discrete'"):
        pa.grad(
            lambda y0: solve_ivp(lambda t, y: -y, (0.0, 1.0), y0, events=g, sensitivity="forward").y[0, -1]
        )(arr([1.0]))


def test_event_time_under_jit_and_hessian_and_t_eval_beyond_the_stop():
    h, g = 10.0, 9.81

    def t_star(h):
        return impact("RK45", h, arr(g))[0]

    np.testing.assert_allclose(to_numpy(pa.jit(t_star)(arr(h))), math.sqrt(2 * h / g), rtol=0, atol=1e-12)
    grad = pa.jit(pa.grad(t_star))(arr(h))
    np.testing.assert_allclose(to_numpy(grad), 1 / math.sqrt(2 * g * h), rtol=0, atol=1e-10)
    second = pa.hessian(t_star)(arr(h))  # d2 sqrt(2h/g) / dh2
    np.testing.assert_allclose(to_numpy(second), -0.25 * math.sqrt(2 / g) * h**-1.5, rtol=1e-8)

    times = np.linspace(0.0, 3.0, 7)  # the ball lands at 1.43: the last four points lie beyond the stop

    def heights(h):
        sol = solve_ivp(
            fall, (0.0, 10.0), xp.stack([h, 0.0 * h]), events=ground, args=(arr(g),), t_eval=arr(times)
        )
        return sol.y[0, :]

    eager = to_numpy(heights(arr(h)))
    np.testing.assert_allclose(eager, h - g * times[:3] ** 2 / 2, rtol=0, atol=1e-12)  # SciPy's: up to t*
    traced, tangent = pa.jvp(heights, (arr(h),), (arr(1.0),))
    np.testing.assert_allclose(to_numpy(traced)[:3], eager, rtol=0, atol=1e-12)
    assert np.all(np.isnan(to_numpy(traced)[3:]))  # a fixed shape: nan beyond the stop
    np.testing.assert_allclose(to_numpy(tangent)[:3], 1.0, atol=1e-12)
