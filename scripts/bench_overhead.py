"""Per-call overhead of polyad's namespace against the backend called directly, per-op time under grad,
and the grad/forward time ratio on large arrays. A benchmark: it prints figures, it asserts nothing.

    python scripts/bench_overhead.py [--backend numpy] [--quick]
"""

import argparse
import statistics
import time

import numpy as np

import polyad as pa
from polyad import xp
from polyad.core import dispatch


def per_call(fn, number):
    """Median seconds per call of ``fn`` over 7 rounds of ``number`` calls."""
    rounds = []
    for _ in range(7):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        rounds.append((time.perf_counter() - start) / number)
    return statistics.median(rounds)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default=None, help="backend to measure (default: POLYAD_BACKEND)")
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    if args.backend:
        pa.set_backend(args.backend)
    backend = dispatch.default_backend()
    bx = backend.xp
    number = 2000 if args.quick else 20000
    print(f"backend: {backend.name} {backend.version}")

    print("\n1. Namespace call overhead, 8-element float64 arrays (no transform active)")
    x = bx.asarray([0.1 * i for i in range(8)], dtype=bx.float64)
    y = bx.asarray([0.2 * i for i in range(8)], dtype=bx.float64)
    print(f"   {'call':28s} {'backend':>10s} {'polyad':>10s} {'overhead':>10s}")
    cases = [
        ("sin(x)", lambda: bx.sin(x), lambda: xp.sin(x)),
        ("add(x, y)", lambda: bx.add(x, y), lambda: xp.add(x, y)),
        ("multiply(x, 2.0)", lambda: bx.multiply(x, 2.0), lambda: xp.multiply(x, 2.0)),
        ("sum(x)", lambda: bx.sum(x), lambda: xp.sum(x)),
        ("reshape(x, (2, 4))", lambda: bx.reshape(x, (2, 4)), lambda: xp.reshape(x, (2, 4))),
        ("matmul(x, y)", lambda: bx.matmul(x, y), lambda: xp.matmul(x, y)),
    ]
    for name, direct, ours in cases:
        d = per_call(direct, number)
        p = per_call(ours, number)
        print(f"   {name:28s} {d * 1e6:8.2f}us {p * 1e6:8.2f}us {(p - d) * 1e6:8.2f}us")

    print("\n2. grad of a chain of elementwise ops on 8 values (forward + backward)")
    n_ops = 50

    def chain(v):
        for _ in range(n_ops // 5):
            v = xp.sin(v)
            v = v * 1.01
            v = v + 0.1
            v = xp.exp(-xp.abs(v))
        return xp.sum(v)

    ops_per_call = (n_ops // 5) * 6 + 1
    g = pa.grad(chain)
    fwd = per_call(lambda: chain(x), number // 20)
    t = per_call(lambda: g(x), number // 20)
    print(f"   forward only      {fwd * 1e6:9.1f}us per call ({fwd / ops_per_call * 1e6:.2f}us per op)")
    print(f"   grad              {t * 1e6:9.1f}us per call ({t / ops_per_call * 1e6:.2f}us per op, "
          f"{ops_per_call} primitive ops)")  # fmt: skip

    print("\n3. Large arrays: grad of sum(sin(x) * exp(-x**2) + tanh(x)), n = 4,000,000")
    n = 400_000 if args.quick else 4_000_000
    big = bx.linspace(-3.0, 3.0, n, dtype=bx.float64)

    def loss(v):
        return xp.sum(xp.sin(v) * xp.exp(-(v**2)) + xp.tanh(v))

    reps = 3 if args.quick else 5
    f_t = statistics.median(_times(lambda: loss(big), reps))
    g_t = statistics.median(_times(lambda: pa.grad(loss)(big), reps))
    print(f"   forward {f_t * 1e3:8.1f} ms   grad {g_t * 1e3:8.1f} ms   grad/forward = {g_t / f_t:.2f}")

    calls = 1000 if args.quick else 10_000
    print(f"\n4. Memory over {calls:,} calls of pa.grad(f)(x) (tapes must be freed)")
    grown, nbytes = memory_over_grad_calls(bx, calls)
    print(f"   live objects grown: {grown}   traced bytes grown: {nbytes}")

    print("\n5. linearize: jvp_fn replays tangent rules only; pa.jvp runs the primal again")
    for n in (4, 100_000):
        t_f, t_jvp, t_lin = linearize_vs_jvp(bx, n, args.quick)
        print(f"   n = {n:>7,}: primal {t_f * 1e3:7.3f} ms   pa.jvp {t_jvp * 1e3:7.3f} ms   "
              f"jvp_fn {t_lin * 1e3:7.3f} ms   ({t_jvp / t_lin:.2f}x faster)")  # fmt: skip

    print(
        "\n6. NumPy's spelling: the chain of 2. written with np.sin, np.exp, np.abs, v.sum() (NumPy dispatch)"
    )

    def numpy_chain(v):
        for _ in range(n_ops // 5):
            v = np.sin(v)
            v = v * 1.01
            v = v + 0.1
            v = np.exp(-np.abs(v))
        return v.sum()

    g_np = pa.grad(numpy_chain)
    t_np = per_call(lambda: g_np(x), number // 20)
    print(f"   grad              {t_np * 1e6:9.1f}us per call ({t_np / ops_per_call * 1e6:.2f}us per op; "
          f"{(t_np / t - 1) * 100:+.0f}% against polyad.xp's spelling)")  # fmt: skip


def memory_over_grad_calls(bx, calls):
    """Live objects and traced bytes before and after ``calls`` grad calls: flat means tapes are freed."""
    import gc
    import tracemalloc

    x = bx.asarray([0.1, 0.2, 0.3], dtype=bx.float64)
    g = pa.grad(lambda v: xp.sum(xp.sin(v) * v))
    for _ in range(200):
        g(x)
    gc.collect()
    objects = len(gc.get_objects())
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for _ in range(calls):
        g(x)
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return len(gc.get_objects()) - objects, after - before


def linearize_vs_jvp(bx, n, quick):
    """jvp_fn of linearize (replays the tangent rules only) against pa.jvp (runs the primal again)."""
    x = bx.linspace(-1.0, 1.0, n, dtype=bx.float64)
    t = bx.ones(n, dtype=bx.float64)

    def f(v):
        for _ in range(10):
            v = xp.tanh(v * v) + xp.exp(xp.sin(v))
        return v

    _, jvp_fn = pa.linearize(f, x)
    reps = 3 if quick else 7
    t_lin = statistics.median(_times(lambda: jvp_fn(t), reps))
    t_jvp = statistics.median(_times(lambda: pa.jvp(f, (x,), (t,)), reps))
    t_f = statistics.median(_times(lambda: f(x), reps))
    return t_f, t_jvp, t_lin


def _times(fn, reps):
    fn()
    out = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


if __name__ == "__main__":
    main()
