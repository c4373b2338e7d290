"""polyad's BDF against SciPy's on Robertson's stiff kinetics (``rtol=1e-6``, ``atol=1e-10``, to
``T = 40``): the primal outside transforms (polyad's Jacobians by ``pa.jacfwd``, SciPy's by finite
differences; and both with the analytic ``jac=``), and ``pa.grad`` (and ``pa.jit(pa.grad)``) of
``y_1(T)`` with respect to the three rate constants (discrete adjoint: reverse mode through the
checkpointed loop), against SciPy's central differences of the same (six more solves, for scale).
Prints one table; each time is the fastest of ``--repeat`` calls after a first one (the machine may be
shared). From a worktree, put it first on the path (the venv's editable install is the main checkout):

    PYTHONPATH=. python scripts/bench_bdf.py [--repeat 3] [--t-end 40]
"""

import argparse
import time

import numpy as np
import scipy.integrate as si

import polyad as pa
from polyad.integrate import solve_ivp
from polyad.testing.ode_problems import robertson, robertson_jacobian_numpy
from polyad.testing.ode_problems import robertson_numpy as np_robertson

xp = pa.xp
P = [0.04, 1e4, 3e7]
Y0 = [1.0, 0.0, 0.0]
RTOL, ATOL = 1e-6, 1e-10


def timed(f, repeat):
    f()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        value = f()
        best = min(best, time.perf_counter() - start)
    return value, best


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--t-end", type=float, default=40.0)
    a = parser.parse_args()
    span = (0.0, a.t_end)

    def scipy_solve(p, jac=None):
        return si.solve_ivp(np_robertson, span, Y0, "BDF", args=(p,), rtol=RTOL, atol=ATOL, jac=jac)

    def ours(p, jac=None):
        return solve_ivp(robertson, span, xp.asarray(Y0), "BDF", args=(p,), rtol=RTOL, atol=ATOL, jac=jac)

    def loss(p):
        return ours(p).y[0, -1]

    def central(p, eps=1e-6):
        out = []
        for i in range(3):
            up, dn = list(p), list(p)
            up[i] *= 1 + eps
            dn[i] *= 1 - eps
            out.append((scipy_solve(up).y[0, -1] - scipy_solve(dn).y[0, -1]) / (2 * eps * p[i]))
        return np.array(out)

    p = xp.asarray(P)
    ref, t_scipy = timed(lambda: scipy_solve(P), a.repeat)
    _, t_scipy_jac = timed(lambda: scipy_solve(P, robertson_jacobian_numpy), a.repeat)
    sol, t_ours = timed(lambda: ours(p), a.repeat)
    _, t_ours_jac = timed(lambda: ours(p, robertson_jacobian_numpy), a.repeat)
    grad, t_grad = timed(lambda: pa.grad(loss)(p), a.repeat)
    compiled = pa.jit(pa.grad(loss))
    start = time.perf_counter()
    compiled(p)
    t_compile = time.perf_counter() - start
    _, t_jit = timed(lambda: compiled(p), a.repeat)
    fd, t_fd = timed(lambda: central(P), a.repeat)
    steps = f"{len(ref.t)} steps (SciPy), {sol.t.shape[0]} (polyad); nlu {ref.nlu} / {sol.nlu}"
    print(f"Robertson, BDF, rtol={RTOL}, atol={ATOL}, T={a.t_end}: {steps}")
    rows = [
        ("SciPy BDF (finite-difference Jacobians)", t_scipy),
        ("SciPy BDF, jac=", t_scipy_jac),
        ("polyad BDF (pa.jacfwd Jacobians)", t_ours),
        ("polyad BDF, jac=", t_ours_jac),
        ("polyad pa.grad of y_1(T) (3 parameters)", t_grad),
        (f"polyad pa.jit(pa.grad) (first call {t_compile:.1f} s)", t_jit),
        ("SciPy central differences of the same (6 solves)", t_fd),
    ]
    for name, seconds in rows:
        print(f"  {name:<52} {seconds * 1e3:9.1f} ms")
    print(f"  gradient: polyad {np.asarray(grad)}, SciPy central differences {fd}")


if __name__ == "__main__":
    main()
