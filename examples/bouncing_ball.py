"""Fitting a bouncing ball's restitution coefficient to its bounce times, through differentiated events.

A ball dropped from 10 m falls with linear air drag, ``y'' = -g - c y'``; at each impact (the event
``y = 0``, terminal, downwards) its velocity is reversed and scaled by the restitution coefficient ``e``.
The times of the first five impacts are observed with 5 ms of noise, simulated from ``(e, c) = (0.8,
0.15)``. Each impact time is a zero located on ``solve_ivp``'s interpolant and differentiated by the
implicit function theorem (``dt*/dθ = -(∂g/∂θ)/(dg/dt)``, through ``pa.custom_root``), and the state after
it carries the derivative through the impact time, so the chain of five solves gives ``pa.grad`` of the
misfit with respect to ``(e, c)``; ``scipy.optimize.minimize(method="L-BFGS-B", jac=...)`` fits both.

Checks: the impact times against SciPy's ``solve_ivp`` with the same event (1e-8), the gradient at the
start against central differences of SciPy's impact times, the fit's misfit no larger than the truth's,
and the estimate within 5 % of the truth.
"""

import numpy as np
import scipy.integrate
import scipy.optimize
from _gallery import output_dir, pyplot, save

import polyad as pa
from polyad import xp
from polyad.integrate import solve_ivp

G, H0, BOUNCES = 9.81, 10.0, 5
TRUE = np.array([0.8, 0.15])  # restitution e, drag c
TOL = dict(rtol=1e-8, atol=1e-8)


def falling(t, y, c):  # height, velocity
    return xp.stack([y[1], -G - c * y[1]])


def ground(t, y, c):
    return y[0]


ground.terminal, ground.direction = True, -1


def impact_times(p, trace=False):
    """The times of the first impacts for ``p = (e, c)`` (and the path, with ``trace``)."""
    e, c = p[0], p[1]
    y, t, times, path = xp.stack([H0 + 0.0 * e, 0.0 * e]), 0.0 * e, [], []
    for _ in range(BOUNCES):
        sol = solve_ivp(falling, (t, t + 30.0), y, events=ground, args=(c,), dense_output=trace, **TOL)
        t = sol.t_events[0][0]
        times.append(t)
        if trace:
            path.append((sol.sol, float(sol.t[0]), float(t)))
        y = xp.stack([0.0 * t, -e * sol.y[1, -1]])  # on the ground, bouncing back up
    return (xp.stack(times), path) if trace else xp.stack(times)


def scipy_impact_times(p):
    """The same chain with SciPy's ``solve_ivp`` and its events (the reference)."""
    e, c = p
    y, t, times = [H0, 0.0], 0.0, []
    for _ in range(BOUNCES):
        sol = scipy.integrate.solve_ivp(
            lambda t, y: [y[1], -G - c * y[1]], (t, t + 30.0), y, events=_scipy_ground, **TOL
        )
        t = sol.t_events[0][0]
        times.append(t)
        y = [0.0, -e * sol.y_events[0][0][1]]
    return np.array(times)


def _scipy_ground(t, y):
    return y[0]


_scipy_ground.terminal, _scipy_ground.direction = True, -1


def main():
    folder = output_dir(__doc__.splitlines()[0])
    rng = np.random.default_rng(7)
    observed = scipy_impact_times(TRUE) + rng.normal(scale=0.005, size=BOUNCES)
    np.testing.assert_allclose(np.asarray(impact_times(TRUE)), scipy_impact_times(TRUE), rtol=0, atol=1e-8)

    def misfit(p):
        return xp.sum((impact_times(p) - observed) ** 2)

    def scipy_misfit(p):
        return float(np.sum((scipy_impact_times(p) - observed) ** 2))

    gradient = pa.grad(misfit)
    start = np.array([0.6, 0.05])
    eps = 1e-6
    central = [(scipy_misfit(start + eps * d) - scipy_misfit(start - eps * d)) / (2 * eps) for d in np.eye(2)]
    np.testing.assert_allclose(np.asarray(gradient(start)), central, rtol=1e-5)

    calls = [0]

    def jac(p):
        calls[0] += 1
        return np.asarray(gradient(p))

    bounds = [(0.3, 0.95), (0.0, 0.5)]  # the ball keeps bouncing, the drag stays physical
    fit = scipy.optimize.minimize(
        lambda p: float(misfit(p)), start, jac=jac, method="L-BFGS-B", bounds=bounds
    )
    assert fit.success, fit.message
    print(f"estimate e = {fit.x[0]:.4f}, c = {fit.x[1]:.4f} (truth {TRUE}); {calls[0]} gradients")
    assert fit.fun <= float(misfit(TRUE)) + 1e-12, "the fit is worse than the true parameters"
    assert np.all(np.abs(fit.x - TRUE) < 0.05 * TRUE), fit.x

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 3.4))
    for p, style, name in ((TRUE, "--", "true (e, c)"), (fit.x, "-", "fit")):
        times, path = impact_times(p, trace=True)
        for k, (sol, a, b) in enumerate(path):
            ts = np.linspace(a, b, 80)
            ax.plot(ts, np.asarray(sol(ts))[0], style, color="C0" if style == "-" else "0.4", lw=1.2,
                    label=name if k == 0 else None)  # fmt: skip
    ax.plot(observed, np.zeros(BOUNCES), "v", color="C3", label="observed impacts")
    ax.set(xlabel="t (s)", ylabel="height (m)", title="Bouncing ball: restitution fitted to impact times")
    ax.legend(fontsize=8)
    save(fig, folder, "bouncing_ball.png")


if __name__ == "__main__":
    main()
