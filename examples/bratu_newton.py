"""Newton's method on the 1-D Bratu problem, with the Jacobian from ``pa.jacfwd``.

The Bratu problem ``-u'' = λ exp(u)`` on (0, 1) with ``u(0) = u(1) = 0`` has, for λ below about 3.51, a
lower solution in closed form: ``u(x) = -2 log(cosh((x - 1/2) θ/2) / cosh(θ/4))`` where θ solves
``θ = sqrt(2λ) cosh(θ/4)``. We discretise with second differences on n interior points, write the
residual once against the Array API, let ``pa.jacfwd`` give its (tridiagonal) Jacobian, and run Newton.

Checks: the Jacobian against the one written by hand, quadratic convergence, and the discrete solution
against the closed form (second-order accurate: error below 1e-5 on 400 points).
"""

import numpy as np
from _gallery import output_dir, pyplot, save
from scipy.optimize import brentq

import polyad as pa
from polyad import xp

LAM, N = 1.0, 400


def residual(u):
    h = 1.0 / (u.shape[0] + 1)
    padded = xp.concat([xp.zeros(1, dtype=u.dtype), u, xp.zeros(1, dtype=u.dtype)])
    return (2 * u - padded[:-2] - padded[2:]) / h**2 - LAM * xp.exp(u)


def exact_solution(x):
    theta = brentq(lambda t: t - np.sqrt(2 * LAM) * np.cosh(t / 4), 0.0, 4.0)  # the lower branch
    return -2 * np.log(np.cosh((x - 0.5) * theta / 2) / np.cosh(theta / 4))


def main():
    folder = output_dir(__doc__.splitlines()[0])
    x = np.linspace(0, 1, N + 2)[1:-1]
    u = np.zeros(N)
    jac = pa.jacfwd(residual)
    norms = []
    for _ in range(20):
        r = residual(u)
        norms.append(np.max(np.abs(r)))
        if norms[-1] < 1e-10:
            break
        u = u - np.linalg.solve(jac(u), r)
    print("Newton: ||F||_inf per iteration:", " ".join(f"{n:.1e}" for n in norms))

    h = 1.0 / (N + 1)
    by_hand = (np.diag(np.full(N, 2.0)) - np.eye(N, k=1) - np.eye(N, k=-1)) / h**2 - LAM * np.diag(np.exp(u))
    assert np.allclose(jac(u), by_hand, rtol=1e-12, atol=1e-8), (
        "jacfwd differs from the hand-written Jacobian"
    )
    assert norms[-1] < 1e-10 and len(norms) <= 6, f"Newton did not converge quadratically: {norms}"
    error = np.max(np.abs(u - exact_solution(x)))
    print(f"max |u - u_exact| = {error:.2e} (discretisation error, O(h²))")
    assert error < 1e-5, error

    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    left.plot(x, exact_solution(x), color="0.6", lw=4, label="closed form")
    left.plot(x, u, "C0", lw=1.5, label=f"Newton, {N} points")
    left.set(xlabel="x", ylabel="u(x)", title=f"Bratu solution, λ = {LAM}")
    left.legend()
    right.semilogy(range(len(norms)), norms, "o-C1")
    right.set(xlabel="Newton iteration", ylabel="max |F(u)|", title="Residual (Jacobian by pa.jacfwd)")
    right.set_xticks(range(len(norms)))
    right.grid(True, which="both", alpha=0.3)
    save(fig, folder, "bratu_newton.png")


if __name__ == "__main__":
    main()
