"""Robertson's stiff chemical kinetics with SciPy's BDF solver and an exact Jacobian from ``pa.jacfwd``.

Three species, rate constants 0.04, 10^4 and 3·10^7: the textbook stiff problem. ``solve_ivp(...,
method="BDF")`` needs the Jacobian of the right-hand side; without ``jac`` it estimates one by finite
differences. ``pa.jacfwd(rhs, argnums=1)`` gives it exactly from the same ``rhs`` code.

Checks: the polyad Jacobian against the hand-written one at every point it was evaluated, the two solves
agree, and the mass ``y1 + y2 + y3 = 1`` is conserved. Prints the Jacobian evaluations, right-hand side
evaluations and wall time of each solve (the figure shows them).
"""

import time

import numpy as np
from _gallery import output_dir, pyplot, save
from scipy.integrate import solve_ivp

import polyad as pa
from polyad import xp

T_END = 1e5


rhs_calls = [0]


def rhs(t, y):
    rhs_calls[0] += 1
    r1 = 0.04 * y[0]
    r2 = 1e4 * y[1] * y[2]
    r3 = 3e7 * y[1] ** 2
    return xp.stack([-r1 + r2, r1 - r2 - r3, r3])


def jacobian_by_hand(t, y):
    return np.array(
        [
            [-0.04, 1e4 * y[2], 1e4 * y[1]],
            [0.04, -1e4 * y[2] - 6e7 * y[1], -1e4 * y[1]],
            [0.0, 6e7 * y[1], 0.0],
        ]
    )


def solve(jac):
    rhs_calls[0] = 0
    start = time.perf_counter()
    sol = solve_ivp(rhs, (0, T_END), [1.0, 0.0, 0.0], method="BDF", jac=jac, rtol=1e-6, atol=1e-10,
                    t_eval=np.logspace(-5, 5, 60))  # fmt: skip
    sol.rhs_calls = rhs_calls[0]  # all of them: SciPy's nfev leaves out its finite-difference calls
    return sol, time.perf_counter() - start


def main():
    folder = output_dir(__doc__.splitlines()[0])
    polyad_jac = pa.jacfwd(rhs, argnums=1)
    seen = []

    def checked_jac(t, y):
        J = polyad_jac(t, y)
        seen.append(np.max(np.abs(J - jacobian_by_hand(t, y))) / np.max(np.abs(J)))
        return J

    exact, t_exact = solve(checked_jac)
    exact.rhs_calls -= exact.njev  # pa.jacfwd calls rhs once per Jacobian (on its tensors): not a sample
    fd, t_fd = solve(None)
    assert exact.success and fd.success
    for name, sol, seconds in (("pa.jacfwd Jacobian", exact, t_exact), ("finite differences", fd, t_fd)):
        print(f"{name}: {sol.njev:3d} Jacobians, {sol.rhs_calls:4d} rhs calls, {seconds * 1e3:6.1f} ms")
    assert max(seen) < 1e-14, f"jacfwd differs from the hand-written Jacobian by {max(seen):.1e}"
    assert np.allclose(exact.y, fd.y, rtol=1e-3, atol=1e-9), "the two solves disagree"
    assert np.allclose(exact.y.sum(axis=0), 1.0, atol=1e-6), "mass not conserved"

    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8), gridspec_kw={"width_ratios": [1.6, 1]})
    for k, (label, scale) in enumerate((("y1", 1), ("y2 × 10⁴", 1e4), ("y3", 1))):
        left.semilogx(fd.t, fd.y[k] * scale, color="0.7", lw=4)
        left.semilogx(exact.t, exact.y[k] * scale, f"C{k}", label=label)
    left.set(xlabel="t", ylabel="concentration", title="Robertson (BDF; grey: finite-difference Jacobian)")
    left.legend()
    names = ["pa.jacfwd", "finite diff."]
    bars = right.bar(names, [exact.rhs_calls, fd.rhs_calls], color=["C0", "C7"])
    right.bar_label(bars, labels=[f"{s.rhs_calls} rhs, {s.njev} jac\n{t * 1e3:.0f} ms" for s, t in
                                  ((exact, t_exact), (fd, t_fd))])  # fmt: skip
    right.set(ylabel="rhs evaluations (numerical)", title="Cost of the solve")
    right.set_ylim(0, 1.3 * max(exact.rhs_calls, fd.rhs_calls))
    save(fig, folder, "robertson_bdf.png")


if __name__ == "__main__":
    main()
