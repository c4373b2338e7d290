"""Per-kernel profile of eager W2 (grad) and W5 (hessian): every backend call, its op, time and bytes.

    python scripts/profile_eager.py [--workload W2|W5] [--n 4000000]

Wraps ``core.eval_raw`` (and the copies the interpreters imported) so each kernel call is counted with
the bytes of the array it returns (a broadcast view counts 0: it allocates nothing). NumPy operators on
raw arrays inside rules (``g * d``) bypass it: ``--rules`` times each vjp/jvp rule whole instead.
"""

import argparse
import time

import numpy as np

import polyad as pa
from polyad import core, xp
from polyad.transforms import forward, reverse

STATS = {}


def _nbytes(out):
    if isinstance(out, tuple):
        return sum(_nbytes(o) for o in out)
    base = out
    while getattr(base, "base", None) is not None:  # a view allocates nothing
        return 0
    return getattr(base, "nbytes", 0)


def _wrap(fn):
    def wrapped(op, args, params):
        t = time.perf_counter()
        out = fn(op, args, params)
        dt = time.perf_counter() - t
        raw = out._value if isinstance(out, core.Tensor) else out
        s = STATS.setdefault(op.name, [0, 0.0, 0])
        s[0] += 1
        s[1] += dt
        s[2] += _nbytes(raw)
        return out

    return wrapped


def _timed(name, fn, *args, **params):
    t = time.perf_counter()
    out = fn(*args, **params)
    s = STATS.setdefault(name, [0, 0.0, 0])
    s[0] += 1
    s[1] += time.perf_counter() - t
    return out


def _wrap_rule(name, rule):
    def wrapped(*args, **params):
        out = _timed(name, rule, *args, **params)
        if isinstance(out, tuple):  # lazily given cotangents count when the backward pass runs them
            out = tuple(_lazy(name, o) if callable(o) else o for o in out)
        return out

    if hasattr(rule, "ones"):  # reverse mode's rule for an all-ones cotangent (polyad.ops.base)
        wrapped.ones = _wrap_rule(name + " (ones)", rule.ones)
    return wrapped


def _lazy(name, thunk):
    return lambda: _timed(name, thunk)


def install(rules):
    w_raw = _wrap(core.eval_raw)
    core.eval_raw = w_raw
    reverse.eval_raw = w_raw
    forward.eval_raw = w_raw
    if rules:  # whole rules, inclusive (NumPy operators inside them bypass eval_raw)
        for op in core.OPS.values():
            for kind in ("vjp", "jvp"):
                r = op.rules.get(kind)
                if r is not None:
                    op.rules[kind] = _wrap_rule(f"{kind}:{op.name}", r)


def report(title, calls):
    print(f"{title}: per call")
    total_t = total_b = total_n = 0
    for name, (n, t, b) in sorted(STATS.items(), key=lambda kv: -kv[1][1]):
        print(f"  {name:20s} {n / calls:6.1f} calls {t / calls * 1e3:8.3f} ms {b / calls / 2**20:9.2f} MiB")
        total_n += n
        total_t += t
        total_b += b
    print(
        f"  {'total':20s} {total_n / calls:6.1f} calls {total_t / calls * 1e3:8.3f} ms "
        f"{total_b / calls / 2**20:9.2f} MiB"
    )
    STATS.clear()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--workload", default="W2")
    p.add_argument("--n", type=int, default=None)
    p.add_argument("--rules", action="store_true", help="time whole vjp/jvp rules (inclusive)")
    a = p.parse_args()
    install(a.rules)
    if a.workload == "W2":
        x = np.linspace(-3, 3, a.n or 4_000_000)
        g = pa.grad(lambda v: xp.sum(xp.sin(v) * xp.exp(-(v**2)) + xp.tanh(v)))
        g(x)
        STATS.clear()
        calls = 5
        for _ in range(calls):
            g(x)
        report("W2 grad", calls)
    else:
        n = a.n or 256
        rng = np.random.default_rng(2)
        A = rng.standard_normal((n, n)) / 16.0
        x = rng.standard_normal(n)
        h = pa.hessian(lambda v: xp.sum(xp.log(1 + xp.exp(A @ v))))
        h(x)
        STATS.clear()
        calls = 20
        for _ in range(calls):
            h(x)
        report("W5 hessian", calls)


if __name__ == "__main__":
    main()
