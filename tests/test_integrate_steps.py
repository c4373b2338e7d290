"""``solve_ivp``'s explicit methods take SciPy's steps to the last bit outside transforms (issue 36): the
error norm rounded as SciPy's ``norm`` (the root of a dot product, then divided by ``sqrt(n)``) and the
step factor's power as NumPy's scalar power (the C library's ``pow``). Each had put step times ulps apart
(a harmonic oscillator: 4e-13 at rtol 1e-6; Lotka-Volterra: 1e-12), drifting with the steps."""

import numpy as np
import pytest
from helpers import to_numpy

import polyad as pa
from polyad.integrate import solve_ivp

scipy_integrate = pytest.importorskip("scipy.integrate")

xp = pa.xp


def oscillator(t, y):
    return xp.stack([y[1], -y[0]])


def lotka_volterra(t, y):
    return xp.stack([1.5 * y[0] - y[0] * y[1], -3.0 * y[1] + y[0] * y[1]])


PROBLEMS = {
    "oscillator": (oscillator, lambda t, y: np.array([y[1], -y[0]]), [1.0, 0.0], 20.0),
    "lotka_volterra": (
        lotka_volterra,
        lambda t, y: np.array([1.5 * y[0] - y[0] * y[1], -3.0 * y[1] + y[0] * y[1]]),
        [10.0, 5.0],
        10.0,
    ),
}


@pytest.mark.parametrize("problem", sorted(PROBLEMS))
@pytest.mark.parametrize("method", ["RK45", "DOP853"])
@pytest.mark.parametrize("rtol", [1e-3, 1e-6, 1e-9])
def test_explicit_steps_are_scipys_to_the_last_bit(problem, method, rtol):
    fun, np_fun, y0, t1 = PROBLEMS[problem]
    ours = solve_ivp(fun, (0.0, t1), xp.asarray(y0, dtype=xp.float64), method, rtol=rtol, atol=1e-9)
    ref = scipy_integrate.solve_ivp(np_fun, (0.0, t1), y0, method, rtol=rtol, atol=1e-9)
    t, y = to_numpy(ours.t), to_numpy(ours.y)
    assert t.shape == ref.t.shape and ours.nfev == ref.nfev
    if pa.get_backend() == "numpy":  # the eager attempt on NumPy sums its stages as SciPy's np.dot
        np.testing.assert_array_equal(t, ref.t)
        np.testing.assert_array_equal(y, ref.y)
    else:  # other namespaces sum the stages by additions: the same steps to rounding, which drifts
        np.testing.assert_allclose(t, ref.t, rtol=1e-6)
