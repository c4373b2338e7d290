"""Eager W2 and W5 against their hand-written references, timed in turns in one process (issue 23,
item 4):

    python scripts/bench_eager.py [--rounds 15] [--workload W2|W5] [--n 4000000]

W2: ``pa.grad`` of ``sum(sin(v) exp(-v^2) + tanh(v))`` on n elements against the hand-written NumPy
gradient; W5: ``pa.hessian`` of ``sum(log(1 + exp(A v)))``, A 256 x 256, against the analytic
``A^T diag(s(1 - s)) A``. Each round times the reference, then polyad (best of a few calls each, the cyclic
garbage collector off while timing), and prints the ratio; the summary gives the ratio of the fastest
times, and the median and range of the per-round ratios (a same-run ratio: the machine's load moves both).
Results are checked against the reference first.
"""

import argparse
import gc
import statistics
import time

import numpy as np

import polyad as pa
from polyad import xp


def w2(n):
    x = np.linspace(-3, 3, n)

    def by_hand():
        s, e, t = np.sin(x), np.exp(-(x**2)), np.tanh(x)
        return np.cos(x) * e - 2 * x * s * e + (1 - t * t)

    g = pa.grad(lambda v: xp.sum(xp.sin(v) * xp.exp(-(v**2)) + xp.tanh(v)))
    return by_hand, lambda: g(x), 3


def w5(n):
    rng = np.random.default_rng(2)
    A = rng.standard_normal((256, 256)) / 16.0
    x = rng.standard_normal(256)

    def analytic():
        s = 1 / (1 + np.exp(-(A @ x)))
        return A.T @ ((s * (1 - s))[:, None] * A)

    h = pa.hessian(lambda v: xp.sum(xp.log(1 + xp.exp(A @ v))))
    return analytic, lambda: h(x), 20


def best(fn, calls):
    t = float("inf")
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        t = min(t, time.perf_counter() - start)
    return t


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--workload", action="append", choices=["W2", "W5"])
    parser.add_argument("--n", type=int, default=4_000_000)
    opts = parser.parse_args()
    for name in opts.workload or ["W2", "W5"]:
        reference, polyad, calls = {"W2": w2, "W5": w5}[name](opts.n)
        np.testing.assert_allclose(polyad(), reference(), rtol=1e-9, atol=1e-12)
        refs, ours, ratios = [], [], []
        gc.disable()
        try:
            for _ in range(opts.rounds):
                r, p = best(reference, calls), best(polyad, calls)
                refs.append(r)
                ours.append(p)
                ratios.append(p / r)
        finally:
            gc.enable()
        print(
            f"{name}: reference {min(refs) * 1e3:.3f} ms, polyad {min(ours) * 1e3:.3f} ms: "
            f"{min(ours) / min(refs):.2f}x of the fastest; per round median {statistics.median(ratios):.2f}x "
            f"({min(ratios):.2f}x-{max(ratios):.2f}x over {opts.rounds} rounds)"
        )


if __name__ == "__main__":
    main()
