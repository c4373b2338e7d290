"""Jacobian benchmarks: jacrev, jacfwd, hessian and per-example gradients (vmap of grad) against the same
computation as a Python loop of vjp calls, and the peak memory (tracemalloc) of jacrev on a 2048 x 2048
tanh(W @ x + b) with and without chunking. Prints figures only.

Usage: POLYAD_BACKEND=numpy python scripts/bench_jacobians.py [--n 256] [--big 2048] [--repeat 3]
"""

import argparse
import gc
import time
import tracemalloc

import numpy as np

import polyad as pa
from polyad import xp as pxp
from polyad.core import dispatch


def best_of(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def loop_jacobian(f, x, m):
    """The Jacobian as m separate vjp calls (one per output), stacked."""
    out, vjp_fn = pa.vjp(f, x)
    xp = dispatch.backend_of_array(out).xp
    eye = xp.eye(m, dtype=out.dtype)
    return xp.stack([vjp_fn(eye[i, ...])[0] for i in range(m)])


def peak_mib(fn):
    gc.collect()
    tracemalloc.start()
    tracemalloc.reset_peak()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2**20


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=256, help="size of the timed problems")
    ap.add_argument("--big", type=int, default=2048, help="size of the memory problem")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    xp = dispatch.default_backend().xp
    rng = np.random.default_rng(0)
    n = args.n

    def arr(*shape):
        return xp.asarray(rng.standard_normal(shape) / np.sqrt(shape[-1]), dtype=xp.float64)

    W, b, x = arr(n, n), arr(n), arr(n)

    def f(x):
        return pxp.tanh(W @ x + b)

    def scalar(x):
        return pxp.sum(pxp.tanh(W @ x + b) ** 2)

    print(f"backend {pa.get_backend()}, n = {n}, best of {args.repeat}")
    rows = [
        ("jacrev", lambda: pa.jacrev(f)(x)),
        ("jacrev chunk_size=64", lambda: pa.jacrev(f, chunk_size=64)(x)),
        ("jacfwd", lambda: pa.jacfwd(f)(x)),
        ("loop of vjp calls", lambda: loop_jacobian(f, x, n)),
    ]
    ref = None
    for name, fn in rows:
        t = best_of(fn, args.repeat)
        val = np.asarray(fn()) if pa.get_backend() == "numpy" else None
        if val is not None:
            ref = val if ref is None else ref
            err = float(np.max(np.abs(val - ref)))
        else:
            err = float("nan")
        print(f"  Jacobian {n}x{n:<6} {name:<24} {t * 1e3:9.2f} ms   max |diff| vs jacrev {err:.1e}")

    t_h = best_of(lambda: pa.hessian(scalar)(x), args.repeat)

    def loop_hessian():
        g = pa.grad(scalar)
        return loop_jacobian(g, x, n)

    t_hl = best_of(loop_hessian, args.repeat)
    print(f"  Hessian  {n}x{n:<6} {'hessian (fwd over rev)':<24} {t_h * 1e3:9.2f} ms")
    print(f"  Hessian  {n}x{n:<6} {'loop of vjp(grad) calls':<24} {t_hl * 1e3:9.2f} ms")

    batch, d = 128, n
    Wd, xs, ys = arr(d), arr(batch, d), arr(batch)

    def loss(w, x, y):
        return (pxp.tanh(pxp.sum(w * x)) - y) ** 2

    per_example = pa.vmap(pa.grad(loss), in_dims=(None, 0, 0))

    def loop_grads():
        g = pa.grad(loss)
        return xp.stack([g(Wd, xs[i, ...], ys[i]) for i in range(batch)])

    t_v = best_of(lambda: per_example(Wd, xs, ys), args.repeat)
    t_l = best_of(loop_grads, args.repeat)
    print(
        f"  per-example grads {batch} x {d:<5} vmap(grad) {t_v * 1e3:9.2f} ms   "
        f"loop of grad {t_l * 1e3:9.2f} ms"
    )

    m = args.big
    Wb, bb, xb = arr(m, m), arr(m), arr(m)

    def g_big(x):
        return pxp.tanh(Wb @ x + bb)

    jac_mib = m * m * 8 / 2**20
    print(
        f"jacrev peak memory, tanh(W @ x + b), {m} x {m} "
        f"(Jacobian alone: {jac_mib:.0f} MiB; W: {jac_mib:.0f} MiB)"
    )
    for chunk in (None, 512, 128, 1):
        if chunk == 1 and m > 512:
            continue  # a loop of 2048 vjp calls adds nothing to the memory figure and takes long
        t0 = time.perf_counter()
        peak = peak_mib(lambda c=chunk: pa.jacrev(g_big, chunk_size=c)(xb))
        print(f"  chunk_size={chunk!s:<5} peak {peak:8.1f} MiB   time {time.perf_counter() - t0:6.2f} s")


if __name__ == "__main__":
    main()
