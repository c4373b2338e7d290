"""The periodic heat equation ``u_t = D u_xx`` on [0, 1), ``u0 = sin(2 pi x)``, central differences in
space and fixed-step RK4 in time, written as a user would (``roll`` for the stencil, ``pa.fori_loop``
for the steps): ``u(T)`` and ``dL/dD`` for ``L = 0.5 |u(T)|^2`` against closed forms, eagerly and under
``pa.jit``, and the compiled values equal to the eager ones to 1e-13.

Two independent references. ``sin(2 pi x)`` is an eigenvector of the periodic second-difference matrix,
with eigenvalue ``lam = -(4 / dx^2) sin^2(pi dx)``, and one RK4 step multiplies it by
``R(z) = 1 + z + z^2/2 + z^3/6 + z^4/24``, ``z = dt D lam``. So the discrete solution is exactly
``R(z)^N sin(2 pi x)``, and ``L = 0.5 R^(2N) S`` with ``S = sum sin^2`` gives
``dL/dD = N R^(2N - 1) R'(z) dt lam S``: the scheme's values to rounding. The continuous solution
``exp(-4 pi^2 D T) sin(2 pi x)`` agrees with them to the scheme's truncation error, O(dx^2) in space
(and O(dt^4) in time, far smaller here).
"""

import math

import numpy as np
from helpers import to_numpy

import polyad as pa

xp = pa.xp
N_POINTS, STEPS, T = 64, 100, 1.0
DX, DT = 1.0 / N_POINTS, T / STEPS


def laplacian(u):
    return (xp.roll(u, 1) - 2.0 * u + xp.roll(u, -1)) / DX**2


def heat(diffusivity):
    """u(T) by RK4 from sin(2 pi x)."""
    x = xp.arange(N_POINTS, dtype=xp.float64) * DX
    u0 = xp.sin(2 * math.pi * x)

    def step(i, u):
        k1 = diffusivity * laplacian(u)
        k2 = diffusivity * laplacian(u + 0.5 * DT * k1)
        k3 = diffusivity * laplacian(u + 0.5 * DT * k2)
        k4 = diffusivity * laplacian(u + DT * k3)
        return u + DT / 6 * (k1 + 2 * k2 + 2 * k3 + k4)

    return pa.fori_loop(0, STEPS, step, u0)


def loss(diffusivity):
    u = heat(diffusivity)
    return 0.5 * xp.sum(u * u)


def discrete_reference(d):
    """u(T), L and dL/dD of the scheme, from its amplification factor."""
    lam = -(4 / DX**2) * math.sin(math.pi * DX) ** 2
    z = DT * d * lam
    r = 1 + z + z**2 / 2 + z**3 / 6 + z**4 / 24
    dr = 1 + z + z**2 / 2 + z**3 / 6
    sines = np.sin(2 * np.pi * np.arange(N_POINTS) * DX)
    s = float(np.sum(sines**2))
    return r**STEPS * sines, 0.5 * r ** (2 * STEPS) * s, STEPS * r ** (2 * STEPS - 1) * dr * DT * lam * s


def test_heat_equation_against_the_closed_forms_eager_and_compiled():
    d = 0.01
    diffusivity = xp.asarray(d, dtype=xp.float64)
    u_scheme, l_scheme, dl_scheme = discrete_reference(d)
    sines = np.sin(2 * np.pi * np.arange(N_POINTS) * DX)
    u_exact = math.exp(-4 * math.pi**2 * d * T) * sines
    dl_exact = -8 * math.pi**2 * T * 0.5 * math.exp(-8 * math.pi**2 * d * T) * float(np.sum(sines**2))

    u_eager = to_numpy(heat(diffusivity))
    dl_eager = float(to_numpy(pa.grad(loss)(diffusivity)))
    np.testing.assert_allclose(u_eager, u_scheme, rtol=0, atol=1e-13)
    np.testing.assert_allclose(float(to_numpy(loss(diffusivity))), l_scheme, rtol=1e-13)
    np.testing.assert_allclose(dl_eager, dl_scheme, rtol=1e-12)
    # the continuous solution, to the truncation error: lam differs from -(2 pi)^2 by (2 pi dx)^2 / 12
    truncation = (2 * math.pi * DX) ** 2 / 12 * 4 * math.pi**2 * d * T
    np.testing.assert_allclose(u_eager, u_exact, rtol=0, atol=2 * truncation)
    np.testing.assert_allclose(dl_eager, dl_exact, rtol=4 * truncation)
    assert abs(dl_eager - dl_exact) > 1e-3 * truncation * abs(dl_exact)  # the discretisation is visible

    u_jit = to_numpy(pa.jit(heat)(diffusivity))
    dl_jit = float(to_numpy(pa.jit(pa.grad(loss))(diffusivity)))
    np.testing.assert_allclose(u_jit, u_eager, rtol=0, atol=1e-13)
    np.testing.assert_allclose(dl_jit, dl_eager, rtol=1e-13)
