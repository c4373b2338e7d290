"""Advance counts of polyad's checkpointing schedules (polyad/control/schedules.py), and what generating
them costs.

    python scripts/checkpoint_counts.py [--lengths 1000 10000 100000] [--slots 5 10 20 50] [--no-timing]

For each loop length l and slot count s: the binomial (Revolve) schedule's advances p(l, s), the offline
optimum; the online schedule's (while_loop: length unknown until the end; its primal pass runs all l
steps untaped) and its ratio to p(l, s); the least any online schedule of the same kind could do knowing
l in hindsight ("hindsight": the best placement of s checkpoints, each gap then reversed by the binomial
schedule with the slots free by then). Advances count untaped body runs, the primal pass included: the
body runs l (the recorded turns) + advances times. Then the sqrt schedule (its own slot count, at most two
sweeps) and, unless --no-timing, the seconds to generate each schedule (one run each, wall clock: noisy on
a shared machine).
"""

import argparse
import math
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from polyad.control.schedules import (  # noqa: E402
    binomial_schedule,
    binomial_steps,
    online_steps,
    sqrt_slots,
    sqrt_steps,
)


def hindsight_advances(length, slots):
    """l + the cheapest reverse sweep from s checkpoints placed knowing l. The increments
    p(g, k) - p(g - 1, k) of a gap's cost are its repetition numbers (0 for g = 1, then non-decreasing),
    so the cheapest cut of l steps into s gaps (gap j with k = s - j slots) takes the l - s smallest
    increments over all gaps; over the s gaps exactly C(s + q, q + 1) increments equal q."""
    if length <= slots:
        return length
    extra, total, q = length - slots, 0, 1
    while True:
        n = math.comb(slots + q, q + 1)
        if n >= extra:
            return length + total + q * extra
        total, extra, q = total + q * n, extra - n, q + 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--slots", type=int, nargs="+", default=[5, 10, 20, 50])
    parser.add_argument("--no-timing", action="store_true")
    args = parser.parse_args()

    print("binomial (offline optimum) and online (while_loop) advances; body runs = length + advances")
    header = (
        f"{'length':>8} {'slots':>5} {'binomial':>11} {'per step':>8} {'online':>11} {'online/binomial':>15}"
    )
    print(header + f" {'hindsight':>11} {'online/hindsight':>16}")
    for length in args.lengths:
        for slots in args.slots:
            offline, online = binomial_steps(length, slots), online_steps(length, slots)
            best = hindsight_advances(length, slots)
            print(
                f"{length:>8} {slots:>5} {offline:>11,} {offline / length:>8.2f} {online:>11,} "
                f"{online / offline:>15.4f} {best:>11,} {online / best:>16.4f}"
            )

    print("\nsqrt: the fewest slots for at most two sweeps")
    print(f"{'length':>8} {'slots':>5} {'2*sqrt(l)':>9} {'advances':>11} {'recomputed':>10}")
    for length in args.lengths:
        slots, advances = sqrt_slots(length), sqrt_steps(length)
        recomputed = advances - (length - 1)
        print(f"{length:>8} {slots:>5} {2 * math.sqrt(length):>9.0f} {advances:>11,} {recomputed:>10,}")

    if args.no_timing:
        return
    print("\nseconds to generate (one run each)")
    print(f"{'length':>8} {'slots':>5} {'binomial actions':>16} {'binomial s':>10} {'online s':>8}")
    for length in (10**5, 10**6):
        for slots in (10, 50):
            start = time.perf_counter()
            n_actions = sum(1 for _ in binomial_schedule(length, slots))
            offline_s = time.perf_counter() - start
            start = time.perf_counter()
            online_steps(length, slots)
            online_s = time.perf_counter() - start
            print(f"{length:>8} {slots:>5} {n_actions:>16,} {offline_s:>10.2f} {online_s:>8.2f}")


if __name__ == "__main__":
    main()
