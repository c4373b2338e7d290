"""Jacobians on a Dask cluster: the speed-up of jacfwd and jacrev with their chunks on 2 worker processes
against 1 (LocalCluster, one thread each, BLAS limited to one thread everywhere), next to the same
Jacobian in this process. The function is a deep tanh network, so that each chunk is real work.

Usage: python scripts/bench_distributed.py [--n 512] [--layers 8] [--chunks 8] [--repeat 3]
Needs the distributed extra (pip install 'polyad[distributed]').
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # before NumPy loads, here and in the workers (they inherit the environment)

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import polyad as pa  # noqa: E402
from polyad import xp  # noqa: E402


def network(n, layers, seed=0):
    rng = np.random.default_rng(seed)
    weights = [rng.standard_normal((n, n)) / np.sqrt(n) for _ in range(layers)]

    def f(x):
        for W in weights:
            x = xp.tanh(W @ x)
        return x

    return f


def timed(fn, repeat):
    fn()  # warm-up (workers import polyad, the payload reaches them)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    from distributed import Client, LocalCluster

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=512, help="inputs and outputs of the network")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--chunks", type=int, default=8, help="chunks (Dask tasks) per Jacobian")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    f = network(args.n, args.layers)
    x = np.random.default_rng(1).standard_normal(args.n)
    chunk = -(-args.n // args.chunks)
    ref = {name: getattr(pa, name)(f)(x) for name in ("jacfwd", "jacrev")}
    print(
        f"n={args.n}, layers={args.layers}, chunk_size={chunk} ({args.chunks} tasks), {os.cpu_count()} cores"
    )
    rows = {}
    for name in ("jacfwd", "jacrev"):
        local = pa.__dict__[name](f, chunk_size=chunk)
        rows[name] = {"this process": timed(lambda local=local: local(x), args.repeat)}
    for workers in (1, 2):
        with LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster, Client(cluster) as client:  # fmt: skip
            for name in ("jacfwd", "jacrev"):
                jac = pa.__dict__[name](f, chunk_size=chunk, client=pa.distributed(client, timeout=600))
                assert np.allclose(jac(x), ref[name], rtol=1e-10, atol=1e-12)
                rows[name][f"{workers} worker(s)"] = timed(lambda jac=jac: jac(x), args.repeat)
    for name, row in rows.items():
        one, two = row["1 worker(s)"], row["2 worker(s)"]
        cells = ", ".join(f"{k} {v * 1e3:.0f} ms" for k, v in row.items())
        print(f"{name}: {cells}; speed-up 2 workers vs 1: {one / two:.2f}x")


if __name__ == "__main__":
    main()
