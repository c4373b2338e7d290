"""The sensitivities of Robertson's stiff kinetics to its three rate constants, through a stiff solver.

``y1' = -p1 y1 + p2 y2 y3``, ``y2' = p1 y1 - p2 y2 y3 - p3 y2^2``, ``y3' = p3 y2^2`` with
``p = (0.04, 1e4, 3e7)``, solved by ``polyad.integrate.solve_ivp(method="Radau")`` (Radau IIA, its Newton
Jacobians from ``pa.jacfwd``, its Newton solves differentiated implicitly). ``pa.jacfwd`` of the solution
at 40 times from 1e-5 to 1e5 gives every ``dy_i(t)/dp_j`` at once (forward mode through the steps).

Checks: the sensitivities at ``t = 0.4`` against those CVODES publishes for this problem (its example
cvsRoberts_FSA_dns, at rtol 1e-4): ``dy/dp1 = (-3.5595e-01, 3.9025e-04, 3.5556e-01)``; reverse mode
(``pa.jacrev``) against forward mode at t = 0.4; the sensitivities of ``y1 + y2 + y3`` (conserved, equal
to 1) are 0. The figure shows the normalised sensitivities ``p_j dy_i/dp_j``.
"""

import numpy as np
from _gallery import output_dir, pyplot, save

import polyad as pa
from polyad import xp
from polyad.integrate import solve_ivp

P = np.array([0.04, 1e4, 3e7])
TIMES = np.concatenate([[0.4], np.logspace(-5, 5, 40)])
CVODES = np.array([-3.5595e-01, 3.9025e-04, 3.5556e-01])  # dy/dp1 at t = 0.4


def robertson(t, y, p):
    r1, r2, r3 = p[0] * y[0], p[1] * y[1] * y[2], p[2] * y[1] ** 2
    return xp.stack([-r1 + r2, r1 - r2 - r3, r3])


def concentrations(p, times):
    order = np.argsort(times)
    sol = solve_ivp(robertson, (0.0, float(times[order[-1]])), np.array([1.0, 0.0, 0.0]), "Radau",
                    times[order], args=(p,), rtol=1e-6, atol=1e-10)  # fmt: skip
    assert sol.success
    return sol.y[:, np.argsort(order)]


def main():
    folder = output_dir(__doc__.splitlines()[0])
    S = np.asarray(pa.jacfwd(concentrations)(P, TIMES))  # (3 species, times, 3 parameters)
    print("dy/dp1 at t = 0.4:", S[:, 0, 0], "CVODES:", CVODES)
    assert np.allclose(S[:, 0, 0], CVODES, rtol=1e-4), S[:, 0, 0]
    at_04 = np.asarray(pa.jacrev(lambda p: concentrations(p, TIMES)[:, 0])(P))  # the same solution
    assert np.allclose(at_04, S[:, 0, :], rtol=1e-8), (at_04, S[:, 0, :])
    total = S.sum(axis=0)  # d(y1 + y2 + y3)/dp: zero, relative to each parameter's scale
    assert np.all(np.abs(total) <= 1e-6 * np.abs(S).max(axis=(0, 1))), np.abs(total).max(axis=0)

    plt = pyplot()
    t = TIMES[1:]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4), sharex=True)
    for i, ax in enumerate(axes):
        for j in range(3):
            ax.semilogx(t, P[j] * S[i, 1:, j], f"C{j}", label=f"p{j + 1}")
        ax.axhline(0.0, color="0.8", lw=0.8)
        ax.set(xlabel="t", title=f"p_j dy{i + 1}/dp_j")
    axes[0].legend()
    fig.suptitle("Robertson: normalised sensitivities (Radau, pa.jacfwd through the solver)", y=1.03)
    save(fig, folder, "robertson_sensitivities.png")


if __name__ == "__main__":
    main()
