"""``pa.sparse_jacfwd`` (a reused pattern) against dense ``pa.jacfwd`` on the 2-D Bratu residual, 96 x 96
grid (9,216 unknowns, 5 colours), on the default backend's device (CPU for NumPy; the GPU with
``POLYAD_BACKEND=cupy``, timed with the device synchronised). Medians of repeated calls.

    PYTHONPATH=. python scripts/bench_sparse_bratu.py [--n 96] [--repeat 20]
"""

import argparse
import statistics
import time

import polyad as pa
from polyad.core import dispatch

xp = pa.xp


def residual(u, n, lam=6.0):
    h = 1.0 / (n + 1)
    grid = xp.reshape(u, (n, n))
    zrow = xp.zeros((1, n), dtype=u.dtype, device=u.device)
    zcol = xp.zeros((n + 2, 1), dtype=u.dtype, device=u.device)
    padded = xp.concat([zcol, xp.concat([zrow, grid, zrow], axis=0), zcol], axis=1)
    lap = (
        4.0 * padded[1:-1, 1:-1] - padded[:-2, 1:-1] - padded[2:, 1:-1] - padded[1:-1, :-2] - padded[1:-1, 2:]
    )
    return xp.reshape(lap, (n * n,)) - (h * h * lam) * xp.exp(u)


def timed(fn, repeat, sync):
    fn()
    sync()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=96)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--dense-repeat", type=int, default=3)
    args = parser.parse_args()
    n = args.n
    backend = dispatch.default_backend()
    u = xp.linspace(0.0, 0.5, n * n, dtype=xp.float64)
    native = backend.native
    sync = native.cuda.Device().synchronize if backend.name == "cupy" else (lambda: None)

    def f(v):
        return residual(v, n)

    start = time.perf_counter()
    pattern = pa.jacobian_sparsity(f)(u)
    jac = pa.sparse_jacfwd(f, sparsity=pattern)
    jac(u)
    sync()
    setup = time.perf_counter() - start
    t_sparse = timed(lambda: jac(u), args.repeat, sync)
    t_eval = timed(lambda: f(u), args.repeat, sync)
    t_dense = timed(lambda: pa.jacfwd(f)(u), args.dense_repeat, sync)
    k = jac.n_colors
    print(f"Bratu {n}x{n} ({n * n} unknowns), backend {backend.name}, {k} colours")
    print(f"  pattern + colouring + first call   {setup * 1e3:9.2f} ms (once)")
    print(f"  pa.sparse_jacfwd (reused pattern)  {t_sparse * 1e3:9.3f} ms")
    ratio = t_dense / t_sparse
    print(f"  pa.jacfwd (dense)                  {t_dense * 1e3:9.3f} ms   ({ratio:.0f}x the sparse)")
    print(f"  one residual evaluation            {t_eval * 1e3:9.3f} ms   (sparse = {t_sparse / t_eval:.1f} "
          f"evaluations; (colours + 1) = {k + 1})")  # fmt: skip


if __name__ == "__main__":
    main()
