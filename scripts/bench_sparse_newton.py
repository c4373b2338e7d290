"""One Newton iteration of the 2-D Bratu problem (lambda = 6) on an n x n grid, 256 x 256 by default
(65,536 unknowns): polyad's (``pa.sparse_jacfwd`` with the pattern reused, then the backend's direct
sparse solve, its contract's ``sparse.spsolve``: SciPy's SuperLU for NumPy, cupyx's on the GPU) against
SciPy's SuperLU on the CPU with the Jacobian written by hand (the issue's baseline). Medians of a few
iterations from the same state; the residual's decrease is printed so that both are seen to solve.

    PYTHONPATH=.:scripts python scripts/bench_sparse_newton.py [--n 256] [--repeat 3]
"""

import argparse
import statistics
import time

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from bench_sparse_bratu import residual

import polyad as pa
from polyad.core import dispatch

xp = pa.xp
LAM = 6.0


def scipy_newton_step(u, n):
    """``u - J^{-1} F(u)`` with the hand-written Jacobian (5-point Laplacian minus h^2 lam diag(exp u))."""
    T = sp.diags_array([-1.0, 2.0, -1.0], offsets=[-1, 0, 1], shape=(n, n))
    I = sp.eye_array(n)
    h2 = 1.0 / (n + 1) ** 2
    lap = sp.kron(I, T) + sp.kron(T, I)
    F = lap @ u - h2 * LAM * np.exp(u)
    J = (lap - h2 * LAM * sp.diags_array(np.exp(u))).tocsc()
    return u - spla.spsolve(J, F)


def median_time(fn, repeat, sync):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    n = args.n
    backend = dispatch.default_backend()
    sync = backend.native.cuda.Device().synchronize if backend.name == "cupy" else (lambda: None)
    u0 = np.full(n * n, 0.1)
    u = xp.asarray(u0)

    def f(v):
        return residual(v, n, LAM)

    start = time.perf_counter()
    jac = pa.sparse_jacfwd(f, sparsity=pa.jacobian_sparsity(f)(u))
    jac(u)
    setup = time.perf_counter() - start
    support = backend.sparse

    def polyad_step():
        return u - support.spsolve(jac(u), f(u))

    t_polyad, stepped = median_time(polyad_step, args.repeat, sync)
    t_scipy, host_stepped = median_time(lambda: scipy_newton_step(u0, n), args.repeat, lambda: None)
    size = lambda r: float(xp.max(xp.abs(r)))  # noqa: E731
    print(f"Bratu {n}x{n} ({n * n} unknowns), lambda {LAM}, backend {backend.name}, {jac.n_colors} colours")
    print(f"  pattern + colouring + first call        {setup * 1e3:9.1f} ms (once)")
    print(f"  polyad: sparse_jacfwd + spsolve         {t_polyad * 1e3:9.1f} ms per Newton iteration")
    print(f"  SciPy: hand-written J + SuperLU (CPU)   {t_scipy * 1e3:9.1f} ms per Newton iteration")
    after = size(f(stepped)), size(f(xp.asarray(host_stepped)))
    print(f"  max|F|: {size(f(u)):.2e} -> polyad {after[0]:.2e}, SciPy {after[1]:.2e}")
    print(f"  max |polyad step - SciPy step| {np.max(np.abs(np.asarray(stepped) - host_stepped)):.1e}")


if __name__ == "__main__":
    main()
