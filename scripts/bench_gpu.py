"""GPU workloads G1-G7 (BENCHMARKS.md): polyad eager and ``pa.jit`` against torch.func and ``jax.jit``.

    POLYAD_BACKEND=cupy python scripts/bench_gpu.py [--quick] [--workload G2] [--budget 8]
    POLYAD_BACKEND=cupy python scripts/bench_gpu.py --workload G6s   # not in the default run

G6s (issue 34's per-step table) times ``pa.jit(pa.grad)`` of a 200-step checkpointed scan of the diffusion
step per step at n = 10^4, 10^6, 10^7 against ``jax.jit(jax.grad(lax.scan(jax.checkpoint(step))))``, and
the forward scan alone under ``pa.jit`` at 10^6 (target: at most 12 µs a step), each with
``$POLYAD_CUDA_GRAPHS`` unset and "1" (read at each call: the script switches it between rows).

Needs CuPy and a CUDA GPU; torch and JAX rows appear where those import with a GPU. Float64 throughout.
Each system warms up, then the median of timed calls is reported (the device synchronised around each
call); every system's result is checked against polyad's eager result, so the rows time one computation.
A system that raises prints its error in its cell and the table goes on: this script is also the GPU
check's smoke test (scripts/gpu_check.sh). ``--budget`` caps the seconds spent timing one cell.
"""

import argparse
import functools
import statistics
import sys
import time
import traceback

import numpy as np

import polyad as pa
from polyad import xp


def _peers():
    peers = {}
    try:
        import torch

        if torch.cuda.is_available():
            peers["torch"] = torch
    except Exception:
        pass
    try:
        import jax

        jax.config.update("jax_enable_x64", True)
        if any(d.platform == "gpu" for d in jax.devices()):
            peers["jax"] = jax
    except Exception:
        pass
    return peers


def _sync():
    import cupy

    cupy.cuda.Device().synchronize()


def _host(v):
    if hasattr(v, "get"):
        return v.get()
    if hasattr(v, "detach"):
        return v.detach().cpu().numpy()
    if hasattr(v, "toarray"):
        return _host(v.toarray())
    return np.asarray(v)


def timeit(fn, sync, budget, repeats=30):
    fn()
    sync()
    fn()
    sync()
    times = []
    start = time.perf_counter()
    while len(times) < repeats and time.perf_counter() - start < budget:
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), len(times)


# ------------------------------------------------------------------------------ workloads
# Each returns (inputs as NumPy, {system: callable(inputs on that system) -> result}).


def g1(quick):
    n = 512 if quick else 2048
    rng = np.random.default_rng(0)
    W, b, x = rng.standard_normal((n, n)) / np.sqrt(n), rng.standard_normal(n), rng.standard_normal(n)

    def f_pa(x, W, b):
        return xp.tanh(W @ x + b)

    systems = {"polyad": lambda W, b, x: pa.jacrev(f_pa)(x, W, b)}
    jitted = pa.jit(pa.jacrev(f_pa))
    systems["pa.jit"] = lambda W, b, x: jitted(x, W, b)
    systems["torch.func"] = lambda W, b, x: _torch_func().jacrev(lambda x: _torch().tanh(W @ x + b))(x)
    systems["jax.jit"] = lambda W, b, x: _jax_jit("G1", lambda x, W, b: _jnp().tanh(W @ x + b), "jacrev")(
        x, W, b
    )
    return (W, b, x), systems


def _bratu(xpm, u, n, lam=6.0):
    h = 1.0 / (n + 1)
    g = xpm.reshape(u, (n, n))
    zr = xpm.zeros((1, n), dtype=u.dtype)
    zc = xpm.zeros((n + 2, 1), dtype=u.dtype)
    p = xpm.concat([zc, xpm.concat([zr, g, zr], axis=0), zc], axis=1)
    lap = 4.0 * p[1:-1, 1:-1] - p[:-2, 1:-1] - p[2:, 1:-1] - p[1:-1, :-2] - p[1:-1, 2:]
    return xpm.reshape(lap - h * h * lam * xpm.exp(g), (n * n,))


def g2(quick):
    n = 32 if quick else 96
    u = np.random.default_rng(1).uniform(0, 0.1, n * n)
    f = lambda u: _bratu(xp, u, n)  # noqa: E731
    pattern = {}

    def sparse(u):
        if "p" not in pattern:
            pattern["p"] = pa.jacobian_sparsity(f)(u)
        return pa.sparse_jacfwd(f, sparsity=pattern["p"])(u)

    systems = {"polyad": lambda u: pa.jacfwd(f)(u), "sparse_jacfwd": sparse}
    jitted = pa.jit(pa.jacfwd(f))
    systems["pa.jit"] = lambda u: jitted(u)
    systems["torch.func"] = lambda u: _torch_func().jacfwd(lambda u: _bratu_torch(u, n))(u)
    systems["jax.jit"] = lambda u: _jax_jit("G2", lambda u: _bratu(_jnp(), u, n), "jacfwd")(u)
    return (u,), systems


def _bratu_torch(u, n, lam=6.0):
    torch = _torch()
    h = 1.0 / (n + 1)
    p = torch.nn.functional.pad(u.reshape(n, n), (1, 1, 1, 1))
    lap = 4.0 * p[1:-1, 1:-1] - p[:-2, 1:-1] - p[2:, 1:-1] - p[1:-1, :-2] - p[1:-1, 2:]
    return (lap - h * h * lam * torch.exp(u.reshape(n, n))).reshape(n * n)


def g3(quick):
    batch = 1024 if quick else 8192
    rng = np.random.default_rng(2)
    W1, b1 = rng.standard_normal((64, 256)) / 8, rng.standard_normal(256)
    W2, b2 = rng.standard_normal((256, 1)) / 16, rng.standard_normal(1)
    X, Y = rng.standard_normal((batch, 64)), rng.standard_normal(batch)

    def loss(W1, b1, W2, b2, x, y, m):
        h = m.tanh(x @ W1 + b1)
        return m.sum((h @ W2 + b2 - y) ** 2)

    dims = (None, 0, 0, None, None, None)
    per_example = pa.vmap(pa.grad(lambda W1, x, y, b1, W2, b2: loss(W1, b1, W2, b2, x, y, xp)), dims)
    jitted = pa.jit(per_example)
    systems = {"polyad": lambda W1, b1, W2, b2, X, Y: per_example(W1, X, Y, b1, W2, b2)}
    systems["pa.jit"] = lambda W1, b1, W2, b2, X, Y: jitted(W1, X, Y, b1, W2, b2)

    def torch_run(W1, b1, W2, b2, X, Y):
        tf, torch = _torch_func(), _torch()
        g = tf.grad(lambda W1, x, y: loss(W1, b1, W2, b2, x, y, torch))
        return tf.vmap(g, (None, 0, 0))(W1, X, Y)

    systems["torch.func"] = torch_run

    def jax_run(W1, b1, W2, b2, X, Y):
        if "G3" not in _JAX_CACHE:
            jax = _jax()
            g = jax.grad(lambda W1, x, y, b1, W2, b2: loss(W1, b1, W2, b2, x, y, _jnp()))
            _JAX_CACHE["G3"] = jax.jit(jax.vmap(g, dims))
        return _JAX_CACHE["G3"](W1, X, Y, b1, W2, b2)

    systems["jax.jit"] = jax_run
    return (W1, b1, W2, b2, X, Y), systems


def g4(quick):
    n = 256 if quick else 1024
    rng = np.random.default_rng(3)
    A = rng.standard_normal((4 * n, n)) / np.sqrt(n)
    y = (rng.uniform(size=4 * n) < 0.5).astype(np.float64)
    w = rng.standard_normal(n) * 0.1

    def nll(w, A, y, m):
        z = A @ w
        return m.sum(m.log(1.0 + m.exp(z)) - y * z)

    systems = {"polyad": lambda A, y, w: pa.hessian(nll)(w, A, y, xp)}
    jitted = pa.jit(pa.hessian(lambda w, A, y: nll(w, A, y, xp)))
    systems["pa.jit"] = lambda A, y, w: jitted(w, A, y)
    systems["torch.func"] = lambda A, y, w: _torch_func().hessian(lambda w: nll(w, A, y, _torch()))(w)
    systems["jax.jit"] = lambda A, y, w: _jax_jit("G4", lambda w, A, y: nll(w, A, y, _jnp()), "hessian")(
        w, A, y
    )
    return (A, y, w), systems


def g5(quick):
    n = 4_000_000 if quick else 40_000_000
    x = np.random.default_rng(4).standard_normal(n)

    def f(x, m):
        return m.sum(m.sin(x) * m.exp(-x * x) + m.tanh(x))

    def by_hand(x):
        import cupy

        e = cupy.exp(-x * x)
        t = cupy.tanh(x)
        return cupy.cos(x) * e - 2 * x * cupy.sin(x) * e + (1 - t * t)

    systems = {"hand-written": by_hand, "polyad": lambda x: pa.grad(f)(x, xp)}
    jitted = pa.jit(pa.grad(lambda x: f(x, xp)))
    systems["pa.jit"] = lambda x: jitted(x)
    systems["torch.func"] = lambda x: _torch_func().grad(lambda x: f(x, _torch()))(x)
    systems["jax.jit"] = lambda x: _jax_jit("G5", lambda x: f(x, _jnp()), "grad")(x)
    return (x,), systems


def _diffusion_step(m, roll):
    def step(u, k):
        return u + k * 0.2 * (roll(u, 1) - 2.0 * u + roll(u, -1)) - 0.01 * u * u * u

    return step


def g6(quick):
    n, steps = (10_000, 100) if quick else (1_000_000, 1000)
    u0 = np.sin(np.linspace(0, 2 * np.pi, n))
    k = np.asarray(0.5)
    step = _diffusion_step(xp, lambda u, s: xp.roll(u, s))

    def loss(k, u0):
        u, _ = pa.scan(lambda u, _: (step(u, k), None), u0, length=steps, checkpoints="sqrt")
        return xp.sum(u * u)

    systems = {"polyad": lambda u0, k: pa.grad(loss)(k, u0)}
    jitted = pa.jit(pa.grad(loss))
    systems["pa.jit"] = lambda u0, k: jitted(k, u0)

    def torch_run(u0, k):
        torch = _torch()
        st = _diffusion_step(torch, lambda u, s: torch.roll(u, s))

        def f(k):
            u = u0
            for _ in range(steps):
                u = st(u, k)
            return torch.sum(u * u)

        return _torch_func().grad(f)(k)

    systems["torch.func"] = torch_run

    def jax_run(u0, k):
        if "G6" not in _JAX_CACHE:
            jax, jnp = _jax(), _jnp()
            st = jax.checkpoint(_diffusion_step(jnp, lambda u, s: jnp.roll(u, s)))

            def f(k, u0):
                u, _ = jax.lax.scan(lambda u, _: (st(u, k), None), u0, length=steps)
                return jnp.sum(u * u)

            _JAX_CACHE["G6"] = jax.jit(jax.grad(f))
        return _JAX_CACHE["G6"](k, u0)

    systems["jax.jit"] = jax_run
    return (u0, k), systems


def g7(quick):
    x = np.random.default_rng(7).uniform(0.5, 1.0, 8)

    def chain(x, m):
        for i in range(25):  # 8 ops a step
            x = m.sin(x) * 0.5 + m.cos(x) * 0.25 + x * 0.5 + 0.01 * i
        return m.sum(x)

    systems = {"polyad": lambda x: pa.grad(chain)(x, xp)}
    jitted = pa.jit(pa.grad(lambda x: chain(x, xp)))
    systems["pa.jit"] = lambda x: jitted(x)
    systems["torch.func"] = lambda x: _torch_func().grad(lambda x: chain(x, _torch()))(x)
    systems["jax.jit"] = lambda x: _jax_jit("G7", lambda x: chain(x, _jnp()), "grad")(x)
    return (x,), systems


def g6s(quick, budget):
    """Issue 34's per-step table (see the module docstring); returns the number of failed or mismatched
    rows."""
    import os

    import cupy

    steps, failures = 200, 0
    step = _diffusion_step(xp, lambda u, s: xp.roll(u, s))

    def loss(k, u0):
        u, _ = pa.scan(lambda u, _: (step(u, k), None), u0, length=steps, checkpoints="sqrt")
        return xp.sum(u * u)

    def forward(k, u0):
        u, _ = pa.scan(lambda u, _: (step(u, k), None), u0, length=steps)
        return u  # no reduction after the loop: the forward steps alone

    def row(label, fn, args, sync, reference):
        nonlocal failures
        try:
            t, count = timeit(functools.partial(fn, *args), sync, budget)
            value = _host(fn(*args))
            if reference is None:
                reference, check = value, "reference"
            else:
                err = np.max(np.abs(value - reference)) / (np.max(np.abs(reference)) or 1.0)
                check = f"rel err {err:.1e}" + ("" if err < 1e-8 else "  MISMATCH")
                failures += err >= 1e-8
            print(f"  {label:34s} {t / steps * 1e6:10.2f} us/step  (median of {count})  {check}", flush=True)
        except Exception as exc:  # a row's failure is data
            failures += 1
            msg = "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()[-1]
            print(f"  {label:34s} FAILED {msg[:300]}", flush=True)
        return reference

    before = os.environ.get("POLYAD_CUDA_GRAPHS")
    cases = [(n, "grad") for n in ((10_000, 100_000) if quick else (10_000, 1_000_000, 10_000_000))]
    cases.append((100_000 if quick else 1_000_000, "forward"))
    try:
        for n, what in cases:
            print(f"  n = {n}, {steps} steps, {what}", flush=True)
            u0 = np.sin(np.linspace(0, 2 * np.pi, n))
            args = (cupy.asarray(0.5), cupy.asarray(u0))
            jitted = pa.jit(pa.grad(loss) if what == "grad" else forward)
            reference = None
            for setting in (None, "1"):
                if setting is None:
                    os.environ.pop("POLYAD_CUDA_GRAPHS", None)
                else:
                    os.environ["POLYAD_CUDA_GRAPHS"] = setting
                label = f"pa.jit({what}) POLYAD_CUDA_GRAPHS={setting or 'unset'}"
                reference = row(label, jitted, args, _sync, reference)
            if "jax" in _PEERS:
                jax = _jax()
                device = jax.devices("gpu")[0]
                jargs = (jax.device_put(np.asarray(0.5), device), jax.device_put(u0, device))
                row(f"jax.jit({what})", _g6s_jax(what, steps), jargs, _sync, reference)  # device-wide sync
    finally:
        if before is None:
            os.environ.pop("POLYAD_CUDA_GRAPHS", None)
        else:
            os.environ["POLYAD_CUDA_GRAPHS"] = before
    return failures


def _g6s_jax(what, steps):
    """G6s's JAX row: ``jax.jit(jax.grad(...))`` of the scan of the checkpointed step, or the forward."""
    jax, jnp = _jax(), _jnp()
    st = _diffusion_step(jnp, lambda u, s: jnp.roll(u, s))
    checkpointed = jax.checkpoint(st)

    def loss(k, u0):
        u, _ = jax.lax.scan(lambda u, _: (checkpointed(u, k), None), u0, length=steps)
        return jnp.sum(u * u)

    def forward(k, u0):
        return jax.lax.scan(lambda u, _: (st(u, k), None), u0, length=steps)[0]

    return jax.jit(jax.grad(loss) if what == "grad" else forward)


WORKLOADS = {
    "G1": ("jacrev of tanh(W @ x + b)", g1),
    "G2": ("jacfwd of the 2-D Bratu residual", g2),
    "G3": ("per-example gradients, MLP 64-256-1", g3),
    "G4": ("hessian of a logistic log-likelihood", g4),
    "G5": ("grad of sum(sin(x) exp(-x^2) + tanh(x))", g5),
    "G6": ("grad through a checkpointed scan of diffusion steps", g6),
    "G7": ("grad of a 200-op elementwise chain on 8 elements", g7),
}


# ------------------------------------------------------------------------------ peers' plumbing

_PEERS = {}
_JAX_CACHE = {}


def _torch():
    return _PEERS["torch"]


def _torch_func():
    import torch.func

    return torch.func


def _jax():
    return _PEERS["jax"]


def _jnp():
    import jax.numpy as jnp

    return jnp


def _jax_jit(key, f, how):
    if key not in _JAX_CACHE:
        jax = _jax()
        transform = {"grad": jax.grad, "jacrev": jax.jacrev, "jacfwd": jax.jacfwd, "hessian": jax.hessian}
        _JAX_CACHE[key] = jax.jit(transform[how](f))
    return _JAX_CACHE[key]


def _inputs_for(system, inputs):
    if system in ("torch.func",):
        torch = _torch()
        return tuple(torch.asarray(a, device="cuda") for a in inputs)
    if system == "jax.jit":
        jax = _jax()
        return tuple(jax.device_put(a, jax.devices("gpu")[0]) for a in inputs)
    import cupy

    return tuple(cupy.asarray(a) for a in inputs)


def _sync_for(system):
    if system == "torch.func":
        return _torch().cuda.synchronize
    return _sync


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    parser.add_argument("--workload", action="append", help="G1..G7, G6s (repeatable); default G1..G7")
    parser.add_argument("--budget", type=float, default=4.0, help="seconds of timing per cell")
    args = parser.parse_args(argv)
    if pa.get_backend() != "cupy":
        sys.exit("bench_gpu.py needs POLYAD_BACKEND=cupy (CuPy and a CUDA GPU)")
    _PEERS.update(_peers())
    print(f"peers with a GPU: {sorted(_PEERS) or 'none'}", flush=True)
    failures = 0
    for name in args.workload or list(WORKLOADS):
        if name == "G6s":
            print(
                "\nG6s per step: grad through a 200-step checkpointed scan, CUDA graphs off and on",
                flush=True,
            )
            failures += g6s(args.quick, args.budget)
            continue
        title, make = WORKLOADS[name]
        inputs, systems = make(args.quick)
        print(f"\n{name} {title}", flush=True)
        reference = None
        for system, fn in systems.items():
            if system in ("torch.func", "jax.jit") and system.split(".")[0] not in _PEERS:
                continue
            args_sys = _inputs_for(system, inputs)
            try:
                t, count = timeit(functools.partial(fn, *args_sys), _sync_for(system), args.budget)
                value = _host(fn(*args_sys))
                if reference is None:
                    reference, check = value, "reference"
                else:
                    err = np.max(np.abs(value.reshape(reference.shape) - reference)) / (
                        np.max(np.abs(reference)) or 1.0
                    )
                    check = f"rel err {err:.1e}" + ("" if err < 1e-8 else "  MISMATCH")
                    failures += err >= 1e-8
                print(f"  {system:14s} {t * 1e3:10.3f} ms  (median of {count})  {check}", flush=True)
            except Exception as exc:  # a row's failure is data: print it and go on
                failures += 1
                msg = "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()[-1]
                print(f"  {system:14s} FAILED {msg[:300]}", flush=True)
    print(f"\nbench_gpu: {failures} failed or mismatched cells", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
