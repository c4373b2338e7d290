"""The derivative of a solver at its solution costs the same whatever the solver's iterations: a fixed point
``x = 0.5 cos(x) + theta`` (2,000 unknowns) solved by plain iteration, its gradient by ``pa.custom_root``
(implicit) against ``pa.grad`` through the unrolled iterations, at several iteration counts.

    python scripts/bench_implicit.py [--repeats 5]

Prints, per iteration count: the median wall time of the gradient call (the solve included) and the
peak memory ``tracemalloc`` sees during it, for both. Timings on a shared machine are noisy: compare
within one run. The implicit gradient's agreement with the closed form ``2 x / (1 + sin(x) / 2)`` is
printed too.
"""

import argparse
import statistics
import time
import tracemalloc

import numpy as np

import polyad as pa
from polyad import xp

N = 2000
THETA = np.linspace(0.0, 1.0, N)


def implicit_loss(theta, iterations):
    def solve(f, x):
        for _ in range(iterations):
            x = x - f(x)
        return x

    def diagonal(g, y):  # the Jacobian 1 + sin(x)/2 is diagonal: one matvec of ones gives it
        return y / g(xp.ones_like(y))

    x = pa.custom_root(lambda x: x - 0.5 * xp.cos(x) - theta, xp.zeros_like(theta), solve, diagonal)
    return xp.sum(x**2)


def unrolled_loss(theta, iterations):
    x = xp.zeros_like(theta)
    for _ in range(iterations):
        x = 0.5 * xp.cos(x) + theta
    return xp.sum(x**2)


def measure(fn, iterations, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        g = pa.grad(fn)(THETA, iterations)
        times.append(time.perf_counter() - start)
    tracemalloc.start()
    pa.grad(fn)(THETA, iterations)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return statistics.median(times), peak, g


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    repeats = parser.parse_args().repeats
    print(f"{'iterations':>10} | {'implicit ms':>11} {'implicit peak MB':>16} | {'unrolled ms':>11} "
          f"{'unrolled peak MB':>16}")  # fmt: skip
    for iterations in (60, 500, 2000):
        t_i, p_i, g = measure(implicit_loss, iterations, repeats)
        t_u, p_u, _ = measure(unrolled_loss, iterations, repeats)
        row = f"{1e3 * t_i:>11.2f} {p_i / 1e6:>16.3f} | {1e3 * t_u:>11.2f} {p_u / 1e6:>16.3f}"
        print(f"{iterations:>10} | {row}")
    x = _iterate(lambda x: x - 0.5 * np.cos(x) - THETA, np.zeros(N), 200)
    exact = 2 * x / (1 + 0.5 * np.sin(x))
    error = np.max(np.abs(np.asarray(g) - exact) / np.abs(exact))
    print(
        f"implicit gradient (2000 iterations) against 2 x / (1 + sin(x) / 2): max relative error {error:.1e}"
    )


def _iterate(f, x, n):
    for _ in range(n):
        x = x - f(x)
    return x


if __name__ == "__main__":
    main()
