"""First calls of pa.jit (issue 23, item 3), each in a fresh process:

    python scripts/bench_first_call.py [--rounds 3] [--workload W1 --workload heat ...]

Workloads: W1 (grad of the 200-op chain on 8 elements), W2 (grad of the loss on 4e6 elements), W5
(hessian, 256 x 256) from scripts/bench.py, and "heat": the issue's 64 x 64 heat solver, 200 explicit steps
in a Python loop with a Python float step size, jitted whole.

Per workload and round, fresh processes (BLAS and the fused loops on one thread, so that the figures are
of the work and not of the shared machine's cores):
- eager: the first call of the eager function (polyad imported already), then a second;
- jit cold: ``pa.jit``'s first call with empty caches (``POLYAD_CACHE_DIR`` and ``NUMBA_CACHE_DIR`` fresh):
  trace, code of the graph as traced, and its run, while optimise, fuse and the loops' compilation run in
  the background; the time until all of that is ready (``fusion_compile.wait``); a call after that; for
  "heat", 50 calls with new step sizes;
- jit warm: the same in a new process with the caches the cold one filled;
- the same two with ``POLYAD_FUSION_COMPILE=wait`` (the first call optimises, fuses and waits for Numba,
  as before).
Each first call is checked against the eager result. Prints one table per workload (median, and the range
over rounds).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np
import polyad as pa
from polyad import xp
from polyad.backends.numpy.compiler import fusion_compile
imported = time.perf_counter() - t0
sys.path.insert(0, sys.argv[3])
import bench

workload, kind = sys.argv[1], sys.argv[2]
if workload == "W1":
    f, args = pa.grad(lambda v: bench.chain(xp, v)), (np.linspace(0.1, 0.9, 8),)
elif workload == "W2":
    f, args = pa.grad(lambda v: bench.w2_loss(xp, v)), (np.linspace(-3, 3, 4_000_000),)
elif workload == "W5":
    rng = np.random.default_rng(2)
    A = rng.standard_normal((256, 256)) / 16.0
    f, args = pa.hessian(lambda v: xp.sum(xp.log(1 + xp.exp(A @ v)))), (rng.standard_normal(256),)
else:
    def f(u, dt):
        for _ in range(200):
            lap = u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2] - 4 * u[1:-1, 1:-1]
            middle = xp.concat([u[1:-1, :1], u[1:-1, 1:-1] + dt * lap, u[1:-1, -1:]], axis=1)
            u = xp.concat([u[:1, :], middle, u[-1:, :]], axis=0)
        return u
    args = (np.random.default_rng(0).random((64, 64)), 0.1)

out = {"import_s": imported}
if kind == "eager":
    t = time.perf_counter(); f(*args); out["first_s"] = time.perf_counter() - t
    t = time.perf_counter(); f(*args); out["second_s"] = time.perf_counter() - t
else:
    expected = f(*args)
    jitted = pa.jit(f)
    t = time.perf_counter()
    got = jitted(*args)
    out["first_s"] = time.perf_counter() - t
    np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=1e-9, atol=1e-12)
    out["pending"] = fusion_compile.pending()
    t = time.perf_counter()
    fusion_compile.wait()
    out["ready_after_s"] = out["first_s"] + time.perf_counter() - t
    t = time.perf_counter(); jitted(*args); out["compiled_s"] = time.perf_counter() - t
    if workload == "heat":
        t = time.perf_counter()
        for k in range(50):
            jitted(args[0], 0.1 + 0.001 * k)
        out["fifty_floats_s"] = time.perf_counter() - t
        out["traces"] = jitted.cache_info().misses
print("RESULT " + json.dumps(out))
"""


def child(workload, kind, env):
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, workload, kind, HERE],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    if proc.returncode or line is None:
        raise RuntimeError(f"{workload} {kind} failed:\n{proc.stdout}\n{proc.stderr}")
    return json.loads(line[7:])


def fmt(values):
    if not values:
        return "-"
    med = statistics.median(values)
    unit, scale = ("s", 1) if med >= 1 else ("ms", 1e3)
    if len(values) == 1:
        return f"{med * scale:.3g} {unit}"
    return f"{med * scale:.3g} {unit} ({min(values) * scale:.3g}-{max(values) * scale:.3g})"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workload", action="append", choices=["W1", "W2", "W5", "heat"])
    opts = parser.parse_args()
    workloads = opts.workload or ["W1", "W2", "W5", "heat"]
    base = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", POLYAD_FUSION_THREADS="1")
    print(f"load average before: {os.getloadavg()[0]:.2f}", flush=True)
    for w in workloads:
        rows = {}
        for _ in range(opts.rounds):
            rows.setdefault("eager", []).append(child(w, "eager", base))
            for mode in ("background", "wait"):
                with tempfile.TemporaryDirectory() as cache:
                    env = dict(base, POLYAD_CACHE_DIR=cache, NUMBA_CACHE_DIR=os.path.join(cache, "numba"))
                    env["POLYAD_FUSION_COMPILE"] = mode
                    rows.setdefault(f"jit cold, {mode}", []).append(child(w, "jit", env))
                    rows.setdefault(f"jit warm, {mode}", []).append(child(w, "jit", env))
        print(f"\n{w} ({opts.rounds} rounds; median (min-max))")
        cols = ["first_s", "ready_after_s", "compiled_s", "second_s", "fifty_floats_s"]
        print("| run | first call | compiled code ready after | next call | 50 new floats |")
        print("|---|---|---|---|---|")
        for name, results in rows.items():
            cells = []
            for c in cols:
                if c == "second_s":
                    continue
                key = "second_s" if (name == "eager" and c == "compiled_s") else c
                cells.append(fmt([r[key] for r in results if key in r]))
            print(f"| {name} | " + " | ".join(cells) + " |")
        traces = [r["traces"] for rs in rows.values() for r in rs if "traces" in r]
        if traces:
            print(f"traces per process for 51 calls with distinct floats: {sorted(set(traces))}")
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
