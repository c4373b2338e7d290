"""A Gaussian process's negative log marginal likelihood, differentiated in its three hyperparameters
(log length scale, log signal variance, log noise variance of an RBF kernel), on n points.

Rows per size, all in one run (polyad's on NumPy arrays):

- ``cho_factor/cho_solve``: ``polyad.linalg``'s structured solves, ``logdet`` from the factor's diagonal;
- ``cholesky + solve``: what a GP had to do without them, a general ``xp.linalg.solve`` on the Cholesky
  factor (twice), ``logdet`` from its diagonal;
- ``solve + slogdet``: the plain general route, ``xp.linalg.solve(K, y)`` and ``slogdet(K)``;

each as ``pa.grad`` (eager) and ``pa.jit(pa.grad)``; then ``jax.jit(jax.grad)`` of the
``jax.scipy.linalg.cho_factor/cho_solve`` model where JAX imports, and the hand-written NumPy/SciPy
gradient ``0.5 tr((K^-1 - a a^T) dK/dtheta)`` (the floor; every row's gradient is checked against it).

The rows are timed in turns (one batch of each per round, so that the load of a shared machine falls on
all of them alike); each figure is the median of the rounds after two warm-up calls, in CPU seconds of
the process (``time.process_time``: on a machine shared with other jobs, time spent waiting for a core
is not counted). So every library runs on one thread: BLAS (OpenBLAS, MKL, OpenMP) and XLA are set to
one thread before they load, unless ``--threads`` says otherwise (then CPU time sums the threads).
Compiling (``pa.jit``'s and JAX's first call) is not timed.

``--stacks`` times instead the two CPU kernels of the solves on stacks of matrices (what ``vmap`` over
many small systems gives them): SciPy called once per matrix, and the generic kernel's batched NumPy calls
(``numpy.linalg.solve`` over the stack), which polyad takes for matrices up to
``polyad.ops.linalg.structured.SMALL``.

    .venv/bin/python scripts/bench_gp.py [--sizes 100 400 1000] [--quick] [--threads N] [--stacks]
"""

import argparse
import gc
import os
import statistics
import sys
import time


def _threads():
    """The thread count asked for (default 1), set for BLAS and XLA before NumPy and JAX load."""
    n = sys.argv[sys.argv.index("--threads") + 1] if "--threads" in sys.argv else "1"
    for var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ.setdefault(var, n)
    if n == "1":
        os.environ.setdefault(
            "XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
        )
    return int(n)


THREADS = _threads()
os.environ.setdefault("POLYAD_FUSION_COMPILE", "wait")  # pa.jit's first call compiles its loops: untimed

import numpy as np  # noqa: E402  (after the thread settings)
import scipy  # noqa: E402
import scipy.linalg as sl  # noqa: E402

import polyad as pa  # noqa: E402
from polyad import linalg, xp  # noqa: E402
from polyad.ops.linalg import lu, structured, triangular  # noqa: E402


def kernel(m, theta, x):
    d2 = (m.reshape(x, (-1, 1)) - m.reshape(x, (1, -1))) ** 2
    k = m.exp(theta[1]) * m.exp(-0.5 * d2 / m.exp(2 * theta[0]))
    return k + m.exp(theta[2]) * m.eye(x.shape[0], dtype=x.dtype)


def nll_cho(theta, x, y):
    c, lower = linalg.cho_factor(kernel(xp, theta, x), lower=True)
    alpha = linalg.cho_solve((c, lower), y)
    return 0.5 * xp.sum(y * alpha) + xp.sum(xp.log(xp.linalg.diagonal(c)))


def nll_cholesky_solve(theta, x, y):
    low = xp.linalg.cholesky(kernel(xp, theta, x))
    alpha = xp.linalg.solve(xp.linalg.matrix_transpose(low), xp.linalg.solve(low, y))
    return 0.5 * xp.sum(y * alpha) + xp.sum(xp.log(xp.linalg.diagonal(low)))


def nll_solve(theta, x, y):
    k = kernel(xp, theta, x)
    return 0.5 * xp.sum(y * xp.linalg.solve(k, y)) + 0.5 * xp.linalg.slogdet(k)[1]


def by_hand(theta, x, y):
    """The gradient by the textbook formula, NumPy and SciPy only."""
    d2 = (x[:, None] - x[None, :]) ** 2
    ell2, sf2, sn2 = np.exp(2 * theta[0]), np.exp(theta[1]), np.exp(theta[2])
    rbf = sf2 * np.exp(-0.5 * d2 / ell2)
    c = sl.cho_factor(rbf + sn2 * np.eye(len(x)), lower=True, check_finite=False)
    alpha = sl.cho_solve(c, y, check_finite=False)
    w = sl.cho_solve(c, np.eye(len(x)), check_finite=False) - np.outer(alpha, alpha)  # K^-1 - a a^T
    dks = (rbf * d2 / ell2, rbf, sn2 * np.eye(len(x)))  # dK / d(log ell, log sf2, log sn2)
    return np.array([0.5 * np.sum(w * dk) for dk in dks])


def measure(fns, repeats, min_time=0.2):
    """Median seconds per call of each of ``fns``, timed in turns (module notes)."""
    numbers = []
    for fn in fns:
        fn()
        fn()
        start = time.process_time()
        fn()
        numbers.append(max(1, int(min_time / max(time.process_time() - start, 1e-7))))
    times = [[] for _ in fns]
    for _ in range(repeats):
        for fn, number, out in zip(fns, numbers, times):
            gc.collect()
            start = time.process_time()
            for _ in range(number):
                fn()
            out.append((time.process_time() - start) / number)
    return [statistics.median(t) for t in times]


def _jax_row(theta, x, y):
    try:
        import jax
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import jax.scipy.linalg as jsl

    def nll(t, x, y):
        c = jsl.cho_factor(kernel(jnp, t, x), lower=True)
        return 0.5 * jnp.sum(y * jsl.cho_solve(c, y)) + jnp.sum(jnp.log(jnp.diagonal(c[0])))

    f = jax.jit(jax.grad(nll))
    tj, xj, yj = jnp.asarray(theta), jnp.asarray(x), jnp.asarray(y)
    return "jax.jit(jax.grad), cho_factor/cho_solve", lambda: f(tj, xj, yj).block_until_ready()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 400, 1000])
    parser.add_argument("--quick", action="store_true", help="3 timed rounds instead of 7")
    parser.add_argument("--threads", type=int, default=1, help="BLAS and XLA threads (default 1)")
    parser.add_argument("--stacks", action="store_true", help="the kernels on stacks of matrices")
    args = parser.parse_args()
    if args.stacks:
        bench_stacks(repeats=3 if args.quick else 7)
        return
    rng = np.random.default_rng(0)
    theta = np.array([-0.5, 0.2, -2.0])
    print(
        f"GP negative log marginal likelihood, gradient in 3 hyperparameters: CPU ms per call, "
        f"{THREADS} thread(s) (NumPy {np.__version__}, SciPy {scipy.__version__})"
    )
    for n in args.sizes:
        bench_size(n, theta, rng, repeats=3 if args.quick else 7)


def bench_size(n, theta, rng, repeats):
    x = np.sort(rng.uniform(0, 10, n))
    y = np.sin(x) + 0.1 * rng.standard_normal(n)
    ref = by_hand(theta, x, y)
    rows = []
    for label, f in (
        ("cho_factor/cho_solve", nll_cho),
        ("cholesky + solve", nll_cholesky_solve),
        ("solve + slogdet", nll_solve),
    ):
        eager, jitted = pa.grad(f), pa.jit(pa.grad(f))
        for name, g in ((f"pa.grad, {label}", eager), (f"pa.jit(pa.grad), {label}", jitted)):
            np.testing.assert_allclose(g(theta, x, y), ref, rtol=1e-6, atol=1e-8 * n)
            rows.append((name, lambda g=g: g(theta, x, y)))
    jax_row = _jax_row(theta, x, y)
    if jax_row is not None:
        np.testing.assert_allclose(np.asarray(jax_row[1]()), ref, rtol=1e-6, atol=1e-8 * n)
        rows.append(jax_row)
    rows.append(("NumPy/SciPy by hand", lambda: by_hand(theta, x, y)))
    times = measure([fn for _, fn in rows], repeats=repeats)
    base = times[[name for name, _ in rows].index("pa.jit(pa.grad), cho_factor/cho_solve")]
    print(f"\nn = {n}")
    for (name, _), t in zip(rows, times):
        print(f"  {name:<52} {t * 1e3:10.3f} ms   {t / base:5.2f}x jit+cho")


def bench_stacks(repeats):
    numpy_xp = pa.dispatch.default_backend().xp
    rng = np.random.default_rng(1)
    print(f"solves on stacks: CPU ms per call, SciPy per matrix / generic batched ({THREADS} thread(s))")
    print(f"  polyad takes the generic kernel for matrices up to {structured.SMALL}")
    for count, n in ((1000, 4), (1000, 8), (300, 16), (100, 32), (10, 200)):
        a = rng.standard_normal((count, n, n)) + n * np.eye(n)
        b = rng.standard_normal((count, n, 2))
        c = np.linalg.cholesky(a @ np.swapaxes(a, -1, -2))
        lu_, piv = sl.lu_factor(a[0])
        lus, pivs = np.broadcast_to(lu_, a.shape), np.broadcast_to(piv, a.shape[:-1])
        pairs = {
            "solve_triangular": (triangular._tri_cpu, triangular._tri_generic, (a, b), {"lower": True}),
            "cho_solve": (triangular._cho_solve_cpu, triangular._cho_solve_generic, (c, b), {"lower": True}),
            "lu_solve": (lu._lu_solve_cpu, lu._lu_solve_generic, (lus, pivs, b), {}),
        }
        cells = []
        for name, (cpu, generic, args, kw) in pairs.items():
            small, structured.SMALL = structured.SMALL, 0  # the cpu kernel as SciPy per matrix
            try:
                t_scipy = measure([lambda f=cpu, a=args, k=kw: f(numpy_xp, *a, **k)], repeats)[0]
            finally:
                structured.SMALL = small
            t_generic = measure([lambda f=generic, a=args, k=kw: f(numpy_xp, *a, **k)], repeats)[0]
            cells.append(f"{name} {t_scipy * 1e3:7.2f} / {t_generic * 1e3:7.2f}")
        print(f"  {count:5d} x {n:3d}:  " + "   ".join(cells))


if __name__ == "__main__":
    main()
