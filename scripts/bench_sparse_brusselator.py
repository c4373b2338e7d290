"""The 2-D Brusselator's Jacobian (the reaction-diffusion right-hand side of SciMLBenchmarks'
BrusselatorSparseAD: N x N periodic grid, two species, A = 3.4, B = 1, alpha = 10 / dx^2 with
dx = 1 / (N - 1), the forcing switched on): ``pa.sparse_jacfwd`` with a reused pattern, against dense
``pa.jacfwd`` (only while the dense N^2-by-N^2 Jacobian is small: N <= ``--dense-max``) and SciPy's
finite differences with the same pattern and column groups (``scipy.optimize._numdiff.approx_derivative(
sparsity=(pattern, groups))``, on a NumPy residual, 2-point). Medians of repeated calls, CPU (NumPy).

    PYTHONPATH=. python scripts/bench_sparse_brusselator.py [--sizes 32 64 128 256] [--repeat 5]
"""

import argparse
import statistics
import time

import numpy as np
from scipy.optimize._numdiff import approx_derivative, group_columns

import polyad as pa

xp = pa.xp
A_, B_, ALPHA = 3.4, 1.0, 10.0


def grid(n):
    """x and y of the grid points (axis 0: x, axis 1: y), the forcing's disc, and the initial state."""
    s = np.linspace(0.0, 1.0, n)
    x, y = np.meshgrid(s, s, indexing="ij")
    forcing = np.where((x - 0.3) ** 2 + (y - 0.6) ** 2 <= 0.1**2, 5.0, 0.0)
    u0 = np.stack([22.0 * (y * (1 - y)) ** 1.5, 27.0 * (x * (1 - x)) ** 1.5])  # (2, n, n)
    return forcing, u0.reshape(-1)


def brusselator(flat, n, forcing, lib):
    """d(u, v)/dt on the periodic grid, written once for polyad's namespace and for NumPy."""
    state = lib.reshape(flat, (2, n, n))
    u, v = state[0, ...], state[1, ...]
    alpha = ALPHA * (n - 1) ** 2

    def lap(w):  # periodic five-point Laplacian
        return (
            lib.roll(w, 1, axis=0)
            + lib.roll(w, -1, axis=0)
            + lib.roll(w, 1, axis=1)
            + lib.roll(w, -1, axis=1)
            - 4 * w
        )

    du = alpha * lap(u) + B_ + u * u * v - (A_ + 1) * u + forcing
    dv = alpha * lap(v) + A_ * u - u * u * v
    return lib.reshape(lib.stack([du, dv]), (-1,))


def timed(fn, repeat):
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[32, 64, 128, 256])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--dense-max", type=int, default=32)
    args = parser.parse_args()
    print(f"{'N':>4s} {'unknowns':>9s} {'colours':>7s} {'setup s':>8s} {'sparse ms':>10s} {'dense ms':>10s} "
          f"{'SciPy FD ms':>11s} {'FD groups':>9s} {'max |FD - AD|':>13s}")  # fmt: skip
    for n in args.sizes:
        one_size(n, args)


def one_size(n, args):
    forcing, u0 = grid(n)
    x, c = xp.asarray(u0), xp.asarray(forcing)

    def f(z):
        return brusselator(z, n, c, xp)

    def host_f(z):
        return brusselator(z, n, forcing, np)

    start = time.perf_counter()
    pattern = pa.jacobian_sparsity(f)(x)
    jac = pa.sparse_jacfwd(f, sparsity=pattern)
    J = jac(x)
    setup = time.perf_counter() - start
    t_sparse = timed(lambda: jac(x), args.repeat)
    groups = group_columns(pattern)  # SciPy's own colouring, once (a reused pattern for both)

    def fd():
        return approx_derivative(host_f, u0, sparsity=(pattern, groups))

    t_fd = timed(fd, args.repeat)
    error = abs(fd() - J).max()
    if n <= args.dense_max:
        t_dense = timed(lambda: pa.jacfwd(f)(x), 1)
        assert np.allclose(np.asarray(pa.jacfwd(f)(x)), J.toarray(), rtol=1e-13, atol=1e-10)
        dense_text = f"{t_dense * 1e3:10.1f}"
    else:  # the dense Jacobian: (2 N^2)^2 x 8 bytes, one JVP per column
        dense_text = f"{'skipped':>10s}"
    print(f"{n:4d} {2 * n * n:9d} {jac.n_colors:7d} {setup:8.2f} {t_sparse * 1e3:10.2f} {dense_text} "
          f"{t_fd * 1e3:11.2f} {int(groups.max()) + 1:9d} {error:13.2e}")  # fmt: skip


if __name__ == "__main__":
    main()
