"""How often a loop's body and a checkpointed function run, read by a Python counter in them (how a user
checks a schedule and budgets an expensive body), against the counts README's loop section and
docs/api/control.rst state (issue 33). The expected counts come from Revolve's formula written here from
its definition (``p(l, s) = r l - C(s + r, s + 1)``, ``r`` the least with ``C(s + r, s) >= l``), not
from polyad's schedules."""

import math

import pytest
from helpers import assert_close

import polyad as pa
from polyad import xp

L = 12
ONE = xp.asarray(1.0, dtype=xp.float64)


def num(v):
    return xp.asarray(v, dtype=xp.float64)


def advances(length, slots):
    """Revolve's untaped body runs reversing ``length`` steps with ``slots`` stored states."""
    slots = min(slots, length)
    if slots >= length - 1:
        return length - 1  # every state stored: the primal sweep's advances only
    r = 0
    while math.comb(slots + r, slots) < length:
        r += 1
    return r * length - math.comb(slots + r, slots + 1)


def sqrt_slots(length):
    """The fewest slots for at most two sweeps: the least s with C(s + 2, 2) >= length."""
    s = 1
    while math.comb(s + 2, 2) < length:
        s += 1
    return s


def grad_count(length, checkpoints):
    """The body runs under grad: the abstract trace, then the turns and the advances."""
    if checkpoints is None:
        return 1 + length
    slots = sqrt_slots(length) if checkpoints == "sqrt" else checkpoints
    return 1 + length + advances(length, slots)


def _loop(kind, checkpoints, calls):
    def body(c, x):
        calls[0] += 1
        return xp.sin(c) * 0.9 + x, None

    def f(a):
        if kind == "scan":
            return pa.scan(body, a, xp.linspace(0.0, 1.0, L) * a, checkpoints=checkpoints)[0]
        return pa.fori_loop(0, L, lambda i, c: body(c, a * 0.1)[0], a, checkpoints=checkpoints)

    return f


def _counted(g, x, calls):
    calls[0] = 0
    out = g(x)
    return calls[0], out


TRANSFORMS = {
    "grad": pa.grad,
    "jvp": lambda f: lambda a: pa.jvp(f, (a,), (ONE,))[1],
    "vmap": lambda f: lambda a: pa.vmap(f)(xp.stack([a, a * 0.5])),
    "vmap_grad": lambda f: lambda a: pa.vmap(pa.grad(f))(xp.stack([a, a * 0.5])),
    "linearize": lambda f: lambda a: pa.linearize(f, a)[1](ONE),
}


@pytest.mark.parametrize("kind", ["scan", "fori_loop"])
@pytest.mark.parametrize("checkpoints", [None, 1, 3, "sqrt"])
def test_a_loops_body_runs_as_often_as_documented(kind, checkpoints):
    calls = [0]
    f = _loop(kind, checkpoints, calls)
    a = num(0.7)
    assert _counted(f, a, calls)[0] == L  # eagerly: once per step, nothing traced
    expected = {
        "grad": grad_count(L, checkpoints),  # main: one more (the first turn's step ran twice)
        "vmap_grad": grad_count(L, checkpoints),
        "jvp": 1 + L,
        "vmap": 1 + L,
        "linearize": 1 + L + L,  # the trace and the primal pass, then L at each call of jvp_fn
    }
    for name, transform in TRANSFORMS.items():
        count, _ = _counted(transform(f), a, calls)
        assert count == expected[name], (name, count, expected[name])
    # the derivative is the unrolled loop's whatever the schedule
    ref = pa.grad(_loop(kind, None, [0]))(a)
    assert abs(float(pa.grad(f)(a)) - float(ref)) < 1e-12


def test_a_vjp_function_called_twice_pays_the_reverse_sweep_each_time():
    calls = [0]
    f = _loop("scan", 3, calls)
    calls[0] = 0
    _, vjp_fn = pa.vjp(f, num(0.7))
    assert calls[0] == 1 + L  # the trace, L - 1 untaped steps and the last one recorded
    first = _counted(lambda c: vjp_fn(c)[0], ONE, calls)
    second = _counted(lambda c: vjp_fn(c)[0], ONE, calls)
    # the rest of Revolve's advances, and every turn but the first (recorded in the primal pass)
    assert first[0] == advances(L, 3) - (L - 1) + (L - 1)
    # the second call turns the last step again: its recording was kept for it
    assert second[0] == first[0] and float(first[1]) == float(second[1])


@pytest.mark.parametrize("checkpoints", [None, 3])
def test_a_jitted_loop_traces_on_its_first_call_and_runs_compiled_after(checkpoints):
    calls = [0]
    g = pa.jit(pa.grad(_loop("scan", checkpoints, calls)))
    a = num(0.7)
    # the body traced once abstractly, then its step and pullback traced once for compilation
    assert _counted(g, a, calls)[0] == 2
    count, value = _counted(g, num(0.6), calls)
    assert count == 0  # compiled code runs the steps: the Python body is not called
    assert abs(float(value) - float(pa.grad(_loop("scan", None, [0]))(num(0.6)))) < 1e-12
    h = pa.jit(_loop("scan", checkpoints, calls))
    assert _counted(h, a, calls)[0] == 1 and _counted(h, a, calls)[0] == 0


def _checkpointed(calls):
    def inner(x):
        calls[0] += 1
        return xp.sin(x) * xp.cos(x)

    return pa.checkpoint(inner)


@pytest.mark.parametrize(
    "name,expected",
    [("grad", 2), ("jvp", 2), ("vmap", 2), ("vmap_grad", 2), ("linearize", 2)],
)
def test_a_checkpointed_function_runs_as_often_as_documented(name, expected):
    # grad: the abstract trace and the backward pass's recomputation (the primal pass replays the trace's
    # graph; main called f a third time there); jvp, vmap: the trace and the transformed run; linearize:
    # the trace, then once per call of jvp_fn
    calls = [0]
    cf = _checkpointed(calls)
    f = lambda x: xp.sin(cf(x)) * x  # noqa: E731
    a = num(0.8)
    assert _counted(cf, a, calls)[0] == 1
    count, value = _counted(TRANSFORMS[name](f), a, calls)
    assert count == expected
    plain = lambda x: xp.sin(xp.sin(x) * xp.cos(x)) * x  # noqa: E731
    reference = {
        "grad": pa.grad(plain)(a),
        "jvp": pa.jvp(plain, (a,), (ONE,))[1],
        "vmap": pa.vmap(plain)(xp.stack([a, a * 0.5])),
        "vmap_grad": pa.vmap(pa.grad(plain))(xp.stack([a, a * 0.5])),
        "linearize": pa.jvp(plain, (a,), (ONE,))[1],
    }[name]
    assert_close(value, reference, rtol=1e-13, atol=1e-15)


def test_a_jitted_checkpoint_traces_on_its_first_call_only():
    calls = [0]
    cf = _checkpointed(calls)
    g = pa.jit(pa.grad(lambda x: xp.sin(cf(x)) * x))
    assert _counted(g, num(0.8), calls)[0] == 2  # the trace and the backward pass's, traced
    count, value = _counted(g, num(0.3), calls)
    assert count == 0
    expected = pa.grad(lambda x: xp.sin(xp.sin(x) * xp.cos(x)) * x)(num(0.3))
    assert abs(float(value) - float(expected)) < 1e-13
