"""What the graph optimiser does to the benchmark workloads: nodes before and after, and compiled replay
time before and after (the fastest of many alternating batches), in one process (compare figures within
one run only).

    python scripts/bench_optimize.py [--quick] [--rounds 15] [--only "W2"] [--clock cpu] [--backend numpy]

Workloads (scripts/bench.py): W1 ``chain`` (200 tiny elementwise steps, 8 elements), W2 ``w2_loss``
(4e6 elements; 4e5 with --quick), W5 ``sum(log(1 + exp(A @ x)))`` with a 256 x 256 ``A``; each as the graph
of ``pa.grad`` and of ``pa.hessian`` (the W2 Hessian is left out: it is a 4e6 x 4e6 matrix). Each row
checks the optimised graph's result against the original's before timing it.
"""

import argparse
import os
import sys
import time

import numpy as np

import polyad as pa
from polyad import xp
from polyad.graph.compiler import optimize, reuse_buffers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import chain, w2_loss  # noqa: E402


def _workloads(quick):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((256, 256)) / 16.0
    w5 = lambda v: xp.sum(xp.log(1 + xp.exp(a @ v)))  # noqa: E731
    w1 = lambda v: chain(xp, v)  # noqa: E731
    w2 = lambda v: w2_loss(xp, v)  # noqa: E731
    x1 = np.linspace(0.1, 0.9, 8)
    x2 = np.linspace(-3, 3, 400_000 if quick else 4_000_000)
    x5 = rng.standard_normal(256)
    return [
        ("W1 grad", pa.grad(w1), x1),
        ("W1 hessian", pa.hessian(w1), x1),
        ("W2 grad", pa.grad(w2), x2),
        ("W5 grad", pa.grad(w5), x5),
        ("W5 hessian", pa.hessian(w5), x5),
    ]


def _best_alternating(fns, rounds, clock, min_time=0.02):
    """Seconds per call of each of ``fns``: batches of calls taken in turn, many rounds, the fastest batch
    of each. On a shared machine the minimum is the figure least disturbed by the other load, and taking
    turns exposes each function to the same disturbances."""
    batch = []
    for fn in fns:
        fn()
        start = clock()
        fn()
        batch.append(max(1, int(min_time / max(clock() - start, 1e-7))))
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for k, fn in enumerate(fns):
            start = clock()
            for _ in range(batch[k]):
                fn()
            best[k] = min(best[k], (clock() - start) / batch[k])
    return best


def _time(s):
    return f"{s * 1e3:.3f} ms" if s >= 1e-3 else f"{s * 1e6:.1f} us"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller W2, fewer repeats")
    parser.add_argument("--rounds", type=int, default=15, help="alternating timing rounds (default 15)")
    parser.add_argument("--only", default=None, help="run the workloads whose name contains this")
    parser.add_argument("--backend", default="numpy", help="the backend to compile for (default numpy)")
    parser.add_argument(
        "--clock",
        choices=("cpu", "wall"),
        default="cpu",
        help="cpu: this process's CPU time (all its threads; robust on a shared machine); wall: elapsed time",
    )
    args = parser.parse_args()
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    print(f"clock: {args.clock}")
    header = (
        f"{'workload':<12}{'nodes':>7}{'opt':>6}{'optimize()':>12}{'replay':>12}{'replay opt':>12}"
        f"{'ratio':>7}{'+reuse':>12}{'ratio':>7}{'in place':>9}"
    )
    print(header)
    print("-" * len(header))
    for name, fn, x in _workloads(args.quick):
        if args.only and args.only not in name:
            continue
        graph = pa.make_graph(fn, x)
        start = time.perf_counter()
        optimised = optimize(graph)
        t_opt = time.perf_counter() - start
        planned = reuse_buffers(optimised, args.backend)
        in_place = sum("[out=" in n.op.name for n in planned.nodes)
        compiled = [g.compile(args.backend) for g in (graph, optimised, planned)]
        ref = compiled[0](x)
        for c in compiled[1:]:
            if not np.allclose(c(x), ref, rtol=1e-12, atol=1e-14):
                raise AssertionError(f"{name}: the optimised graph computes something else")
        t_before, t_after, t_reuse = _best_alternating(
            [lambda c=c, x=x: c(x) for c in compiled], args.rounds, clock
        )
        print(
            f"{name:<12}{len(graph.nodes):>7}{len(optimised.nodes):>6}{_time(t_opt):>12}"
            f"{_time(t_before):>12}{_time(t_after):>12}{t_after / t_before:>7.2f}"
            f"{_time(t_reuse):>12}{t_reuse / t_before:>7.2f}{in_place:>9}"
        )


if __name__ == "__main__":
    main()
