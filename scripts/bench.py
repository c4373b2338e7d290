"""polyad against the libraries users would pick instead: one process, one table of medians.

    python scripts/bench.py [--quick] [--workload W3] [--out bench-results]

Workloads W1-W9 (see BENCHMARKS.md) run for polyad, for each peer that imports (torch eager autograd,
torch.func, JAX eager and jit with x64, HIPS autograd) and for a hand-written NumPy reference. Float64
throughout; each system warms up, then the median of repeated runs is reported, and every system's
result is checked against the reference so the comparison is of the same computation. Results go to
stdout (a table with ratios to polyad and to the reference), to bench-results/results.json and to a PNG
bar chart bench-results/bench.png (if matplotlib imports).
"""

import argparse
import gc
import importlib.metadata
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

import polyad as pa
from polyad import xp
from polyad.backends.numpy.compiler import fusion_compile

HERE = os.path.dirname(os.path.abspath(__file__))


# ------------------------------------------------------------------------------ peers


def _peers():
    peers = {}
    try:
        import torch

        torch.set_default_dtype(torch.float64)
        peers["torch"] = torch
    except Exception:  # not installed: the row is left out
        pass
    try:
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        import jax

        jax.config.update("jax_enable_x64", True)
        peers["jax"] = jax
    except Exception:
        pass
    try:
        import autograd
        import autograd.numpy as anp

        peers["autograd"] = (autograd, anp)
    except Exception:
        pass
    return peers


# ------------------------------------------------------------------------------ timing


def measure(fn, quick, min_time=0.05):
    """Median seconds per call: warm up, then time batches of calls long enough to trust. pa.jit's fused
    loops compile in the background after a first call: they are waited for, so that the compiled code is
    timed (``scripts/bench_first_call.py`` times first calls)."""
    fusion_compile.wait()
    fn()
    fn()
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-7)
    number = max(1, int(min_time / once))
    repeats = 3 if quick else 7
    times = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - start) / number)
    return statistics.median(times)


def check(name, got, expected, rtol=1e-7, atol=1e-9):
    got = np.asarray(got)
    if got.shape != expected.shape or not np.allclose(got, expected, rtol=rtol, atol=atol):
        err = np.max(np.abs(got - expected)) if got.shape == expected.shape else f"shape {got.shape}"
        raise AssertionError(f"{name}: result differs from the reference (max error {err})")


class Table:
    def __init__(self):
        self.rows = []  # (workload, system, seconds, note)

    def add(self, workload, system, seconds, note=""):
        self.rows.append({"workload": workload, "system": system, "seconds": seconds, "note": note})
        print(f"  {system:34s} {_fmt(seconds):>12s} {note}", flush=True)


def _fmt(s):
    if s is None:
        return "-"
    if s >= 1:
        return f"{s:.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3f} ms"
    return f"{s * 1e6:.1f} us"


# ------------------------------------------------------------------------------ W1 per-op overhead


def chain(m, v, n_ops=200):
    """n_ops elementwise steps cycling sin, scale, shift, exp(-|v|), then a sum (m: the namespace)."""
    for i in range(n_ops):
        k = i % 4
        if k == 0:
            v = m.sin(v)
        elif k == 1:
            v = v * 1.01
        elif k == 2:
            v = v + 0.1
        else:
            v = m.exp(-m.abs(v))
    return m.sum(v)


W1_PRIMITIVES = 50 * 6 + 1  # per 4 steps: sin, mul, add, abs, negative, exp; then sum


def chain_grad_numpy(x, n_ops=200):
    """The same gradient by hand: forward storing what the backward needs, then the chain rule."""
    tape = []
    v = x
    for i in range(n_ops):
        k = i % 4
        if k == 0:
            tape.append(np.cos(v))
            v = np.sin(v)
        elif k == 1:
            v = v * 1.01
        elif k == 2:
            v = v + 0.1
        else:
            e = np.exp(-np.abs(v))
            tape.append(-np.sign(v) * e)
            v = e
    g = np.ones_like(v)
    for i in reversed(range(n_ops)):
        k = i % 4
        if k == 1:
            g = g * 1.01
        elif k != 2:
            g = g * tape.pop()
    return g


def w1(table, peers, quick):
    x = np.linspace(0.1, 0.9, 8)
    ref = chain_grad_numpy(x)
    t = measure(lambda: chain_grad_numpy(x), quick)
    table.add("W1", "numpy (hand-written gradient)", t, f"{t / W1_PRIMITIVES * 1e6:.2f} us/op")
    g = pa.grad(lambda v: chain(xp, v))
    check("polyad", g(x), ref)
    t = measure(lambda: g(x), quick)
    table.add("W1", "polyad grad", t, f"{t / W1_PRIMITIVES * 1e6:.2f} us/op")
    graph = pa.make_graph(g, x)  # trace once, replay
    check("polyad graph replay", graph(x), ref)
    t = measure(lambda: graph(x), quick)
    table.add("W1", "polyad make_graph(grad) replay", t, f"{t / W1_PRIMITIVES * 1e6:.2f} us/op")
    compiled = graph.compile()  # trace once, replay as straight-line backend calls
    check("polyad compiled graph", compiled(x), ref)
    t = measure(lambda: compiled(x), quick)
    table.add("W1", "polyad make_graph(grad).compile()", t, f"{t / W1_PRIMITIVES * 1e6:.2f} us/op")
    start = time.perf_counter()
    jitted = pa.jit(g)  # trace on abstract values, optimize, fuse; the loop compiles in the background
    check("polyad jit", jitted(x), ref)
    compile_time = time.perf_counter() - start
    t = measure(lambda: jitted(x), quick)
    table.add("W1", "polyad jit(grad)", t, f"compiled; first call (trace + run) {_fmt(compile_time)}")
    if "torch" in peers:
        torch = peers["torch"]
        xt = torch.from_numpy(x)

        def eager():
            v = xt.clone().requires_grad_(True)
            chain(torch, v).backward()
            return v.grad

        check("torch eager", eager().numpy(), ref)
        t = measure(eager, quick)
        table.add("W1", "torch eager autograd", t, f"{t / W1_PRIMITIVES * 1e6:.2f} us/op")
        fg = torch.func.grad(lambda v: chain(torch, v))
        check("torch.func", fg(xt).numpy(), ref)
        t = measure(lambda: fg(xt), quick)
        table.add("W1", "torch.func.grad", t, f"{t / W1_PRIMITIVES * 1e6:.2f} us/op")
    if "jax" in peers:
        jax = peers["jax"]
        jnp = jax.numpy
        xj = jnp.asarray(x)
        jg = jax.grad(lambda v: chain(jnp, v))
        check("jax eager", jg(xj), ref)
        t = measure(lambda: jg(xj).block_until_ready(), quick, min_time=0.2)
        table.add("W1", "jax.grad (eager)", t, f"{t / W1_PRIMITIVES * 1e6:.2f} us/op")
        jj = jax.jit(jg)
        check("jax jit", jj(xj), ref)
        t = measure(lambda: jj(xj).block_until_ready(), quick)
        table.add("W1", "jax.jit(jax.grad)", t, "compiled")
    if "autograd" in peers:
        autograd, anp = peers["autograd"]
        ag = autograd.grad(lambda v: chain(anp, v))
        check("autograd", ag(x), ref)
        t = measure(lambda: ag(x), quick)
        table.add("W1", "HIPS autograd", t, f"{t / W1_PRIMITIVES * 1e6:.2f} us/op")


# ------------------------------------------------------------------------------ W2 large arrays


def w2_loss(m, v):
    return m.sum(m.sin(v) * m.exp(-(v**2)) + m.tanh(v))


def w2(table, peers, quick):
    n = 400_000 if quick else 4_000_000
    x = np.linspace(-3, 3, n)

    def forward():
        return np.sum(np.sin(x) * np.exp(-(x**2)) + np.tanh(x))

    def by_hand():
        s, e, t = np.sin(x), np.exp(-(x**2)), np.tanh(x)
        return np.cos(x) * e - 2 * x * s * e + (1 - t * t)

    ref = by_hand()
    tf = measure(forward, quick)
    table.add("W2", "numpy forward only", tf, "(the unit of the ratios below)")
    th = measure(by_hand, quick)
    table.add("W2", "numpy (hand-written gradient)", th, f"{th / tf:.2f}x forward")
    g = pa.grad(lambda v: w2_loss(xp, v))
    check("polyad", g(x), ref)
    t = measure(lambda: g(x), quick)
    table.add("W2", "polyad grad", t, f"{t / tf:.2f}x forward, {t / th:.2f}x hand-written")
    compiled = pa.make_graph(g, x).compile()
    check("polyad compiled", compiled(x), ref)
    t = measure(lambda: compiled(x), quick)
    table.add(
        "W2", "polyad make_graph(grad).compile()", t, f"{t / tf:.2f}x forward, {t / th:.2f}x hand-written"
    )
    jitted = pa.jit(g)
    check("polyad jit", jitted(x), ref)
    t = measure(lambda: jitted(x), quick)
    table.add("W2", "polyad jit(grad)", t, f"{t / tf:.2f}x forward, {t / th:.2f}x hand-written")
    exact = pa.jit(g, math="exact")  # eager's results bit for bit: NumPy's functions between fused loops
    check("polyad jit exact", exact(x), ref)
    t = measure(lambda: exact(x), quick)
    table.add("W2", 'polyad jit(grad, math="exact")', t, f"{t / tf:.2f}x forward, {t / th:.2f}x hand-written")
    if "torch" in peers:
        torch = peers["torch"]
        xt = torch.from_numpy(x)

        def eager():
            v = xt.clone().requires_grad_(True)
            w2_loss(torch, v).backward()
            return v.grad

        check("torch", eager().numpy(), ref)
        t = measure(eager, quick)
        table.add("W2", "torch eager autograd", t, f"{t / tf:.2f}x forward")
    if "jax" in peers:
        jax = peers["jax"]
        xj = jax.numpy.asarray(x)
        jg = jax.grad(lambda v: w2_loss(jax.numpy, v))
        check("jax", jg(xj), ref)
        t = measure(lambda: jg(xj).block_until_ready(), quick)
        table.add("W2", "jax.grad (eager)", t, f"{t / tf:.2f}x forward")
        jj = jax.jit(jg)
        check("jax jit", jj(xj), ref)
        t = measure(lambda: jj(xj).block_until_ready(), quick)
        table.add("W2", "jax.jit(jax.grad)", t, f"{t / tf:.2f}x forward, compiled")
    if "autograd" in peers:
        autograd, anp = peers["autograd"]
        ag = autograd.grad(lambda v: w2_loss(anp, v))
        check("autograd", ag(x), ref)
        t = measure(lambda: ag(x), quick)
        table.add("W2", "HIPS autograd", t, f"{t / tf:.2f}x forward")


# ------------------------------------------------------------------------------ W3 Jacobian


def w3(table, peers, quick, n=512):
    rng = np.random.default_rng(0)
    W = rng.standard_normal((n, n)) / np.sqrt(n)
    b = rng.standard_normal(n)
    x = rng.standard_normal(n)

    def analytic():
        t = np.tanh(W @ x + b)
        return (1 - t * t)[:, None] * W

    ref = analytic()
    t = measure(analytic, quick)
    table.add("W3", "numpy analytic diag(1-tanh^2) W", t)
    t = measure(lambda: W @ W, quick)
    table.add("W3", "numpy one 512^3 matmul (scale)", t)
    f = lambda v: xp.tanh(W @ v + b)  # noqa: E731
    for name, jac in (
        ("polyad jacrev", pa.jacrev(f)),
        ("polyad jacfwd", pa.jacfwd(f)),
        ("polyad jit(jacrev)", pa.jit(pa.jacrev(f))),
        ("polyad jit(jacfwd)", pa.jit(pa.jacfwd(f))),
    ):
        check(name, jac(x), ref)
        table.add("W3", name, measure(lambda jac=jac: jac(x), quick), "compiled" if "jit" in name else "")
    if "torch" in peers:
        torch = peers["torch"]
        Wt, bt, xt = map(torch.from_numpy, (W, b, x))
        ft = lambda v: torch.tanh(Wt @ v + bt)  # noqa: E731
        for name, jac in (
            ("torch.func.jacrev", torch.func.jacrev(ft)),
            ("torch.func.jacfwd", torch.func.jacfwd(ft)),
        ):
            check(name, jac(xt).numpy(), ref)
            table.add("W3", name, measure(lambda jac=jac: jac(xt), quick))
    if "jax" in peers:
        jax = peers["jax"]
        jnp = jax.numpy
        Wj, bj, xj = map(jnp.asarray, (W, b, x))
        fj = lambda v: jnp.tanh(Wj @ v + bj)  # noqa: E731
        for name, jac in (
            ("jax.jacrev (eager)", jax.jacrev(fj)),
            ("jax.jacfwd (eager)", jax.jacfwd(fj)),
            ("jax.jit(jax.jacrev)", jax.jit(jax.jacrev(fj))),
            ("jax.jit(jax.jacfwd)", jax.jit(jax.jacfwd(fj))),
        ):
            check(name, jac(xj), ref)
            note = "compiled" if "jit" in name else ""
            table.add("W3", name, measure(lambda jac=jac: jac(xj).block_until_ready(), quick), note)
    if "autograd" in peers:
        autograd, anp = peers["autograd"]
        aj = autograd.jacobian(lambda v: anp.tanh(anp.dot(W, v) + b))
        check("autograd", aj(x), ref)
        table.add("W3", "HIPS autograd jacobian", measure(lambda: aj(x), quick, min_time=0.01))


# ------------------------------------------------------------------------------ W4 per-example gradients


def _mlp_params(rng):
    return (
        rng.standard_normal((784, 128)) / 28.0,
        np.zeros(128),
        rng.standard_normal((128, 10)) / np.sqrt(128),
        np.zeros(10),
    )


def mlp_loss(m, params, x, y):
    """Softmax cross-entropy of a 784-128-10 tanh MLP on one example (y one-hot)."""
    w1_, b1, w2_, b2 = params
    h = m.tanh(x @ w1_ + b1)
    z = h @ w2_ + b2
    zmax = m.max(z)
    logz = m.log(m.sum(m.exp(z - zmax))) + zmax
    return logz - m.sum(z * y)


def per_example_grads_numpy(params, X, Y):
    """The batched backward written by hand: per-example gradients of every parameter."""
    w1_, b1, w2_, b2 = params
    h = np.tanh(X @ w1_ + b1)
    z = h @ w2_ + b2
    z = z - z.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    dz = p - Y
    dw2 = h[:, :, None] * dz[:, None, :]
    dh = dz @ w2_.T
    da = dh * (1 - h * h)
    dw1 = X[:, :, None] * da[:, None, :]
    return dw1, da, dw2, dz


def w4(table, peers, quick):
    rng = np.random.default_rng(1)
    params = _mlp_params(rng)
    batch = 64 if quick else 256
    X = rng.standard_normal((batch, 784))
    Y = np.eye(10)[rng.integers(0, 10, batch)]
    ref = per_example_grads_numpy(params, X, Y)
    t_ref = measure(lambda: per_example_grads_numpy(params, X, Y), quick)
    table.add("W4", "numpy (hand-written batched backward)", t_ref)
    f = pa.vmap(pa.grad(lambda p, x, y: mlp_loss(xp, p, x, y)), in_dims=(None, 0, 0))
    for got, want in zip(f(params, X, Y), ref):
        check("polyad", got, want)
    table.add("W4", "polyad vmap(grad)", measure(lambda: f(params, X, Y), quick))
    fc = pa.jit(f)
    for got, want in zip(fc(params, X, Y), ref):
        check("polyad jit", got, want)
    table.add("W4", "polyad jit(vmap(grad))", measure(lambda: fc(params, X, Y), quick), "compiled")
    if "torch" in peers:
        torch = peers["torch"]
        pt = tuple(torch.from_numpy(p) for p in params)
        Xt, Yt = torch.from_numpy(X), torch.from_numpy(Y)
        ft = torch.func.vmap(torch.func.grad(lambda p, x, y: mlp_loss(torch, p, x, y)), in_dims=(None, 0, 0))
        for got, want in zip(ft(pt, Xt, Yt), ref):
            check("torch.func", got.numpy(), want)
        table.add("W4", "torch.func vmap(grad)", measure(lambda: ft(pt, Xt, Yt), quick))
    if "jax" in peers:
        jax = peers["jax"]
        jnp = jax.numpy
        pj = tuple(jnp.asarray(p) for p in params)
        Xj, Yj = jnp.asarray(X), jnp.asarray(Y)
        fj = jax.vmap(jax.grad(lambda p, x, y: mlp_loss(jnp, p, x, y)), in_axes=(None, 0, 0))
        for got, want in zip(fj(pj, Xj, Yj), ref):
            check("jax", got, want)
        table.add(
            "W4", "jax vmap(grad) (eager)", measure(lambda: jax.block_until_ready(fj(pj, Xj, Yj)), quick)
        )
        fjj = jax.jit(fj)
        for got, want in zip(fjj(pj, Xj, Yj), ref):
            check("jax.jit", got, want)
        t = measure(lambda: jax.block_until_ready(fjj(pj, Xj, Yj)), quick)
        table.add("W4", "jax.jit(vmap(grad))", t, "compiled")
    if "autograd" in peers:
        autograd, anp = peers["autograd"]
        ag = autograd.grad(lambda p, x, y: mlp_loss(anp, p, x, y))

        def loop():
            return [ag(params, X[i], Y[i]) for i in range(batch)]

        got = loop()
        check("autograd", np.stack([g[0] for g in got]), ref[0])
        table.add("W4", "HIPS autograd (loop)", measure(loop, quick, min_time=0.01))


# ------------------------------------------------------------------------------ W5 Hessian


def w5(table, peers, quick):
    rng = np.random.default_rng(2)
    A = rng.standard_normal((256, 256)) / 16.0
    x = rng.standard_normal(256)

    def analytic():
        s = 1 / (1 + np.exp(-(A @ x)))
        return A.T @ ((s * (1 - s))[:, None] * A)

    ref = analytic()
    table.add("W5", "numpy analytic A^T diag(s(1-s)) A", measure(analytic, quick))
    f = lambda v: xp.sum(xp.log(1 + xp.exp(A @ v)))  # noqa: E731
    h = pa.hessian(f)
    check("polyad", h(x), ref)
    table.add("W5", "polyad hessian", measure(lambda: h(x), quick))
    hj = pa.jit(h)
    check("polyad jit", hj(x), ref)
    table.add("W5", "polyad jit(hessian)", measure(lambda: hj(x), quick), "compiled")
    if "torch" in peers:
        torch = peers["torch"]
        At, xt = torch.from_numpy(A), torch.from_numpy(x)
        ht = torch.func.hessian(lambda v: torch.sum(torch.log(1 + torch.exp(At @ v))))
        check("torch", ht(xt).numpy(), ref)
        table.add("W5", "torch.func.hessian", measure(lambda: ht(xt), quick))
    if "jax" in peers:
        jax = peers["jax"]
        jnp = jax.numpy
        Aj, xj = jnp.asarray(A), jnp.asarray(x)
        hj = jax.hessian(lambda v: jnp.sum(jnp.log(1 + jnp.exp(Aj @ v))))
        check("jax", hj(xj), ref)
        table.add("W5", "jax.hessian (eager)", measure(lambda: hj(xj).block_until_ready(), quick))
        hjj = jax.jit(hj)
        check("jax jit", hjj(xj), ref)
        table.add("W5", "jax.jit(jax.hessian)", measure(lambda: hjj(xj).block_until_ready(), quick))
    if "autograd" in peers:
        autograd, anp = peers["autograd"]
        ha = autograd.hessian(lambda v: anp.sum(anp.log(1 + anp.exp(anp.dot(A, v)))))
        check("autograd", ha(x), ref)
        table.add("W5", "HIPS autograd hessian", measure(lambda: ha(x), quick, min_time=0.01))


# ------------------------------------------------------------------------------ W6 memory


_W6_CHILD = """
import sys, tracemalloc, numpy as np, polyad as pa
from polyad import xp
n, chunk = int(sys.argv[1]), sys.argv[2]
rng = np.random.default_rng(0)
W = rng.standard_normal((n, n)) / np.sqrt(n); b = rng.standard_normal(n); x = rng.standard_normal(n)
f = lambda v: xp.tanh(W @ v + b)
if chunk.startswith("auto:"):  # chunk_size="auto" with the budget after the colon
    jac = pa.jacrev(f, chunk_size="auto", max_memory=chunk[5:])
    used = jac.chunk_plan(x).chunk_size
else:
    jac = pa.jacrev(f, chunk_size=None if chunk == "None" else int(chunk))
    used = chunk
tracemalloc.start()
base = tracemalloc.get_traced_memory()[0]
J = jac(x)
peak = tracemalloc.get_traced_memory()[1] - base
t = np.tanh(W @ x + b)
assert np.allclose(J, (1 - t * t)[:, None] * W)
print(peak, J.nbytes, used)
"""


def w6(table, peers, quick):
    n = 512 if quick else 2048
    # two budgets for chunk_size="auto": 1.125x and 1.5x the Jacobian (n * n float64)
    budgets = [f"{int(n * n * 8 * k) // 2**20}MiB" if n >= 1024 else f"{int(n * n * 8 * k) // 2**10}KiB"
               for k in (1.125, 1.5)]  # fmt: skip
    for chunk in ["None", "64"] + [f"auto:{b}" for b in budgets]:
        name = f"polyad jacrev chunk_size={chunk}"
        if chunk.startswith("auto:"):
            name = f"polyad jacrev chunk_size='auto', max_memory='{chunk[5:]}'"
        r = subprocess.run([sys.executable, "-c", _W6_CHILD, str(n), chunk], capture_output=True, text=True)
        if r.returncode != 0:
            table.add("W6", name, None, "FAILED: " + r.stderr.strip()[-200:])
            continue
        peak, size, used = r.stdout.split()
        peak, size = int(peak), int(size)
        note = f"extra peak {peak / 2**20:.1f} MiB = {peak / size:.2f}x the Jacobian ({size / 2**20:.1f} MiB)"
        if chunk.startswith("auto:"):
            budget = int(chunk[5:-3]) * (2**20 if chunk.endswith("MiB") else 2**10)
            within = "within" if peak <= budget else "OVER"
            note += f"; chose chunk_size={used}, {within} the budget ({budget / 2**20:.1f} MiB)"
        table.add("W6", name, None, note)


# ------------------------------------------------------------------------------ W7 Newton


def w7(table, peers, quick):
    r = subprocess.run(
        [sys.executable, os.path.join(HERE, "demo.py"), "--n", "8" if quick else "16"],
        capture_output=True, text=True,
    )  # fmt: skip
    if r.returncode != 0:
        table.add("W7", "polyad Newton (demo)", None, "FAILED: " + r.stderr.strip()[-200:])
        return
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("Newton converged"))
    ms = float(line.split(",")[1].split("ms")[0])
    table.add("W7", "polyad Newton (demo, end to end)", ms / 1e3, line.split(";")[0])


# ------------------------------------------------------------------------------ W9 long scan


def w9(table, peers, quick):
    """W9 (issue 20): the gradient of 10^4 diffusion steps of 10^5 float64 through a checkpointed
    pa.scan, eager and under pa.jit, against jax.jit(jax.grad) of lax.scan with a checkpointed body;
    each system in a process of its own (peak RSS), by scripts/bench_loops.py."""
    systems = ["polyad", "polyad-jit"] + (["jax"] if "jax" in peers else [])
    steps = "300" if quick else "10000"
    r = subprocess.run(
        [sys.executable, os.path.join(HERE, "bench_loops.py"), "--steps", steps, "--systems", *systems],
        capture_output=True, text=True,
    )  # fmt: skip
    if r.returncode != 0:
        table.add("W9", "polyad scan (bench_loops.py)", None, "FAILED: " + r.stderr.strip()[-200:])
        return
    for line in r.stdout.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) != 6 or not cells[0].isdigit():
            continue
        _, system, seconds, first, peak, value = cells
        t = float(seconds.split()[0]) if seconds != "-" else None
        table.add("W9", f"{system}, {steps} steps", t, f"peak RSS {peak}, first call {first}, grad {value}")


# ------------------------------------------------------------------------------ W8 sparse Jacobian


def _bratu_numpy(u, lam, n):
    """The demo's residual written in NumPy (what SciPy's finite differences evaluate)."""
    h = 1.0 / (n + 1)
    p = np.pad(u.reshape(n, n), 1)
    lap = 4.0 * p[1:-1, 1:-1] - p[:-2, 1:-1] - p[2:, 1:-1] - p[1:-1, :-2] - p[1:-1, 2:]
    return lap.ravel() - (h * h * lam) * np.exp(u)


def w8(table, peers, quick):
    """The Bratu residual's Jacobian (five-point stencil) on an n x n grid, n = 64 (32 with --quick): dense
    pa.jacfwd, pa.sparse_jacfwd detecting its pattern and reusing a given one, SciPy's finite-difference
    approx_derivative with the pattern, jax.jacfwd (dense); each one's largest error against the analytic
    Jacobian in its note."""
    from demo import residual, sparse_analytic_jacobian
    from scipy.optimize._numdiff import approx_derivative

    n, lam = (32 if quick else 64), 6.0
    u = np.random.default_rng(0).uniform(0.0, 0.8, n * n)
    ref = sparse_analytic_jacobian(u, lam, n)
    ref_dense = ref.toarray()

    def f(v):
        return residual(v, lam, n)

    def err(J, exact=True):
        e = abs(J - ref).max() if hasattr(J, "tocsr") else np.abs(J - ref_dense).max()
        if exact and e > 1e-12:  # automatic differentiation: exact to rounding, else the row is wrong
            raise AssertionError(f"W8: a Jacobian differs from the analytic one by {e}")
        return f"max error {e:.1e}"

    t_f = measure(lambda: f(u), quick)
    table.add("W8", "numpy residual (one evaluation)", measure(lambda: _bratu_numpy(u, lam, n), quick))
    pattern = pa.jacobian_sparsity(f)(u)
    jac = pa.sparse_jacfwd(f, sparsity=pattern)
    k = jac.n_colors
    t = measure(lambda: jac(u), quick)
    table.add("W8", "polyad sparse_jacfwd, reused pattern", t, f"{k} colours; {err(jac(u))}")
    detecting = pa.sparse_jacfwd(f)
    t = measure(lambda: detecting(u), quick)
    table.add("W8", "polyad sparse_jacfwd, detecting", t, f"pattern found at each call; {err(detecting(u))}")
    t = measure(lambda: pa.sparse_jacfwd(f)(u), quick, min_time=0.01)
    table.add("W8", "polyad sparse_jacfwd, first call", t, "detection + DSATUR colouring + evaluation")
    t = measure(lambda: pa.jacobian_sparsity(f)(u), quick)
    table.add(
        "W8", "polyad jacobian_sparsity", t, f"{t / (k * t_f):.1f}x {k} evaluations of f ({t_f * 1e6:.0f} us)"
    )
    dense = pa.jacfwd(f)
    t = measure(lambda: dense(u), quick, min_time=0.01)
    table.add("W8", "polyad jacfwd (dense)", t, err(dense(u)))
    fd = lambda: approx_derivative(lambda v: _bratu_numpy(v, lam, n), u, sparsity=pattern)  # noqa: E731
    table.add(
        "W8",
        "scipy approx_derivative(sparsity=)",
        measure(fd, quick),
        f"finite differences; {err(fd(), exact=False)}",
    )
    if "jax" in peers:
        jax = peers["jax"]
        jnp = jax.numpy

        def fj(v):
            h = 1.0 / (n + 1)
            p = jnp.pad(v.reshape(n, n), 1)
            lap = 4.0 * p[1:-1, 1:-1] - p[:-2, 1:-1] - p[2:, 1:-1] - p[1:-1, :-2] - p[1:-1, 2:]
            return lap.ravel() - (h * h * lam) * jnp.exp(v)

        uj = jnp.asarray(u)
        for name, jf in (
            ("jax.jacfwd (dense, eager)", jax.jacfwd(fj)),
            ("jax.jit(jax.jacfwd) (dense)", None),
        ):
            jf = jf if jf is not None else jax.jit(jax.jacfwd(fj))
            J = np.asarray(jf(uj))
            table.add(
                "W8", name, measure(lambda jf=jf: jf(uj).block_until_ready(), quick, min_time=0.01), err(J)
            )


WORKLOADS = {"W1": w1, "W2": w2, "W3": w3, "W4": w4, "W5": w5, "W6": w6, "W7": w7, "W8": w8, "W9": w9}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer repeats (< 1 minute)")
    parser.add_argument("--workload", action="append", choices=sorted(WORKLOADS), help="run only these")
    parser.add_argument("--out", default="bench-results", help="directory for results.json and bench.png")
    args = parser.parse_args()
    peers = _peers()
    versions = {"polyad": pa.__version__, "numpy": np.__version__}
    for name, mod in peers.items():
        mod = mod[0] if isinstance(mod, tuple) else mod
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = getattr(mod, "__version__", "?")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    print(f"backend: {pa.get_backend()}; peers importable: {', '.join(peers) or 'none'}")
    table = Table()
    for name in args.workload or sorted(WORKLOADS):
        print(f"\n{name}", flush=True)
        WORKLOADS[name](table, peers, args.quick)
    summary = _summary(table)
    print("\n" + summary)
    targets = _jit_targets(table)
    print("\n" + targets)
    summary += "\n\n" + targets
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "results.json"), "w") as fh:
        json.dump({"versions": versions, "quick": args.quick, "rows": table.rows}, fh, indent=1)
    with open(os.path.join(args.out, "table.md"), "w") as fh:
        fh.write(summary + "\n")
    _chart(table, os.path.join(args.out, "bench.png"))


def _summary(table):
    """A markdown table: each system's median and its ratio to polyad and to the NumPy reference."""
    lines = ["| workload | system | median | vs polyad | vs numpy | note |", "|---|---|---|---|---|---|"]
    by_w = {}
    for r in table.rows:
        by_w.setdefault(r["workload"], []).append(r)
    for w, rows in by_w.items():
        ref = next((r["seconds"] for r in rows if r["system"].startswith("numpy") and r["seconds"]), None)
        ours = [r["seconds"] for r in rows if r["system"].startswith("polyad") and r["seconds"]]
        base = ours[0] if ours else None
        for r in rows:
            s = r["seconds"]
            vs_p = f"{s / base:.2f}x" if s and base else ""
            vs_n = f"{s / ref:.2f}x" if s and ref else ""
            lines.append(f"| {w} | {r['system']} | {_fmt(s)} | {vs_p} | {vs_n} | {r['note']} |")
    return "\n".join(lines)


# issue 13 (pa.jit): (workload, what, system, reference system, target ratio), same-run ratios
JIT_TARGETS = [
    ("W1", "pa.jit(grad) vs jax.jit(grad)", "polyad jit(grad)", "jax.jit(jax.grad)", 1.5),
    ("W2", "pa.jit(grad) vs jax.jit(grad)", "polyad jit(grad)", "jax.jit(jax.grad)", 1.25),
    ("W5", "pa.jit(hessian) vs jax.jit(hessian)", "polyad jit(hessian)", "jax.jit(jax.hessian)", 1.5),
    ("W2", "eager grad vs hand-written", "polyad grad", "numpy (hand-written gradient)", 1.05),
    ("W5", "eager hessian vs analytic", "polyad hessian", "numpy analytic A^T diag(s(1-s)) A", 2.0),
]


def _jit_targets(table):
    """A markdown table of issue 13's targets, each with this run's ratio (or '-' where a row is
    missing: a peer not installed, a workload not run)."""
    seconds = {(r["workload"], r["system"]): r["seconds"] for r in table.rows}
    lines = ["| workload | target | ratio this run | met |", "|---|---|---|---|"]
    for w, what, ours, theirs, target in JIT_TARGETS:
        a, b = seconds.get((w, ours)), seconds.get((w, theirs))
        ratio = a / b if a and b else None
        met = "-" if ratio is None else "yes" if ratio <= target else "no"
        shown = "-" if ratio is None else f"{ratio:.2f}x"
        lines.append(f"| {w} | {what} <= {target}x | {shown} | {met} |")
    note = next(
        (r["note"] for r in table.rows if r["system"] == "polyad jit(grad)" and r["workload"] == "W1"), ""
    )
    if "first call" in note:
        first = note.split("first call (trace + run) ")[1]
        lines.append(f"| W1 | first call of pa.jit(grad) < 1 s (bench_first_call.py) | {first} | |")
    return "\n".join(lines)


def _chart(table, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception:
        print("(matplotlib not importable: no chart)")
        return
    rows = [r for r in table.rows if r["seconds"]]
    workloads = sorted({r["workload"] for r in rows})
    ncols = min(3, len(workloads))
    nrows = -(-len(workloads) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(6 * ncols, 3.6 * nrows), squeeze=False)
    axes = axes.ravel()
    for ax in axes[len(workloads) :]:
        ax.axis("off")
    for ax, w in zip(axes, workloads):
        rs = [r for r in rows if r["workload"] == w]
        colors = ["tab:red" if r["system"].startswith("polyad") else "tab:gray" for r in rs]
        ax.barh([r["system"] for r in rs], [r["seconds"] * 1e3 for r in rs], color=colors)
        ax.set_xscale("log")
        ax.set_title(w)
        ax.set_xlabel("ms (log)")
        ax.tick_params(axis="y", labelsize=8)
    fig.suptitle("polyad (red) and peers: median time per call, float64, log scale")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    print(f"chart: {path}")


if __name__ == "__main__":
    main()
