"""Where W9's peak memory goes under pa.jit(pa.grad): the process's fixed cost, step by step, against what
grows with the problem (the arrays, by tracemalloc).

    PYTHONPATH=. python scripts/bench_loops_memory.py [--n 100000] [--steps 1000] [--max-memory 400MiB]
                                                      [--eager]

Prints the resident memory (RSS, after ``malloc_trim`` so that freed memory glibc keeps does not count)
after importing Python + NumPy + polyad, then Numba, then after the first call of the jitted gradient
(tracing, the fused loops compiled or loaded from the kernel cache: ``$POLYAD_CACHE_DIR``); then the
process's peak RSS over two calls, and the tracemalloc peak of a third call (NumPy's arrays and Python's
objects allocated during it: what ``max_memory`` budgets). The workload is ``scripts/bench_loops.py``'s.
Linux only (``/proc/self/status``, glibc's ``malloc_trim``).
"""

import argparse
import ctypes
import gc
import time
import tracemalloc


def status_mib(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) / 1024
    return float("nan")


def resident_mib():
    """RSS once garbage is collected and glibc has handed back the free memory it keeps."""
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    return status_mib("VmRSS")


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--steps", type=int, default=1_000)
    parser.add_argument("--max-memory", default="400MiB")
    parser.add_argument("--eager", action="store_true", help="eager pa.grad instead of pa.jit(pa.grad)")
    args = parser.parse_args()
    import numpy as np

    import polyad as pa
    from polyad import xp

    print(f"Python + NumPy + polyad imported: {resident_mib():.0f} MiB")
    import numba  # noqa: F401 -- what pa.jit's fused loops import; measured apart

    print(f"+ Numba imported: {resident_mib():.0f} MiB")
    u0 = xp.asarray(np.linspace(0.0, 1.0, args.n))

    def loss(k):
        def body(u, _):
            lap = xp.roll(u, 1) + xp.roll(u, -1) - 2.0 * u
            return u + 0.1 * k * lap - 0.01 * u**3, None

        u, _ = pa.scan(body, u0, length=args.steps, checkpoints="auto", max_memory=args.max_memory)
        return xp.sum(u * u)

    g = pa.grad(loss) if args.eager else pa.jit(pa.grad(loss))
    k = np.float64(0.5)
    for call in (1, 2):
        start = time.perf_counter()
        value = float(g(k))
        seconds = time.perf_counter() - start
        print(f"after call {call} ({seconds:.2f} s, gradient {value:.10g}): {resident_mib():.0f} MiB")
    print(f"peak RSS over both calls: {status_mib('VmHWM'):.0f} MiB")
    tracemalloc.start()
    try:
        g(k)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    print(f"call 3's tracemalloc peak: {peak / 2**20:.1f} MiB (max_memory={args.max_memory})")


if __name__ == "__main__":
    main()
