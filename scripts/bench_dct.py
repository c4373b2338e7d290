"""What the DCT/DST ops and polyad's scipy.fft backend cost, on NumPy arrays, in one process.

    python scripts/bench_dct.py [--n 4096]

Rows (best of 5 repeats, microseconds per call):
- ``scipy.fft.dct`` of a NumPy array without and with polyad's backend active (the backend declines NumPy
  input: the difference is its dispatch cost on SciPy's calls);
- ``polyad.xp.fft.dct`` on a NumPy array (the "cpu" kernel: SciPy, asked for explicitly) against SciPy
  called directly and the generic Array API kernel (what Dask, devices without a kernel and CPUs without
  SciPy run), for types 1-4;
- ``pa.grad`` of ``sum(dct(x, norm="ortho") ** 2)`` through ``scipy.fft.dct`` (backend active) against the
  same loss in NumPy with its hand-written gradient ``2 x``.

Timings on a shared machine are noisy: compare rows of one run.
"""

import argparse
import timeit

import numpy as np
import scipy.fft

import polyad as pa
from polyad.ops import dct as dct_ops


def per_call_us(f, number):
    return min(timeit.repeat(f, number=number, repeat=5)) / number * 1e6


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=4096, help="signal length")
    n = parser.parse_args().n
    x = np.random.default_rng(0).standard_normal(n)
    small = x[:64]
    number = max(20, 200_000 // n)
    rows = []
    rows.append(
        ("scipy.fft.dct, 64 points, no polyad backend", per_call_us(lambda: scipy.fft.dct(small), 20000))
    )
    with pa.use_scipy_fft_backend():
        rows.append(
            (
                "scipy.fft.dct, 64 points, polyad backend active",
                per_call_us(lambda: scipy.fft.dct(small), 20000),
            )
        )
    xp_numpy = pa.backends.load("numpy").xp
    kw = {"s": (n,), "axes": (0,), "norm": "backward"}
    for t in dct_ops.TYPES:
        op = dct_ops.OPS["dct", t]
        rows.append(
            (f"scipy.fft.dct type {t}, {n} points", per_call_us(lambda t=t: scipy.fft.dct(x, type=t), number))
        )
        rows.append(
            (
                f"xp.fft.dct type {t}, {n} points (SciPy kernel)",
                per_call_us(lambda t=t: pa.xp.fft.dct(x, type=t), number),
            )
        )
        rows.append(
            (
                f"  generic Array API kernel, type {t}",
                per_call_us(lambda op=op: op.generic(xp_numpy, x, **kw), number),
            )
        )

    def loss(v):
        return pa.xp.sum(scipy.fft.dct(v, norm="ortho") ** 2)

    with pa.use_scipy_fft_backend():
        grad = pa.grad(loss)
        assert np.allclose(grad(x), 2 * x)
        rows.append((f"pa.grad through scipy.fft.dct, {n} points", per_call_us(lambda: grad(x), number)))
    rows.append(
        (
            f"NumPy: the loss and its gradient 2x by hand, {n} points",
            per_call_us(lambda: (np.sum(scipy.fft.dct(x, norm="ortho") ** 2), 2 * x), number),
        )
    )
    width = max(len(r[0]) for r in rows)
    for label, us in rows:
        print(f"{label:<{width}}  {us:10.2f} us")


if __name__ == "__main__":
    main()
