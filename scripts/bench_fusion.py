"""W2 with and without fusion: the gradient of ``sum(sin(v) * exp(-v**2) + tanh(v))`` at 4e6 elements.

Rows, all in one run: the compiled graph of ``grad`` unfused, the same graph fused (Numba, parallel and on
one thread), the fused expression through numexpr (the library not chosen, for the record: it inlines
every value into one expression, with no common subexpressions), the hand-written NumPy gradient and
``jax.jit(jax.grad)`` where JAX imports. The rows are timed in turns (one batch of each row per round, so
that the load of a shared machine falls on all of them alike); each is the median of its batches after
warm-up. The fused graph's first call (Numba's compile, or its load from the cache) is printed apart.

    .venv/bin/python scripts/bench_fusion.py [--n 4000000] [--quick]
"""

import argparse
import gc
import os
import statistics
import sys
import time

import numpy as np

import polyad as pa
from polyad import xp
from polyad.backends.numpy import fusion as cpu
from polyad.graph.compiler import fuse
from polyad.graph.compiler.fusion import FusedOp


def w2_loss(m, v):
    return m.sum(m.sin(v) * m.exp(-(v**2)) + m.tanh(v))


def by_hand(x):
    s, e, t = np.sin(x), np.exp(-(x**2)), np.tanh(x)
    return np.cos(x) * e - 2.0 * x * s * e + (1.0 - t * t)


def measure(fns, repeats, min_time=0.2):
    """Median seconds per call of each of ``fns``: two warm-up calls each, then ``repeats`` rounds, each
    timing one batch (at least ``min_time``) of every function in turn."""
    numbers = []
    for fn in fns:
        fn()
        fn()
        start = time.perf_counter()
        fn()
        numbers.append(max(1, int(min_time / max(time.perf_counter() - start, 1e-7))))
    times = [[] for _ in fns]
    for _ in range(repeats):
        for fn, number, out in zip(fns, numbers, times):
            gc.collect()
            start = time.perf_counter()
            for _ in range(number):
                fn()
            out.append((time.perf_counter() - start) / number)
    return [statistics.median(t) for t in times]


_NUMEXPR = {"negative": "(-{0})", "positive": "{0}", "broadcast_to": "{0}", "add": "({0} + {1})",
            "subtract": "({0} - {1})", "multiply": "({0} * {1})", "divide": "({0} / {1})",
            "pow": "({0} ** {1})", "sin": "sin({0})", "cos": "cos({0})", "exp": "exp({0})",
            "tanh": "tanh({0})"}  # fmt: skip


def numexpr_of(spec):
    """The group's single output as one numexpr expression (values inlined where they are read)."""
    exprs = {}
    for st in spec.statements:
        names = [
            f"in{v}" if k == "in" else f"({exprs[v]})" if k == "t" else repr(float(v)) for k, v in st.args
        ]
        exprs[st.target] = _NUMEXPR[st.op].format(*names)
    return exprs[spec.outputs[0][0]]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4_000_000)
    parser.add_argument("--quick", action="store_true", help="3 timed batches instead of 7")
    args = parser.parse_args()
    repeats = 3 if args.quick else 7
    x = np.linspace(-3.0, 3.0, args.n)
    ref = by_hand(x)
    rows = []

    def row(name, fn, note=""):
        got = np.asarray(fn())
        err = float(np.max(np.abs(got - ref)))
        if err > 1e-12:
            sys.exit(f"{name}: wrong gradient (max error {err:.3g})")
        rows.append((name, fn, note))

    grad = pa.grad(lambda v: w2_loss(xp, v))
    graph = pa.make_graph(grad, x)
    unfused = graph.compile()
    row("polyad make_graph(grad).compile() (unfused)", lambda: unfused(x), f"{len(graph.nodes)} nodes")
    if cpu.available():
        fused_graph = fuse(graph, "numpy")
        fused = fused_graph.compile()
        start = time.perf_counter()
        fused(x)
        first = time.perf_counter() - start
        note = f"{len(fused_graph.nodes)} nodes, first call (Numba compile or cache load) {first:.2f} s"
        row("polyad fuse(graph).compile() (Numba, one thread)", lambda: fused(x), note)
        saved = cpu.PARALLEL_MIN
        cpu.PARALLEL_MIN = 1
        try:
            threads = fuse(graph, "numpy").compile()
            start = time.perf_counter()
            threads(x)
            first = time.perf_counter() - start
            row(
                "polyad fuse(graph).compile() (Numba, parallel)",
                lambda: threads(x),
                f"first call {first:.2f} s",
            )
        finally:
            cpu.PARALLEL_MIN = saved
        try:
            import numexpr
        except ImportError:
            numexpr = None
        spec = next(n.op.fusion for n in fused_graph.nodes if isinstance(n.op, FusedOp))
        if numexpr is not None and len(spec.outputs) == 1 and spec.outputs[0][1] == "elementwise":
            expression = numexpr_of(spec)
            ones = np.ones(1)
            names = {"in0": x, "in1": ones}
            row(
                f"numexpr, same group ({numexpr.nthreads} threads)",
                lambda: numexpr.evaluate(expression, names),
            )
    else:
        print("Numba is not installed (pip install -e .[jit]): no fused rows")
    row("numpy, hand-written gradient", lambda: by_hand(x))
    try:
        import jax

        jax.config.update("jax_enable_x64", True)
        xj = jax.numpy.asarray(x)
        jg = jax.jit(jax.grad(lambda v: w2_loss(jax.numpy, v)))
        row("jax.jit(jax.grad)", lambda: np.asarray(jg(xj).block_until_ready()))
    except ImportError:
        print("JAX is not installed (pip install -e .[bench]): no jax.jit row")
    times = measure([fn for _, fn, _ in rows], repeats)
    rows = [(name, t, note) for (name, _, note), t in zip(rows, times)]
    hand = next(t for name, t, _ in rows if name.startswith("numpy"))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"W2 gradient, n={args.n}, {os.cpu_count()} CPUs (load average {load:.1f}), "
        f"median of {repeats} rounds"
    )
    for name, t, note in rows:
        print(f"  {name:<52} {t * 1e3:9.2f} ms  {t / hand:5.2f}x hand-written  {note}")
    if cpu.available():
        w1(repeats)


def w1(repeats):
    """W1 (scripts/bench.py's ``chain``: 200 small steps on 8 elements): one fused loop against one NumPy
    call per op, and what the fused graph's first call costs (the compile target is 1 s)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench import chain

    x = np.linspace(0.1, 0.9, 8)
    graph = pa.make_graph(pa.grad(lambda v: chain(xp, v)), x)
    unfused = graph.compile()
    start = time.perf_counter()
    fused_graph = fuse(graph, "numpy")
    fuse_time = time.perf_counter() - start
    fused = fused_graph.compile()
    start = time.perf_counter()
    fused(x)
    first = time.perf_counter() - start
    assert np.allclose(fused(x), unfused(x), rtol=1e-13, atol=0)
    t_unfused, t_fused = measure([lambda: unfused(x), lambda: fused(x)], repeats)
    print(f"W1 gradient (chain of 200 steps, 8 elements), {len(graph.nodes)} nodes")
    print(f"  polyad make_graph(grad).compile() (unfused)          {t_unfused * 1e6:9.1f} us")
    print(
        f"  polyad fuse(graph).compile() (Numba)                 {t_fused * 1e6:9.1f} us  "
        f"{len(fused_graph.nodes)} nodes; fuse {fuse_time:.2f} s, first call {first:.2f} s"
    )


if __name__ == "__main__":
    main()
