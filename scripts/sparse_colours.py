"""Colour counts of sparse Hessians: the star colouring (``sparse_hessian(coloring="star")``) against the
distance-1 DSATUR colouring of the columns (``coloring="dsatur"``), on the test problems, with the one
``coloring="auto"`` (the default) picks. Each count is the number of Hessian-vector products per call.
Then sparse Jacobians: products per call by columns (forward, JVPs), by rows (reverse, VJPs) and
bidirectional (both), with the mode ``sparse_jacobian``'s ``mode="auto"`` picks.

    PYTHONPATH=. python scripts/sparse_colours.py

Then ARWHEAD at n = 10^5 (the distance-1 colouring skipped: its column-intersection graph is dense):
the time of each stage and the peak of Python's allocations (tracemalloc) over all of them.
"""

import time
import tracemalloc

import numpy as np

import polyad as pa
from polyad.api import _coloring as coloring

xp = pa.xp


def arwhead(x):  # CUTEst's ARWHEAD: one dense row and column
    return xp.sum((x[:-1] ** 2 + x[-1] ** 2) ** 2 - 4.0 * x[:-1] + 3.0)


def chain(x):  # tridiagonal
    return xp.sum((x[1:] - x[:-1]) ** 2) + xp.sum(xp.exp(x))


def energy_2d(u, n=20):  # the five-point stencil (the Bratu energy)
    g = xp.reshape(u, (n, n))
    return 0.5 * (xp.sum((g[1:, :] - g[:-1, :]) ** 2) + xp.sum((g[:, 1:] - g[:, :-1]) ** 2)) - xp.sum(
        xp.exp(u)
    )


def global_parameter(x):  # a chain plus a global scale: an arrow on a band
    return xp.sum(x[-1] * (x[1:-1] - x[:-2]) ** 2) + xp.sum(x**2)


def random_symmetric(n, density, seed):
    rng = np.random.default_rng(seed)
    mask = rng.uniform(size=(n, n)) < density
    weights = np.triu(rng.uniform(0.5, 1.5, (n, n)) * (mask | mask.T))
    S = weights + weights.T
    return lambda v: xp.sum(v * (S @ v)) + xp.sum(xp.exp(v))


PROBLEMS = {
    "ARWHEAD, n = 1000": (arwhead, 1000),
    "ARWHEAD, n = 3000": (arwhead, 3000),
    "chain, n = 1000": (chain, 1000),
    "2-d energy, 20 x 20": (energy_2d, 400),
    "band + global parameter, n = 1000": (global_parameter, 1000),
    "random symmetric, n = 200, 2%": (random_symmetric(200, 0.02, 0), 200),
    "random symmetric, n = 200, 5%": (random_symmetric(200, 0.05, 1), 200),
}


def main():
    print(f"{'problem':38s} {'distance-1':>10s} {'star':>6s} {'auto':>6s}")
    for name, (f, n) in PROBLEMS.items():
        x = np.linspace(0.5, 1.5, n)
        pattern = pa.hessian_sparsity(f)(x)
        star = coloring.star_coloring(pattern)
        assert coloring.is_star_coloring(pattern, star)
        d1 = coloring.color_columns(pattern, "dsatur")
        auto = pa.sparse_hessian(f, sparsity=pattern)
        print(f"{name:38s} {int(d1.max()) + 1:10d} {int(star.max()) + 1:6d} {auto.n_colors:6d}")


def arrow(x):  # a dense column (the scale x[0]), a band and a dense row (the total)
    return xp.concat([x[0] * x[1:] ** 2 + xp.sin(x[:-1]), xp.sum(x * x, keepdims=True)])


def stencil_2d(u, n=32):  # the Bratu residual: the five-point stencil with zero boundary values
    g = xp.reshape(u, (n, n))
    zrow, zcol = xp.zeros((1, n), dtype=u.dtype), xp.zeros((n + 2, 1), dtype=u.dtype)
    p = xp.concat([zcol, xp.concat([zrow, g, zrow], axis=0), zcol], axis=1)
    lap = 4.0 * p[1:-1, 1:-1] - p[:-2, 1:-1] - p[2:, 1:-1] - p[1:-1, :-2] - p[1:-1, 2:]
    return xp.reshape(lap, (n * n,)) - 0.1 * xp.exp(u)


def brusselator_32(x):
    from bench_sparse_brusselator import brusselator, grid  # noqa: PLC0415  (scripts/, beside this one)

    return brusselator(x, 32, xp.asarray(grid(32)[0]), xp)


def global_row_and_column(x):  # a chain whose every entry scales with x[-1], and a global constraint
    return xp.concat([x[-1] * (x[1:-1] - x[:-2]) ** 2, xp.sum(x, keepdims=True) - 1.0, x[-1:] ** 3])


JACOBIANS = {
    "2-d stencil (Bratu), 32 x 32": (stencil_2d, 1024),
    "Brusselator, N = 32": (brusselator_32, 2048),
    "dense row + band + dense column, n = 1000": (arrow, 1000),
    "band + global parameter + constraint, n = 1000": (global_row_and_column, 1000),
    "cumulative sum (triangular), n = 200": (lambda x: xp.cumulative_sum(x), 200),
}


def jacobian_colours():
    print(f"\n{'problem':48s} {'forward':>7s} {'reverse':>7s} {'bidirectional':>13s} {'auto':>20s}")
    for name, (f, n) in JACOBIANS.items():
        x = np.linspace(0.5, 1.5, n)
        pattern = pa.jacobian_sparsity(f)(x)
        counts = [pa.sparse_jacobian(f, sparsity=pattern, mode=m).n_colors for m in MODES]
        auto = pa.sparse_jacobian(f, sparsity=pattern)
        chosen = f"{auto.n_colors} ({auto.chosen_mode})"
        print(f"{name:48s} {counts[0]:7d} {counts[1]:7d} {counts[2]:13d} {chosen:>20s}")


MODES = ("forward", "reverse", "bidirectional")


def _arwhead_stages(x):
    """The stages' times: pattern, star colouring, sparse_hessian's set-up and first call, a call."""
    t = [time.perf_counter()]
    pattern = pa.hessian_sparsity(arwhead)(x)
    t.append(time.perf_counter())
    colours = coloring.star_coloring(pattern)
    t.append(time.perf_counter())
    H = pa.sparse_hessian(arwhead, sparsity=pattern)
    H(x)
    t.append(time.perf_counter())
    H(x)
    t.append(time.perf_counter())
    assert coloring.is_star_coloring(pattern, colours)
    return H, np.diff(t)


def arwhead_large(n=100_000):
    x = np.random.default_rng(0).uniform(0.5, 1.5, n)
    H, (pattern, star, first, call) = _arwhead_stages(x)
    tracemalloc.start()  # a second run, traced (tracemalloc slows Python's allocations down)
    try:
        _arwhead_stages(x)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    print(f"ARWHEAD, n = {n}: {H.n_colors} colours ({H.n_colors} Hessian-vector products and the check's)")
    print(f"  pattern {pattern:.2f} s, star colouring {star:.2f} s, sparse_hessian set-up + first call "
          f"{first:.2f} s, a call with the pattern {1e3 * call:.1f} ms")  # fmt: skip
    print(f"  tracemalloc peak {peak / 2**20:.1f} MiB (the dense Hessian: {8 * n * n / 2**30:.0f} GiB)")


if __name__ == "__main__":
    main()
    jacobian_colours()
    arwhead_large()
