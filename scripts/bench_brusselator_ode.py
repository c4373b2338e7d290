"""The 2-D Brusselator PDE integrated by BDF with sparse Newton steps: polyad's ``solve_ivp(method="BDF",
jac_sparsity=pattern)`` (Jacobians by ``pa.sparse_jacfwd``, Newton matrices factorised by the backend's
``splu``) against SciPy's BDF with the same ``jac_sparsity`` (finite-difference Jacobians with column
groups, SuperLU), wall time of one run each after a warm-up, on the CPU (NumPy).

The problem is DifferentialEquations.jl's "Solving Large Stiff Equations" tutorial: N x N periodic grid,
two species, alpha = 10 / dx^2 with dx = 1 / (N - 1), the forcing disc switched on at t = 1.1, its initial
state; here on a part of its time span (``--span``), rtol 1e-6, atol 1e-8.

``--grad-size`` (default 32; 0: none) also times ``pa.grad`` of ``mean u(T)`` with respect to alpha through
the sparse BDF solve (the discrete adjoint: the Newton, tangent and adjoint solves by the sparse LU) on
``--grad-span``, beside the eager solve of that span and ``pa.jvp`` (forward mode), whose derivative it
prints with the adjoint's.

    PYTHONPATH=. python scripts/bench_brusselator_ode.py [--sizes 32 64 128] [--span 1.0 1.5]
        [--grad-size 32] [--grad-span 1.0 1.05]
"""

import argparse
import time

import numpy as np
import scipy.integrate

import polyad as pa
from polyad.integrate import solve_ivp

RTOL, ATOL = 1e-6, 1e-8


def grid(n):
    """The forcing's disc and the initial state ``(u, v)`` flattened."""
    s = np.linspace(0.0, 1.0, n)
    x, y = np.meshgrid(s, s, indexing="ij")
    disc = np.where((x - 0.3) ** 2 + (y - 0.6) ** 2 <= 0.1**2, 5.0, 0.0)
    return disc, np.concatenate(
        [(22.0 * (y * (1 - y)) ** 1.5).ravel(), (27.0 * (x * (1 - x)) ** 1.5).ravel()]
    )


def brusselator(n, disc, lib):
    """``f(t, z, alpha=10)`` in the namespace ``lib`` (polyad's or NumPy's)."""

    def lap(w):
        rolled = lib.roll(w, 1, axis=0) + lib.roll(w, -1, axis=0) + lib.roll(w, 1, axis=1)
        return rolled + lib.roll(w, -1, axis=1) - 4 * w

    def f(t, z, alpha=10.0):
        a = alpha * (n - 1) ** 2
        u, v = lib.reshape(z[: n * n], (n, n)), lib.reshape(z[n * n :], (n, n))
        force = lib.where(t >= 1.1, disc, 0.0)
        du = a * lap(u) + 1.0 + u * u * v - 4.4 * u + force
        dv = a * lap(v) + 3.4 * u - u * u * v
        return lib.concat([lib.reshape(du, (-1,)), lib.reshape(dv, (-1,))])

    return f


def one_size(n, span):
    disc, y0 = grid(n)
    f, host_f = brusselator(n, pa.xp.asarray(disc), pa.xp), brusselator(n, disc, np)
    start = time.perf_counter()
    pattern = pa.jacobian_sparsity(lambda z: f(0.0, z))(y0)
    detect = time.perf_counter() - start
    options = dict(rtol=RTOL, atol=ATOL, jac_sparsity=pattern)
    solve_ivp(f, (0.0, 1e-4), y0, "BDF", **options)  # warm-up (first calls, colouring once per call)
    start = time.perf_counter()
    ours = solve_ivp(f, span, y0, "BDF", **options)
    t_ours = time.perf_counter() - start
    start = time.perf_counter()
    ref = scipy.integrate.solve_ivp(host_f, span, y0, "BDF", **options)
    t_ref = time.perf_counter() - start
    y, r = np.asarray(ours.y)[:, -1], ref.y[:, -1]
    error = np.max(np.abs(y - r) / (ATOL + RTOL * np.abs(r)))
    print(
        f"{n:4d} {2 * n * n:8d} {t_ours:9.2f} {t_ref:9.2f} {t_ours / t_ref:6.2f} "
        f"{len(ours.t) - 1:5d}/{len(ref.t) - 1:<5d} {ours.nlu:4d}/{ref.nlu:<4d} "
        f"{ours.njev:3d}/{ref.njev:<3d} "
        f"{error:10.2f} {detect:7.2f}",
        flush=True,
    )


def grad_timing(n, span):
    """Wall times of the eager solve, ``pa.grad`` and ``pa.jvp`` of ``mean u(T)`` in alpha (N = ``n``)."""
    disc, y0 = grid(n)
    f = brusselator(n, pa.xp.asarray(disc), pa.xp)
    pattern = pa.jacobian_sparsity(lambda z: f(0.0, z))(y0)

    def mean_u(alpha):
        r = solve_ivp(f, span, y0, "BDF", args=(alpha,), rtol=RTOL, atol=ATOL, jac_sparsity=pattern)
        return pa.xp.mean(r.y[: n * n, -1])

    alpha = pa.xp.asarray(10.0)
    pa.grad(mean_u)(pa.xp.asarray(10.0))  # warm-up
    times = []
    for run in (mean_u, pa.grad(mean_u), lambda a: pa.jvp(mean_u, (a,), (pa.xp.asarray(1.0),))[1]):
        start = time.perf_counter()
        value = float(run(alpha))
        times.append((time.perf_counter() - start, value))
    (t_solve, _), (t_grad, adjoint), (t_jvp, forward) = times
    print(
        f"grad at N = {n}, span {span}: solve {t_solve:.2f} s, pa.grad {t_grad:.2f} s "
        f"({t_grad / t_solve:.1f}x), pa.jvp {t_jvp:.2f} s; d mean u / d alpha: adjoint {adjoint:.12e}, "
        f"forward {forward:.12e}",
        flush=True,
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[32, 64, 128])
    parser.add_argument("--span", type=float, nargs=2, default=[1.0, 1.5])
    parser.add_argument("--grad-size", type=int, default=32)
    parser.add_argument("--grad-span", type=float, nargs=2, default=[1.0, 1.05])
    args = parser.parse_args()
    print(f"span {tuple(args.span)}, rtol {RTOL}, atol {ATOL}; times in s; a/b: polyad/SciPy")
    print(
        f"{'N':>4s} {'states':>8s} {'polyad s':>9s} {'SciPy s':>9s} {'ratio':>6s} {'steps':>11s} "
        f"{'nlu':>9s} {'njev':>7s} {'|dy|/tol':>10s} {'detect':>7s}"
    )
    for n in args.sizes:
        one_size(n, tuple(args.span))
    if args.grad_size:
        grad_timing(args.grad_size, tuple(args.grad_span))


if __name__ == "__main__":
    main()
