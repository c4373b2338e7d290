"""Jacobians on a Dask cluster: jacfwd and jacrev of a deep tanh network, in chunks, in this process and
as Dask tasks on a LocalCluster of 1, 2, ... worker processes (one thread each, BLAS limited to one thread
everywhere), each result checked against the one computed here.

"This process" is the same transform with the same chunk_size, its chunks one after another in this
process's main thread (one BLAS thread): what the workers' tasks do, without Dask. For each cluster size
the two alternate, ``--repeat`` rounds after a warm-up call each (the workers import polyad, the function
and its weights reach them), so that a change in the machine's load hits both; each round is at a new
point x (the weights stay), as the calls of a Newton iteration are; the figures are medians, with the range
of the rounds. The targets of issue 23 (item 5): 1 worker within 1.15x of this process,
2 workers at least 1.6x faster than this process, on an idle 2-core machine.

``--simulate``: jacfwd of a function that closes over the same weights but sleeps instead of computing,
as long per chunk as this process takes for one chunk of the real network (measured first). Sleep takes no
CPU, so more workers than cores can run: the table shows what polyad and Dask add to a call as workers
grow (payload, scheduling, transfers, assembly), on a machine too small to show real scaling.

Usage: python scripts/bench_distributed.py [--n 1024] [--layers 6] [--chunks 8] [--repeat 5]
       [--workers 1 2] [--simulate]
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


def weights_of(n, layers, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((n, n)) / np.sqrt(n) for _ in range(layers)]


def network(n, layers, seed=0):
    weights = weights_of(n, layers, seed)

    def f(x):
        for W in weights:
            x = xp.tanh(W @ x)
        return x

    return f


def sleeper(n, layers, seconds, seed=0):
    """Closes over the network's weights (the same payload) and sleeps ``seconds`` per call: once per
    chunk under jacfwd (its vmap over the basis calls it once)."""
    weights = weights_of(n, layers, seed)

    def f(x):
        time.sleep(seconds)
        return xp.tanh(x) * float(len(weights))

    return f


def clock(fn, client=None):
    """Wall seconds of ``fn()`` and the CPU seconds it took: of this process (with a LocalCluster, its
    scheduler too) and of the workers' processes."""
    workers = client.run(time.process_time) if client is not None else {}
    c0, t0 = time.process_time(), time.perf_counter()
    fn()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    if client is not None:
        after = client.run(time.process_time)
        cpu += sum(after[w] - workers[w] for w in after if w in workers)
    return wall, cpu


def load():
    return "load average " + ", ".join(f"{v:.2f}" for v in os.getloadavg())


def ms(times):
    return f"{statistics.median(times) * 1e3:.0f} ms ({min(times) * 1e3:.0f}-{max(times) * 1e3:.0f})"


def measure(names, f, x, chunk, workers, repeat):
    """``{name: {"local": [s, ...], w: [s, ...]}}``: per cluster size, rounds of this process then the
    cluster, after a warm-up call of each."""
    from distributed import Client, LocalCluster

    times = {name: {"local": []} for name in names}
    cpus = {name: {"local": []} for name in names}
    refs = {name: getattr(pa, name)(f)(x) for name in names}
    for w in workers:
        with (
            LocalCluster(
                n_workers=w, threads_per_worker=1, processes=True, dashboard_address=None
            ) as cluster,
            Client(cluster) as client,
        ):
            client.wait_for_workers(w, timeout=120)
            for name in names:
                local = getattr(pa, name)(f, chunk_size=chunk)
                dist = getattr(pa, name)(f, chunk_size=chunk, client=pa.distributed(client, timeout=600))
                assert np.allclose(dist(x), refs[name], rtol=1e-10, atol=1e-12), name
                local(x)
                times[name][w], cpus[name][w] = [], []
                for k in range(repeat):
                    point = x + 1e-3 * (k + 1)  # each round at a new point, as in a Newton iteration
                    for key, fn, c in (("local", local, None), (w, dist, client)):
                        wall, cpu = clock(lambda fn=fn, point=point: fn(point), c)
                        times[name][key].append(wall)
                        cpus[name][key].append(cpu)
    return times, cpus


def report(times, cpus, workers, title):
    print(f"\n{title}")
    head = ["this process"] + [f"{w} worker{'s' * (w > 1)}" for w in workers]
    print("| Jacobian | " + " | ".join(head) + " | " + " | ".join(f"speed-up {w}" for w in workers) + " |")
    print("|---" * (2 + 2 * len(workers)) + "|")
    for name, row in times.items():
        local = statistics.median(row["local"])
        cells = [ms(row["local"])] + [ms(row[w]) for w in workers]
        ups = [f"{local / statistics.median(row[w]):.2f}x" for w in workers]
        print(f"| {name} | " + " | ".join(cells) + " | " + " | ".join(ups) + " |")
    print("(wall time: median of the rounds, range in brackets; speed-up: this process / the cluster)")
    for name, row in cpus.items():
        cells = [
            f"{k if k == 'local' else str(k) + 'w'} {statistics.median(v) * 1e3:.0f} ms"
            for k, v in row.items()
        ]
        print(f"CPU time per call, all processes (median): {name}: " + ", ".join(cells))
    for name, row in times.items():
        local = statistics.median(row["local"])
        parts = []
        if 1 in row:
            parts.append(
                f"1 worker / this process = {statistics.median(row[1]) / local:.2f} (target <= 1.15)"
            )
        if 2 in row:
            parts.append(
                f"this process / 2 workers = {local / statistics.median(row[2]):.2f} (target >= 1.6)"
            )
        if parts:
            print(f"{name}: " + "; ".join(parts))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1024, help="inputs and outputs of the network")
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument(
        "--chunks",
        type=int,
        default=8,
        help="chunks per Jacobian (chunk_size = n / chunks; one Dask task per worker thread)",
    )
    ap.add_argument("--repeat", type=int, default=5, help="timed rounds per cluster size")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="cluster sizes (worker processes)")
    ap.add_argument("--simulate", action="store_true", help="also jacfwd with sleeping chunks (see above)")
    ap.add_argument("--simulate-workers", type=int, nargs="+", default=[1, 2, 4, 8])
    args = ap.parse_args()
    x = np.random.default_rng(1).standard_normal(args.n)
    chunk = -(-args.n // args.chunks)
    print(
        f"n={args.n}, layers={args.layers}, chunk_size={chunk} ({args.chunks} chunks), "
        f"{os.cpu_count()} cores, {args.repeat} rounds; {load()}"
    )
    f = network(args.n, args.layers)
    times, cpus = measure(("jacfwd", "jacrev"), f, x, chunk, args.workers, args.repeat)
    report(times, cpus, args.workers, f"Real chunks ({load()})")
    if args.simulate:
        per_chunk = statistics.median(times["jacfwd"]["local"]) / args.chunks
        g = sleeper(args.n, args.layers, per_chunk)
        sim, sim_cpus = measure(("jacfwd",), g, x, chunk, args.simulate_workers, args.repeat)
        report(
            sim,
            sim_cpus,
            args.simulate_workers,
            f"Simulated: jacfwd, each chunk a sleep of {per_chunk * 1e3:.0f} ms ({load()})",
        )
        ideal = ", ".join(f"{w}: {args.chunks / -(-args.chunks // w):.2f}x" for w in args.simulate_workers)
        print(f"ideal speed-ups ({args.chunks} equal chunks, no overhead): {ideal}")


if __name__ == "__main__":
    main()
