"""Reference ODE problems shared by the tests and the benchmarks, written once: the right-hand side in
the array namespace (for polyad) and in NumPy (for SciPy), with the analytic Jacobian.

Example:
    >>> from polyad.testing.ode_problems import ROBERTSON_RATES, robertson_numpy
    >>> robertson_numpy(0.0, [1.0, 0.0, 0.0], ROBERTSON_RATES).tolist()
    [-0.04, 0.04, 0.0]
"""

import polyad as pa
from polyad.backends.host import np

# Robertson's stiff chemical kinetics (Hairer & Wanner, Solving ODEs II, section IV.1): the rate constants
ROBERTSON_RATES = (0.04, 1e4, 3e7)


def robertson(t, y, p):
    """Robertson's right-hand side on polyad arrays: ``y`` the three concentrations, ``p`` the rates."""
    xp = pa.xp
    return xp.stack([
        -p[0] * y[0] + p[1] * y[1] * y[2],
        p[0] * y[0] - p[1] * y[1] * y[2] - p[2] * y[1] ** 2,
        p[2] * y[1] ** 2,
    ])  # fmt: skip


def robertson_numpy(t, y, p):
    """Robertson's right-hand side in NumPy (for SciPy's ``solve_ivp``)."""
    return np.array([-p[0] * y[0] + p[1] * y[1] * y[2], p[0] * y[0] - p[1] * y[1] * y[2] - p[2] * y[1] ** 2,
                     p[2] * y[1] ** 2])  # fmt: skip


def robertson_jacobian_numpy(t, y, p):
    """The analytic Jacobian of ``robertson`` with respect to ``y``, in NumPy (host arrays)."""
    y, p = np.asarray(y), np.asarray(p)
    return np.array([
        [-p[0], p[1] * y[2], p[1] * y[1]],
        [p[0], -p[1] * y[2] - 2 * p[2] * y[1], -p[1] * y[1]],
        [0.0, 2 * p[2] * y[1], 0.0],
    ])  # fmt: skip
