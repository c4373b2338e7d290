"""Fitting the four Lotka–Volterra parameters to noisy data, with gradients through the ODE solver.

Prey ``x`` and predators ``y``: ``x' = a x - b x y``, ``y' = -c y + d x y``. Noisy observations of both
populations at 31 times are simulated from ``(a, b, c, d) = (1, 0.1, 1.5, 0.075)``; the fit minimises the
sum of squared residuals with ``scipy.optimize.minimize(method="L-BFGS-B", jac=pa.grad(loss))``, where
``loss`` calls ``polyad.integrate.solve_ivp`` (RK45): the gradient is reverse mode through the steps.

Checks: the gradient at the starting point against central differences, the fit's residual no larger
than the true parameters' (it is the least-squares estimate), the estimate within 5 % of the truth,
and polyad's trajectory at the estimate against ``scipy.integrate.solve_ivp``'s.
"""

import numpy as np
import scipy.integrate
import scipy.optimize
from _gallery import output_dir, pyplot, save

import polyad as pa
from polyad import xp
from polyad.integrate import solve_ivp

TRUE = np.array([1.0, 0.1, 1.5, 0.075])
Y0 = np.array([10.0, 5.0])
T_OBS = np.linspace(0.0, 15.0, 31)
TOL = dict(rtol=1e-6, atol=1e-6)


def lotka_volterra(t, y, p):
    return xp.stack([p[0] * y[0] - p[1] * y[0] * y[1], -p[2] * y[1] + p[3] * y[0] * y[1]])


def trajectory(p, t_eval=T_OBS, tol=TOL):
    return solve_ivp(lotka_volterra, (0.0, float(t_eval[-1])), Y0, t_eval=t_eval, args=(p,), **tol).y


def main():
    folder = output_dir(__doc__.splitlines()[0])
    rng = np.random.default_rng(3)
    data = trajectory(TRUE) + rng.normal(scale=0.5, size=(2, T_OBS.size))

    def loss(p, tol=TOL):
        return xp.sum((trajectory(p, tol=tol) - data) ** 2)

    gradient = pa.grad(loss)
    start = np.array([0.8, 0.12, 1.2, 0.06])
    # the gradient is that of the numerical solution on its grid of steps; central differences also see
    # the step sizes change: compare at a tight tolerance, where both are the exact gradient's
    tight = dict(rtol=1e-10, atol=1e-10)
    eps = 1e-6
    fd = [
        (float(loss(start + eps * e, tight)) - float(loss(start - eps * e, tight))) / (2 * eps)
        for e in np.eye(4)
    ]
    assert np.allclose(gradient(start, tight), fd, rtol=1e-6), (gradient(start, tight), fd)

    calls = [0]

    def jac(p):
        calls[0] += 1
        return np.asarray(gradient(p))

    fit = scipy.optimize.minimize(lambda p: float(loss(p)), start, jac=jac, method="L-BFGS-B",
                                  bounds=[(1e-3, None)] * 4)  # fmt: skip
    assert fit.success, fit.message
    print(f"estimate {np.round(fit.x, 4)} (truth {TRUE}); {fit.nit} iterations, {calls[0]} gradients")
    assert fit.fun <= float(loss(TRUE)) + 1e-9, "the fit is worse than the true parameters"
    assert np.all(np.abs(fit.x - TRUE) < 0.05 * TRUE), fit.x
    fine = np.linspace(0.0, 15.0, 301)
    ours = np.asarray(trajectory(fit.x, fine))
    ref = scipy.integrate.solve_ivp(lambda t, y: np.asarray(lotka_volterra(t, y, fit.x)), (0.0, 15.0), Y0,
                                    t_eval=fine, **TOL).y  # fmt: skip
    assert np.allclose(ours, ref, rtol=1e-6, atol=1e-6)

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 3.8))
    truth = np.asarray(trajectory(TRUE, fine))
    for k, name in enumerate(("prey", "predators")):
        ax.plot(T_OBS, data[k], "o", color=f"C{k}", ms=4, label=f"{name}: data")
        ax.plot(fine, ours[k], color=f"C{k}", label=f"{name}: fit")
        ax.plot(fine, truth[k], "--", color="0.4", lw=1)
    ax.set(xlabel="t", ylabel="population", title="Lotka–Volterra fit (dashed: true parameters)")
    ax.legend(ncol=4, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.15))
    save(fig, folder, "lotka_volterra_fit.png")


if __name__ == "__main__":
    main()
