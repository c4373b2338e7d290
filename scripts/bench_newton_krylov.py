"""The 2-D Bratu problem solved by ``polyad.optimize.root(method="newton_krylov")`` (pa.jvp matvecs, the
backend's GMRES), without and with the sparse-Jacobian preconditioner, against SciPy's
``scipy.optimize.root(method="krylov")`` on a NumPy residual; then the solution's derivative with
respect to lambda (one tangent solve through ``custom_root``: GMRES, unpreconditioned, or a sparse
direct solve). One run each after a warm-up, CPU (NumPy).

    PYTHONPATH=. python scripts/bench_newton_krylov.py [--n 96] [--lam 6.0]
"""

import argparse
import time

import numpy as np
import scipy.optimize as so
from bench_sparse_bratu import residual

import polyad as pa
from polyad import optimize

xp = pa.xp


def host_residual(u, n, lam):
    g = np.pad(u.reshape(n, n), 1)
    lap = 4 * g[1:-1, 1:-1] - g[:-2, 1:-1] - g[2:, 1:-1] - g[1:-1, :-2] - g[1:-1, 2:]
    return lap.reshape(-1) - lam / (n + 1) ** 2 * np.exp(u)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=96)
    parser.add_argument("--lam", type=float, default=6.0)
    args = parser.parse_args()
    n, lam = args.n, args.lam
    u0 = np.zeros(n * n)

    def solve(lam, preconditioner=None, linear_solver=None):
        options = {"preconditioner": preconditioner}
        return optimize.root(lambda u, lam: residual(u, n, lam), u0, args=(lam,), method="newton_krylov",
                             options=options, linear_solver=linear_solver)  # fmt: skip

    print(f"Bratu {n}x{n} ({n * n} unknowns), lambda = {lam}")
    for pre in (None, "sparse"):
        solve(lam, pre)  # warm-up (the sparse pattern and colouring are found again per call)
        start = time.perf_counter()
        res = solve(lam, pre)
        elapsed = time.perf_counter() - start
        size = np.max(np.abs(host_residual(np.asarray(res.x), n, lam)))
        print(f"  newton_krylov, preconditioner={pre!s:6s} {elapsed * 1e3:8.1f} ms  {res.nit} Newton steps, "
              f"{res.nmatvec} JVPs, max|F| = {size:.1e}")  # fmt: skip
    start = time.perf_counter()
    ref = so.root(lambda u: host_residual(u, n, lam), u0, method="krylov", tol=1e-10)
    elapsed = time.perf_counter() - start
    print(f"  SciPy root(method='krylov')        {elapsed * 1e3:8.1f} ms  {ref.nit} steps, "
          f"max|F| = {np.max(np.abs(host_residual(ref.x, n, lam))):.1e}")  # fmt: skip
    eps = 1e-5
    central = (np.sum(solve(lam + eps, "sparse").x) - np.sum(solve(lam - eps, "sparse").x)) / (2 * eps)
    print(f"  d sum(u) / d lambda: central differences {float(central):.10f}")
    for tangent in ("gmres", "sparse"):
        start = time.perf_counter()
        total = lambda lam, tangent=tangent: xp.sum(solve(lam, "sparse", tangent).x)  # noqa: E731
        slope = pa.jvp(total, (np.float64(lam),), (np.float64(1.0),))[1]
        elapsed = time.perf_counter() - start
        print(f"    pa.jvp, linear_solver={tangent!r:8s} {elapsed * 1e3:8.1f} ms (the solve and the tangent "
              f"solve): {float(slope):.10f}")  # fmt: skip


if __name__ == "__main__":
    main()
