"""W10, W11 and a long differentiated integration: polyad.integrate.solve_ivp against SciPy's solve_ivp
(the primal) and diffrax (the gradient), each run in a process of its own.

    python scripts/bench_ode.py [--workloads W10 W11 long] [--systems ...] [--long-steps 100000]

$BENCH_ODE_REPEAT: calls per system (the best of those after the first is reported); $BENCH_ODE_WARM=1:
a second call and the wait for what it compiles in the background before those (the steady state).

W10 (issue 22): a 1,000-state periodic advection-diffusion-reaction equation by the method of lines,
``u' = -a D1 u + d D2 u + r u (1 - u)`` (central differences, ``dx = 1e-3``), parameters
``(a, d, r) = (1, 1e-3, 1)``, ``u0 = 0.5 + 0.4 sin(2 pi x)``, RK45 at ``rtol=1e-6`` (``atol=1e-6``) to
``T = 2``: about 2,400 accepted steps, 16,800 right-hand-side calls. The loss is ``sum(u(T)^2)``; its
gradient with respect to ``(a, d, r)``. Systems: "scipy" (the primal, a NumPy right-hand side),
"polyad" (the primal, outside transforms), "polyad-grad" (``pa.grad``, checkpoints="auto"),
"polyad-jit-grad" (``pa.jit(pa.grad)``), "diffrax" (``jax.jit(jax.grad)`` of ``diffeqsolve`` with
``Dopri5``, ``PIDController(rtol=1e-6, atol=1e-6)`` and ``RecursiveCheckpointAdjoint``).

W11: Robertson's stiff kinetics with Radau at ``rtol=1e-6``, ``atol=1e-10`` to ``T = 40``: SciPy's and
polyad's primal, polyad's ``jacrev`` of the final state with respect to the three rate constants.

long: ``y' = -k y`` for a state of 1,000 float64 forced to ``--long-steps`` steps (``max_step``),
``pa.grad`` with checkpoints="auto" within ``max_memory="16MiB"``: time and peak RSS, against the
``steps x 16 KiB`` storing every state would take.
"""

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time

HERE = os.path.abspath(__file__)
N, DX, T = 1000, 1e-3, 2.0
PARAMS = (1.0, 1e-3, 1.0)
REPEAT = int(os.environ.get("BENCH_ODE_REPEAT", "4"))
CPU = [0.0]  # the CPU seconds (all threads) of the timed call: less disturbed by a shared machine


def w10_np():
    import numpy as np

    x = np.arange(N) * DX
    return 0.5 + 0.4 * np.sin(2 * np.pi * x)


def w10_rhs(xp):
    def rhs(t, u, p):
        up, um = xp.roll(u, -1), xp.roll(u, 1)
        return -p[0] * (up - um) / (2 * DX) + p[1] * (up - 2 * u + um) / DX**2 + p[2] * u * (1 - u)

    return rhs


def timed(f, repeat=REPEAT):
    """(value, the fastest of the calls after the first (the machine is shared: the minimum is the least
    disturbed), seconds of the first call)."""
    first, cpu_first = time.perf_counter(), time.process_time()
    value = f()
    first, cpu = time.perf_counter() - first, time.process_time() - cpu_first
    seconds = first
    if os.environ.get("BENCH_ODE_WARM") and "polyad" in sys.modules:
        # the steady state: a second call, then what it compiles in the background (a small state's
        # whole loops start once a loop has run 1,000 steps)
        from polyad.backends.numpy.compiler import fusion_compile

        f()
        fusion_compile.wait()
    if repeat > 1:
        seconds = cpu = math.inf
    for _ in range(repeat - 1):
        start, cpu_start = time.perf_counter(), time.process_time()
        value = f()
        seconds = min(seconds, time.perf_counter() - start)
        cpu = min(cpu, time.process_time() - cpu_start)
    CPU[0] = cpu
    return value, seconds, first


def run_w10(system):
    import numpy as np

    u0 = w10_np()
    p0 = np.array(PARAMS)
    if system == "scipy":
        from scipy.integrate import solve_ivp

        def primal():
            sol = solve_ivp(w10_rhs(np), (0.0, T), u0, "RK45", args=(p0,), rtol=1e-6, atol=1e-6)
            return [float(np.sum(sol.y[:, -1] ** 2)), sol.nfev, len(sol.t) - 1]

        return timed(primal)
    if system == "diffrax":
        return run_w10_diffrax(u0, p0)
    import polyad as pa
    from polyad import xp
    from polyad.integrate import solve_ivp

    rhs = w10_rhs(xp)

    def loss(p):
        sol = solve_ivp(rhs, (0.0, T), u0, "RK45", args=(p,), rtol=1e-6, atol=1e-6, max_steps=20_000,
                        checkpoints=200)  # fmt: skip
        return xp.sum(sol.y[:, -1] ** 2)

    if system == "polyad":

        def primal():
            sol = solve_ivp(rhs, (0.0, T), u0, "RK45", args=(p0,), rtol=1e-6, atol=1e-6)
            return [float(np.sum(sol.y[:, -1] ** 2)), sol.nfev, len(sol.t) - 1]

        return timed(primal)
    g = pa.grad(loss) if system == "polyad-grad" else pa.jit(pa.grad(loss))
    return timed(lambda: [float(v) for v in g(p0)])


def run_w10_diffrax(u0, p0):
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import diffrax
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    rhs = w10_rhs(jnp)

    def loss(p):
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(lambda t, u, p: rhs(t, u, p)), diffrax.Dopri5(), 0.0, T, None, jnp.asarray(u0),
            args=p, stepsize_controller=diffrax.PIDController(rtol=1e-6, atol=1e-6),
            adjoint=diffrax.RecursiveCheckpointAdjoint(), max_steps=20_000,
        )  # fmt: skip
        return jnp.sum(sol.ys[-1] ** 2)

    g = jax.jit(jax.grad(loss))
    return timed(lambda: [float(v) for v in g(jnp.asarray(p0)).block_until_ready()])


def run_w11(system):
    import numpy as np

    p0 = np.array([0.04, 1e4, 3e7])
    y0 = np.array([1.0, 0.0, 0.0])
    if system == "scipy":
        from scipy.integrate import solve_ivp

        def rob(t, y, p):
            a, b = -p[0] * y[0] + p[1] * y[1] * y[2], p[0] * y[0] - p[1] * y[1] * y[2] - p[2] * y[1] ** 2
            return np.array([a, b, p[2] * y[1] ** 2])

        def primal():
            sol = solve_ivp(rob, (0.0, 40.0), y0, "Radau", args=(p0,), rtol=1e-6, atol=1e-10)
            return [float(sol.y[0, -1]), sol.nfev, len(sol.t) - 1]

        return timed(primal)
    import polyad as pa
    from polyad import xp
    from polyad.integrate import solve_ivp

    def rob(t, y, p):
        a, b = -p[0] * y[0] + p[1] * y[1] * y[2], p[0] * y[0] - p[1] * y[1] * y[2] - p[2] * y[1] ** 2
        return xp.stack([a, b, p[2] * y[1] ** 2])

    if system == "polyad":

        def primal():
            sol = solve_ivp(rob, (0.0, 40.0), y0, "Radau", args=(p0,), rtol=1e-6, atol=1e-10)
            return [float(sol.y[0, -1]), sol.nfev, len(sol.t) - 1]

        return timed(primal)

    def final(p):
        return solve_ivp(rob, (0.0, 40.0), y0, "Radau", args=(p,), rtol=1e-6, atol=1e-10).y[:, -1]

    return timed(lambda: [float(v) for v in np.asarray(pa.jacrev(final)(p0))[:, 0]], repeat=1)


def run_long(system, steps):
    import numpy as np

    import polyad as pa
    from polyad import xp
    from polyad.integrate import solve_ivp

    y0 = np.linspace(1.0, 2.0, 1_000)

    def loss(k):
        sol = solve_ivp(lambda t, y, k: -k * y, (0.0, 1.0), y0, args=(k,), max_step=1.0 / steps,
                        max_steps=2 * steps, checkpoints="auto", max_memory="16MiB")  # fmt: skip
        return xp.sum(sol.y[:, -1])

    value, seconds, first = timed(lambda: float(pa.grad(loss)(np.float64(0.5))), repeat=1)
    exact = -float(np.sum(y0)) * np.exp(-0.5)
    return [value, exact], seconds, first


def child(workload, system, steps):
    if workload == "W10":
        value, seconds, first = run_w10(system)
    elif workload == "W11":
        value, seconds, first = run_w11(system)
    else:
        value, seconds, first = run_long(system, steps)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    print(json.dumps({"value": value, "seconds": seconds, "first": first, "peak": peak, "cpu": CPU[0]}))


def measure(workload, system, steps, timeout):
    try:
        out = subprocess.run(
            [sys.executable, HERE, "--child", workload, system, "--long-steps", str(steps)],
            capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return None, f"over {timeout} s"
    if out.returncode != 0:
        return None, (out.stderr.strip().splitlines() or ["failed"])[-1][:160]
    return json.loads(out.stdout.strip().splitlines()[-1]), ""


SYSTEMS = {
    "W10": ["scipy", "polyad", "polyad-grad", "polyad-jit-grad", "diffrax"],
    "W11": ["scipy", "polyad", "polyad-jacrev"],
    "long": ["polyad-grad"],
}


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workloads", nargs="+", default=["W10", "W11"])
    parser.add_argument("--systems", nargs="+", default=None)
    parser.add_argument("--long-steps", type=int, default=100_000)
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--child", nargs=2, default=None)
    args = parser.parse_args()
    if args.child:
        return child(*args.child, args.long_steps)
    print(f"polyad.integrate benchmarks; one process per run; load {os.getloadavg()}")
    print(
        "| workload | system | time (best of later calls) | its CPU time | first call | peak RSS | result |"
    )
    print("|---|---|---|---|---|---|---|")
    for workload in args.workloads:
        for system in args.systems or SYSTEMS[workload]:
            result, why = measure(workload, system, args.long_steps, args.timeout)
            if result is None:
                print(f"| {workload} | {system} | - | - | - | - | {why} |", flush=True)
                continue
            print(
                f"| {workload} | {system} | {result['seconds']:.3f} s | {result['cpu']:.3f} s | "
                f"{result['first']:.2f} s | {result['peak'] / 2**20:.0f} MiB | {result['value']} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
