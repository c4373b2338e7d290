"""Choosing ``checkpoints=``: memory against recomputation for one differentiated simulation, each setting's
peak memory (tracemalloc: NumPy's allocations) and time per gradient, measured in one run.

    python scripts/bench_checkpoints.py [--n 20000] [--steps 1000] [--repeat 3] [--settings None 5 20 ...]

The workload is W9's (scripts/bench_loops.py, issue 20) at a smaller size: an explicit 1-D diffusion step
of a state of ``n`` float64, ``u = u + 0.1 k (roll(u, 1) + roll(u, -1) - 2u) - 0.01 u^3``, ``steps``
steps, loss ``sum(u * u)``, the gradient with respect to ``k`` by ``pa.grad`` (eager, NumPy). For each
``checkpoints=`` setting: the body runs (a counter in the body) and the slots they imply (the documented
count is ``1 + steps + p(steps, slots)``, ``1 + steps`` for None; "auto" picks its slots inside scan),
the advances ``p``, the tracemalloc peak of one gradient, and the best time of ``--repeat`` gradients,
also as a multiple of one primal run (the loop outside every transform; on a shared machine compare the
settings' times with each other, in one run). Every setting's gradient is checked against None's. "auto"
uses ``max_memory`` (``--budget``; default: about 32 slots, as this script estimates what scan reserves).
"""

import argparse
import gc
import math
import time
import tracemalloc

import numpy as np

import polyad as pa
from polyad import xp
from polyad.control import scan, schedules
from polyad.control.closure import trace


def step(u, k):
    lap = xp.roll(u, 1) + xp.roll(u, -1) - 2.0 * u
    return u + 0.1 * k * lap - 0.01 * u**3


def reserved_bytes(u0, k):
    """What scan's "auto" keeps of its budget for other than the states (polyad/control/scan.py): two
    carries and twice one step's values, from the step's traced graph."""
    body = trace(lambda u: step(u, k), (u0,), "bench")
    return 2 * scan.carry_bytes([u0]) + 2 * scan.step_bytes(body, [u0])


def make_loss(u0, steps, checkpoints, max_memory, calls):
    def loss(k):
        def body(u, _):
            calls[0] += 1
            return step(u, k), None

        u, _ = pa.scan(body, u0, length=steps, checkpoints=checkpoints, max_memory=max_memory)
        return xp.sum(u * u)

    return loss


def best_time(fn, repeat):
    best = math.inf
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def peak_bytes(fn):
    gc.collect()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def parse_setting(text):
    if text == "None":
        return None
    if text in ("sqrt", "auto"):
        return text
    return int(text)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--budget", default=None, help="max_memory of 'auto' (default: 32 slots)")
    parser.add_argument("--settings", nargs="+", default=["None", "200", "50", "sqrt", "20", "5", "auto"])
    args = parser.parse_args()

    u0 = np.linspace(0.0, 1.0, args.n)
    k = np.float64(0.5)
    state = u0.nbytes
    budget = args.budget or reserved_bytes(u0, k) + 33 * state  # 32 slots and the working state
    calls = [0]
    primal = best_time(lambda: make_loss(u0, args.steps, None, None, calls)(k), args.repeat)
    print(
        f"W9's diffusion step, n = {args.n} float64 ({state / 2**20:.2f} MiB a state), {args.steps} steps; "
        f"one primal run {primal * 1e3:.1f} ms; 'auto' within max_memory={budget} bytes"
    )
    header = f"{'checkpoints':>11} {'slots':>5} {'body runs':>9} {'p(l, s)':>8} {'peak MiB':>9}"
    print(header + f" {'peak/state':>10} {'grad s':>8} {'x primal':>8}")
    reference = None
    for text in args.settings:
        checkpoints = parse_setting(text)
        max_memory = budget if checkpoints == "auto" else None
        loss = make_loss(u0, args.steps, checkpoints, max_memory, calls)
        grad = pa.grad(loss)
        calls[0] = 0
        g = float(grad(k))
        runs = calls[0]
        if reference is None:
            reference = g
        assert abs(g - reference) <= 1e-10 * abs(reference), (text, g, reference)
        # the slots the loop used: Revolve's advances fall strictly with the slots up to l - 1, so the
        # body count names them ("auto" decides them inside scan, from the traced step's size)
        advances = runs - 1 - args.steps
        if checkpoints is None:
            assert runs == 1 + args.steps, runs
            slots = args.steps
        else:
            slots = next(
                s for s in range(1, args.steps + 1) if schedules.binomial_steps(args.steps, s) <= advances
            )
            assert schedules.binomial_steps(args.steps, slots) == advances, (text, runs)
        peak = peak_bytes(lambda grad=grad: grad(k))
        seconds = best_time(lambda grad=grad: grad(k), args.repeat)
        print(
            f"{text:>11} {slots:>5} {runs:>9} {advances:>8} {peak / 2**20:>9.1f} {peak / state:>10.1f} "
            f"{seconds:>8.3f} {seconds / primal:>8.1f}"
        )


if __name__ == "__main__":
    main()
