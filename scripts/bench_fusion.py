"""W2 with and without fusion: the gradient of ``sum(sin(v) * exp(-v**2) + tanh(v))`` at 4e6 elements;
then the fused loop's math functions one by one.

W2 rows, all in one run: the compiled graph of ``grad`` unfused; ``pa.jit(grad)`` with math="fast" (the
vectorised functions of numpy/compiler/vecmath.py) on one thread and in chunks on every usable thread;
the same fused loop with libm's scalar functions (the kernel before vecmath); ``pa.jit(grad,
math="exact")``; the fused expression through numexpr (the library not chosen, for the record: it inlines
every value into one expression, with no common subexpressions); the hand-written NumPy gradient and
``jax.jit(jax.grad)`` where JAX imports. The rows are timed in turns (one batch of each row per round, so
that the load of a shared machine falls on all of them alike); each is the median of its batches after
warm-up, with the spread of the batches (max/min - 1) as a measure of the noise. The fused graph's first
call (Numba's compile, or its load from the cache) is printed apart.

The function table (``--functions``, on by default): per function and dtype, nanoseconds per element of
the vectorised function in a Numba loop, of the same loop calling libm's, of NumPy's own (SciPy's erf) and
of ``jax.jit`` of JAX's, over ``--n-functions`` elements.

    .venv/bin/python scripts/bench_fusion.py [--n 4000000] [--quick] [--no-functions] [--no-w2]
"""

import argparse
import gc
import os
import statistics
import sys
import time
from functools import partial

import numpy as np

os.environ.setdefault("POLYAD_FUSION_COMPILE", "wait")  # time the loops, not their first calls

import polyad as pa  # noqa: E402
from polyad import xp  # noqa: E402
from polyad.backends.numpy.compiler import fusion as cpu  # noqa: E402
from polyad.backends.numpy.compiler import fusion_threads  # noqa: E402
from polyad.backends.numpy.compiler.expressions import NUMBA  # noqa: E402
from polyad.graph.compiler import fuse  # noqa: E402
from polyad.graph.compiler.fusion import FusedOp  # noqa: E402


def w2_loss(m, v):
    return m.sum(m.sin(v) * m.exp(-(v**2)) + m.tanh(v))


def by_hand(x):
    s, e, t = np.sin(x), np.exp(-(x**2)), np.tanh(x)
    return np.cos(x) * e - 2.0 * x * s * e + (1.0 - t * t)


def measure(fns, repeats, min_time=0.2, spread=None):
    """Median seconds per call of each of ``fns``: two warm-up calls each, then ``repeats`` rounds, each
    timing one batch (at least ``min_time``) of every function in turn. ``spread``: a list that receives
    each function's max/min - 1 over its batches."""
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
    if spread is not None:
        spread.extend(max(t) / min(t) - 1 for t in times)
    return [statistics.median(t) for t in times]


def forced(mode, fn):
    """``fn`` run with the fused loop's threads forced to ``mode`` ("serial" or "parallel")."""

    def run():
        saved, fusion_threads.FORCE = fusion_threads.FORCE, mode
        try:
            return fn()
        finally:
            fusion_threads.FORCE = saved

    return run


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
    parser.add_argument("--n-functions", type=int, default=1_000_000)
    parser.add_argument("--quick", action="store_true", help="3 timed batches instead of 7")
    parser.add_argument("--no-functions", action="store_true", help="skip the per-function table")
    parser.add_argument("--no-w2", action="store_true", help="skip W2 and W1")
    args = parser.parse_args()
    repeats = 3 if args.quick else 7
    if not args.no_w2:
        w2(args.n, repeats)
        if cpu.available():
            w1(repeats)
    if not args.no_functions and cpu.available():
        functions(args.n_functions, repeats)


def w2(n, repeats):
    x = np.linspace(-3.0, 3.0, n)
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
    threads = fusion_threads.usable_threads()
    if cpu.available():
        fast = pa.jit(grad)
        start = time.perf_counter()
        fast(x)
        first = time.perf_counter() - start
        nodes = len(fast.lower(x).fused_graph.nodes)
        note = f"{nodes} node(s), first call (trace, fuse, Numba compile or cache load) {first:.2f} s"
        row('polyad jit(grad), math="fast", one thread', forced("serial", lambda: fast(x)), note)
        row(f'polyad jit(grad), math="fast", {threads} threads', forced("parallel", lambda: fast(x)))
        fused_graph = fast.lower(x).fused_graph
        spec = next(n.op.fusion for n in fused_graph.nodes if isinstance(n.op, FusedOp))
        libm = libm_kernel(spec)
        row("same fused loop, libm's functions (before vecmath)", forced("serial", lambda: libm(np, x)))
        exact = pa.jit(grad, math="exact")
        exact(x)
        nodes = len(exact.lower(x).fused_graph.nodes)
        row(
            'polyad jit(grad), math="exact", one thread', forced("serial", lambda: exact(x)), f"{nodes} nodes"
        )
        try:
            import numexpr
        except ImportError:
            numexpr = None
        if numexpr is not None and len(spec.outputs) == 1 and spec.outputs[0][1] == "elementwise":
            expression = numexpr_of(spec)
            names = {"in0": x, "in1": np.ones(1)}
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
    spread = []
    times = measure([fn for _, fn, _ in rows], repeats, spread=spread)
    hand = times[[name for name, _, _ in rows].index("numpy, hand-written gradient")]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"W2 gradient, n={n}, {os.cpu_count()} CPUs, {threads} usable (load average {load:.1f}), "
        f"median of {repeats} rounds, spread = max/min - 1 of the rounds"
    )
    for (name, _, note), t, noise in zip(rows, times, spread):
        print(f"  {name:<52} {t * 1e3:9.2f} ms  {t / hand:5.2f}x hand-written  spread {noise:4.0%}  {note}")


def _ready(function, args):
    return function(*args).block_until_ready()


def libm_kernel(spec):
    """The CPU kernel of ``spec`` with libm's functions (its loop source as under math="exact")."""
    import copy

    plain = copy.copy(spec)
    plain.math = "exact"
    return cpu.kernel(plain, None)


_DOMAINS = {"log": (0.01, 100.0), "log1p": (-0.9, 10.0), "asin": (-1.0, 1.0), "acos": (-1.0, 1.0),
            "sqrt": (0.0, 100.0), "acosh": (1.0, 10.0), "atanh": (-0.99, 0.99),
            "pow": (0.1, 10.0)}  # fmt: skip


def functions(n, repeats):
    """Per function and dtype: ns per element of the vectorised loop, the libm loop, NumPy and jax.jit."""
    from polyad.backends.numpy.compiler import vecmath
    from polyad.testing.vecmath_accuracy import numpy_function

    try:
        import jax
        import jax.numpy as jnp

        jax.config.update("jax_enable_x64", True)
        jax_names = {"atan": "arctan", "asin": "arcsin", "acos": "arccos", "asinh": "arcsinh",
                     "acosh": "arccosh", "atanh": "arctanh", "pow": "power"}  # fmt: skip
    except ImportError:
        jax = None
    rng = np.random.default_rng(0)
    print(f"\nfunctions, ns per element over {n} elements, median of {repeats} rounds "
          f"(load average {os.getloadavg()[0]:.1f}); speed-ups of the vectorised loop")  # fmt: skip
    header = (
        f"  {'function':12} {'dtype':8} {'vectorised':>10} {'libm loop':>10} {'NumPy':>10} {'jax.jit':>10}"
    )
    print(header + "   vs libm   vs NumPy   spread")
    for op in sorted(vecmath.FUNCTIONS):
        binary = op in ("pow", "logaddexp")
        for dtype in ("float64", "float32"):
            lo, hi = _DOMAINS.get(op, (-3.0, 3.0))
            args = [rng.uniform(lo, hi, n).astype(dtype)]
            if binary:
                args.append(rng.uniform(-3.0, 3.0, n).astype(dtype))
            fast = cpu.op_loop(op, dtype)
            names = [f"in{k}[i]" for k in range(len(args))]
            params = ", ".join(["n", *[f"in{k}" for k in range(len(args))], "out0"])
            text = (f"def fused({params}):\n    for i in range(n):\n"
                    f"        out0[i] = {NUMBA[op].format(*names)}\n    return 0\n")  # fmt: skip
            libm = cpu._compile(text)
            out = np.empty(n, dtype)
            library = numpy_function(op)
            fns = [partial(fast, *args), partial(libm, n, *args, out), partial(library, *args)]
            if jax is not None:
                jf = jax.jit(
                    getattr(jnp, jax_names.get(op, op)) if op != "special.erf" else jax.scipy.special.erf
                )
                jargs = [jnp.asarray(a) for a in args]
                fns.append(partial(_ready, jf, jargs))
            with np.errstate(all="ignore"):
                spread = []
                times = measure(fns, repeats, min_time=0.05, spread=spread)
            ns = [t / n * 1e9 for t in times] + ([float("nan")] if jax is None else [])
            print(
                f"  {op:12} {dtype:8} {ns[0]:10.2f} {ns[1]:10.2f} {ns[2]:10.2f} {ns[3]:10.2f}"
                f"   {ns[1] / ns[0]:6.1f}x   {ns[2] / ns[0]:6.2f}x   {max(spread):4.0%}"
            )


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
