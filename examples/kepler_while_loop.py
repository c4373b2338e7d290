"""A data-dependent loop under ``grad`` and ``vmap``: Kepler's equation by Newton in ``pa.while_loop``.

Kepler's equation ``E - e sin E = M`` gives a planet's eccentric anomaly ``E`` from its mean anomaly
``M``; it has no closed form, so ``E`` comes from Newton's iteration until the residual is below a
tolerance: a loop whose number of steps depends on the data. ``pa.while_loop`` runs it as one op:
``pa.vmap`` evaluates a whole orbit at once, each point stopping at its own step, and ``pa.grad`` (here
under ``vmap``) differentiates through the iterations.

Checks: ``E`` against SciPy's root finder; ``dE/dM`` and ``dE/de`` against the implicit function theorem
(``dE/dM = 1 / (1 - e cos E)``, ``dE/de = sin E / (1 - e cos E)``); the steps each point took against a
Python loop; ``dE/dM`` against ``grad`` of that loop. ``grad`` differentiates the iterations that ran:
after one Newton step or more that is the solution's derivative to the tolerance, but a loop that ran no
step (its first guess exact, as at ``M = 0`` and ``M = pi``) gives the guess's derivative, so the loop
takes at least one step.
"""

import numpy as np
from _gallery import output_dir, pyplot, save
from scipy.optimize import brentq

import polyad as pa
from polyad import xp

TOL = 1e-13


def eccentric_anomaly(M, e):
    def keep_going(state):
        E, steps = state
        return (steps == 0) | (xp.abs(E - e * xp.sin(E) - M) > TOL)  # at least one step: see below

    def newton(state):
        E, steps = state
        return E - (E - e * xp.sin(E) - M) / (1 - e * xp.cos(E)), steps + 1

    E, steps = pa.while_loop(keep_going, newton, (M + e * xp.sin(M), xp.asarray(0)))
    return E, steps


def steps_by_python_loop(M, e):
    E, steps = M + e * np.sin(M), 0
    while steps == 0 or abs(E - e * np.sin(E) - M) > TOL:
        E, steps = E - (E - e * np.sin(E) - M) / (1 - e * np.cos(E)), steps + 1
    return steps


def main():
    folder = output_dir(__doc__.splitlines()[0])
    e = np.float64(0.8)
    M = np.linspace(0.0, 2 * np.pi, 201)
    E, steps = pa.vmap(eccentric_anomaly, in_dims=(0, None))(M, e)
    E_only = lambda M, e: eccentric_anomaly(M, e)[0]  # noqa: E731
    dE_dM = pa.vmap(pa.grad(E_only, argnums=0), in_dims=(0, None))(M, e)
    dE_de = pa.vmap(pa.grad(E_only, argnums=1), in_dims=(0, None))(M, e)

    reference = np.array([brentq(lambda E, m=m: E - e * np.sin(E) - m, 0, 2 * np.pi, xtol=1e-15) for m in M])
    assert np.allclose(E, reference, rtol=0, atol=1e-12), np.max(np.abs(E - reference))
    denominator = 1 - e * np.cos(reference)
    assert np.allclose(dE_dM, 1 / denominator, rtol=1e-9), np.max(np.abs(dE_dM - 1 / denominator))
    assert np.allclose(dE_de, np.sin(reference) / denominator, rtol=1e-9, atol=1e-12)

    def by_python_loop(M):  # the same iterations unrolled by Python, for grad to differentiate
        E, steps = M + e * xp.sin(M), 0
        while steps == 0 or float(xp.abs(E - e * xp.sin(E) - M)) > TOL:
            E, steps = E - (E - e * xp.sin(E) - M) / (1 - e * xp.cos(E)), steps + 1
        return E

    unrolled = np.array([float(pa.grad(by_python_loop)(m)) for m in M[::10]])
    assert np.allclose(dE_dM[::10], unrolled, rtol=1e-12), np.max(np.abs(dE_dM[::10] - unrolled))
    python_steps = [steps_by_python_loop(m, e) for m in M]
    assert np.array_equal(steps, python_steps), "vmap should stop each point at its own step"
    print(f"{len(M)} points, Newton steps per point from {int(np.min(steps))} to {int(np.max(steps))}; "
          f"max |dE/dM - 1/(1 - e cos E)| = {np.max(np.abs(dE_dM - 1 / denominator)):.1e}")  # fmt: skip

    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    left.plot(M, E, "C0", label="E(M)")
    left.plot(M, dE_dM, "C1", label="dE/dM (pa.grad through the loop)")
    left.plot(M, 1 / denominator, ":k", label="1 / (1 - e cos E)")
    left.set(xlabel="mean anomaly M", title=f"Kepler's equation, e = {float(e)}")
    left.legend()
    right.bar(M, steps, width=M[1] - M[0], color="C2")
    right.set(xlabel="mean anomaly M", ylabel="Newton steps", title="Steps each point took under pa.vmap")
    save(fig, folder, "kepler_while_loop.png")


if __name__ == "__main__":
    main()
