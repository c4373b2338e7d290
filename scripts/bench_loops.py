"""W9: a long differentiated simulation, polyad's checkpointed scan against jax.jit(jax.grad) of lax.scan
with the body under jax.checkpoint: time and peak memory (RSS), each run in a process of its own.

    python scripts/bench_loops.py [--n 100000] [--steps 1000 10000] [--systems ...] [--slots 10 50 auto]

The workload (issue 20): an explicit 1-D diffusion step of a state of ``n`` float64,
``lap = roll(u, 1) + roll(u, -1) - 2u; u = u + 0.1 k lap - 0.01 u^3``, loss ``sum(u * u)``, the gradient
with respect to ``k``. Every system's gradient is checked against polyad eager's (same computation).
Systems: "polyad" (eager grad, checkpoints="auto" within max_memory="400MiB"), "polyad-jit"
(pa.jit of the same grad), "jax" (jax.jit(jax.grad) of lax.scan, the body under jax.checkpoint: one carry
stored per step), "polyad-s<slots>" (a fixed number of checkpoints, for the scaling table).
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time

HERE = os.path.abspath(__file__)


def run_polyad(n, steps, mode, slots):
    import numpy as np

    import polyad as pa
    from polyad import xp

    u0 = xp.asarray(np.linspace(0.0, 1.0, n))
    checkpoints = "auto" if slots == "auto" else int(slots)
    budget = "400MiB" if slots == "auto" else None

    def loss(k):
        def body(u, _):
            lap = xp.roll(u, 1) + xp.roll(u, -1) - 2.0 * u
            return u + 0.1 * k * lap - 0.01 * u**3, None

        u, _ = pa.scan(body, u0, length=steps, checkpoints=checkpoints, max_memory=budget)
        return xp.sum(u * u)

    g = pa.jit(pa.grad(loss)) if mode == "jit" else pa.grad(loss)
    k = np.float64(0.5)
    first = time.perf_counter()
    value = g(k)
    first = time.perf_counter() - first
    from polyad.backends.numpy.compiler import fusion_compile

    fusion_compile.wait()  # pa.jit's fused loops compile in the background after its first call
    start = time.perf_counter()
    value = g(k)
    return float(value), time.perf_counter() - start, first


def run_jax(n, steps):
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    u0 = jnp.linspace(0.0, 1.0, n)

    def loss(k):
        @jax.checkpoint
        def body(u, _):
            lap = jnp.roll(u, 1) + jnp.roll(u, -1) - 2.0 * u
            return u + 0.1 * k * lap - 0.01 * u**3, None

        u, _ = jax.lax.scan(body, u0, None, length=steps)
        return jnp.sum(u * u)

    g = jax.jit(jax.grad(loss))
    first = time.perf_counter()
    g(0.5).block_until_ready()
    first = time.perf_counter() - first
    start = time.perf_counter()
    value = g(0.5).block_until_ready()
    return float(value), time.perf_counter() - start, first


def child(system, n, steps):
    if system == "jax":
        value, seconds, first = run_jax(n, steps)
    else:
        mode = "jit" if system == "polyad-jit" else "eager"
        slots = system.split("-s")[1] if "-s" in system else "auto"
        value, seconds, first = run_polyad(n, steps, mode, slots)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    print(json.dumps({"value": value, "seconds": seconds, "first": first, "peak": peak}))


def measure(system, n, steps, timeout):
    try:
        out = subprocess.run(
            [sys.executable, HERE, "--child", system, "--n", str(n), "--steps", str(steps)],
            capture_output=True,
            text=True,
            timeout=timeout,  # fmt: skip
        )
    except subprocess.TimeoutExpired:
        return None, f"over {timeout} s"
    if out.returncode != 0:
        return None, (out.stderr.strip().splitlines() or ["failed"])[-1][:120]
    return json.loads(out.stdout.strip().splitlines()[-1]), ""


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--steps", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--systems", nargs="+", default=["polyad", "polyad-jit", "jax"])
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--child", default=None)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.n, args.steps[0])
    print(
        f"W9: diffusion of {args.n} float64, gradient w.r.t. k; one process per run; load {os.getloadavg()}"
    )
    print("| steps | system | time (2nd call) | first call | peak RSS | gradient |")
    print("|---|---|---|---|---|---|")
    for steps in args.steps:
        reference = None
        for system in args.systems:
            result, why = measure(system, args.n, steps, args.timeout)
            if result is None:
                print(f"| {steps} | {system} | - | - | - | {why} |", flush=True)
                continue
            if reference is None:
                reference = result["value"]
            agree = abs(result["value"] - reference) <= 1e-9 * max(1.0, abs(reference))
            print(
                f"| {steps} | {system} | {result['seconds']:.2f} s | {result['first']:.2f} s | "
                f"{result['peak'] / 2**20:.0f} MiB | {result['value']:.10g}{'' if agree else ' (DIFFERS)'} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
