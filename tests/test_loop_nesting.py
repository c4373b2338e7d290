"""Random nestings of the loop constructs under random stacks of transforms, against the same program
written as plain Python loops and branches (issue 33): a seeded generator of programs (scan, fori_loop,
while_loop, cond, map, checkpoint, with pytree carries and random checkpointing schedules), each run
under one stack of transforms (grad, jvp, vmap, jit, linearize, jacrev, hessian and their compositions)
and compared with the same stack applied to the unrolled program. ``make test`` runs ``N_PROGRAMS``;
``-m slow`` runs many more."""

import random

import numpy as np
import pytest
from helpers import assert_close, to_numpy

import polyad as pa
from polyad import xp
from polyad.core import dispatch

N_PROGRAMS = 60
N_SLOW = 600
LEAVES = ("sin", "tanh", "scale", "shift", "square")


def _arr(values):
    bxp = dispatch.default_backend().xp
    return bxp.asarray(np.asarray(values, dtype=np.float64).tolist(), dtype=bxp.float64)


def _leaf(kind, v, k):
    if kind == "sin":
        return xp.sin(v) * 0.9 + 0.05 * k
    if kind == "tanh":
        return xp.tanh(v + 0.1 * k)
    if kind == "scale":
        return v * (0.8 + 0.03 * k)
    if kind == "shift":
        return v + xp.sum(v) * 0.1 - 0.02 * k
    return v * v * 0.3 + v * 0.5


def _program(rng, depth):
    """A random program: a tree of (construct, children...) whose leaves are element-wise steps."""
    if depth == 0 or rng.random() < 0.3:
        return ("leaf", rng.choice(LEAVES), rng.randint(0, 5))
    kind = rng.choice(["scan", "scan_pair", "fori", "while", "cond", "map", "seq", "checkpoint"])
    if kind == "checkpoint":
        return ("checkpoint", _program(rng, depth - 1))
    if kind in ("scan", "scan_pair", "fori"):  # with a checkpointing schedule: what reverse mode stores
        return (kind, rng.randint(1, 3), _program(rng, depth - 1), rng.choice([None, 1, 2, "sqrt"]))
    if kind == "cond":
        return ("cond", _program(rng, depth - 1), _program(rng, depth - 1))
    if kind == "seq":
        return ("seq", _program(rng, depth - 1), _program(rng, depth - 1))
    return (kind, rng.randint(1, 3), _program(rng, depth - 1))


def structured(prog, v):
    """``prog`` with polyad's constructs."""
    kind = prog[0]
    if kind == "leaf":
        return _leaf(prog[1], v, prog[2])
    if kind == "seq":
        return structured(prog[2], structured(prog[1], v))
    if kind == "cond":
        return pa.cond(xp.sum(v) > 0, lambda c: structured(prog[1], c), lambda c: structured(prog[2], c), v)
    if kind == "checkpoint":
        return pa.checkpoint(lambda c: structured(prog[1], c))(v)
    length, inner = prog[1], prog[2]
    checkpoints = prog[3] if len(prog) > 3 else None
    if kind == "scan":
        out, ys = pa.scan(
            lambda c, _: (structured(inner, c), xp.sum(c)), v, length=length, checkpoints=checkpoints
        )
        return out + 0.01 * xp.sum(ys)
    if kind == "scan_pair":  # a pytree carry: (vector, scalar)

        def body(c, _):
            w = structured(inner, c[0])
            return (w, c[1] + xp.sum(w) * 0.1), None

        (w, s), _ = pa.scan(body, (v, xp.sum(v) * 0.0), length=length, checkpoints=checkpoints)
        return w + 0.1 * s
    if kind == "fori":
        return pa.fori_loop(0, length, lambda i, c: structured(inner, c), v, checkpoints=checkpoints)
    if kind == "while":

        def body(c):
            return c[0] + 1, structured(inner, c[1])

        return pa.while_loop(lambda c: c[0] < length, body, (0, v))[1]
    if kind == "map":
        return pa.map(lambda row: structured(inner, row), xp.reshape(v, (1, -1)))[0, :]
    raise AssertionError(kind)


def unrolled(prog, v):
    """``prog`` as plain Python loops and branches (the reference)."""
    kind = prog[0]
    if kind == "leaf":
        return _leaf(prog[1], v, prog[2])
    if kind == "seq":
        return unrolled(prog[2], unrolled(prog[1], v))
    if kind == "cond":
        return pa.cond(xp.sum(v) > 0, lambda c: unrolled(prog[1], c), lambda c: unrolled(prog[2], c), v)
    if kind == "checkpoint":
        return unrolled(prog[1], v)
    length, inner = prog[1], prog[2]
    if kind == "scan":
        ys = []
        for _ in range(length):
            ys.append(xp.sum(v))
            v = unrolled(inner, v)
        return v + 0.01 * xp.sum(xp.stack(ys))
    if kind == "scan_pair":
        s = xp.sum(v) * 0.0
        for _ in range(length):
            v = unrolled(inner, v)
            s = s + xp.sum(v) * 0.1
        return v + 0.1 * s
    if kind in ("fori", "while"):
        for _ in range(length):
            v = unrolled(inner, v)
        return v
    if kind == "map":
        return unrolled(inner, v)
    raise AssertionError(kind)


def _transforms(prog):
    """The stacks of transforms a program is checked under: name -> (apply(f) -> g, arguments)."""

    def loss(f):
        return lambda v: xp.sum(f(v) * _arr([1.0, -0.5, 0.25]))

    t = _arr([0.3, -0.2, 0.5])
    stacks = {
        "eager": (lambda f: f, 1),
        "grad": (lambda f: pa.grad(loss(f)), 1),
        "jvp": (lambda f: lambda v: pa.jvp(f, (v,), (t,))[1], 1),
        "linearize": (lambda f: lambda v: pa.linearize(f, v)[1](t), 1),
        "jacrev": (lambda f: pa.jacrev(f), 1),
        "vmap": (lambda f: pa.vmap(f), 2),
        "vmap(grad)": (lambda f: pa.vmap(pa.grad(loss(f))), 2),
        "jit": (lambda f: pa.jit(f), 1),
        "jit(grad)": (lambda f: pa.jit(pa.grad(loss(f))), 1),
        "hessian": (lambda f: pa.hessian(loss(f)), 1),
        "jacfwd(jit)": (lambda f: pa.jacfwd(pa.jit(f)), 1),
        "grad(grad)": (lambda f: pa.grad(lambda v: xp.sum(pa.grad(loss(f))(v) ** 2)), 1),
    }
    return stacks


def _check(seed):
    rng = random.Random(seed)
    prog = _program(rng, depth=rng.randint(1, 3))
    stacks = _transforms(prog)
    name = rng.choice(sorted(stacks))
    apply, rank = stacks[name]
    x = np.random.default_rng(seed).uniform(-0.9, 0.9, (2, 3) if rank == 2 else 3)
    # vmap with a cond inside: each example must keep the branch its own data picks
    got = apply(lambda v: structured(prog, v))(_arr(x))
    expected = apply(lambda v: unrolled(prog, v))(_arr(x))
    try:
        assert_close(to_numpy(got), to_numpy(expected), rtol=1e-12, atol=1e-12)
    except AssertionError as exc:
        raise AssertionError(f"seed {seed}: {name} of {prog}") from exc


@pytest.mark.parametrize("seed", range(N_PROGRAMS))
def test_random_nestings_equal_the_unrolled_program(seed):
    _check(seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(N_PROGRAMS, N_PROGRAMS + N_SLOW))
def test_random_nestings_equal_the_unrolled_program_slow(seed):
    _check(seed)


@pytest.mark.parametrize("kind", ["scan_pair", "map", "cond_in_scan"])
def test_linearize_of_loops(kind):
    """linearize of a scan with a pytree carry, of a map, of a scan holding a cond: the loop's JVP rule
    computes its primal with the tangents (computes_primal); linearize's tangent sweep took its pair for
    the tangents and failed ('tuple' object has no attribute 'dtype'), issue 33."""
    prog = {
        "scan_pair": ("scan_pair", 3, ("leaf", "sin", 1)),
        "map": ("map", 1, ("leaf", "square", 0)),
        "cond_in_scan": ("scan", 3, ("cond", ("leaf", "scale", 1), ("leaf", "tanh", 2))),
    }[kind]
    x, t = _arr([0.3, 0.7, -0.2]), _arr([1.0, -2.0, 0.5])
    out, lin = pa.linearize(lambda v: structured(prog, v), x)
    _, expected = pa.jvp(lambda v: unrolled(prog, v), (x,), (t,))
    assert_close(lin(t), expected, rtol=1e-13)
    assert_close(out, unrolled(prog, x), rtol=1e-13)
    h = 1e-6
    fd = (to_numpy(unrolled(prog, x + h * t)) - to_numpy(unrolled(prog, x - h * t))) / (2 * h)
    assert_close(lin(t), fd, rtol=1e-6, atol=1e-8)


def _grows(c):
    return xp.concat([c, c])


CHANGED_CARRY = {
    "scan": lambda v: pa.scan(lambda c, _: (_grows(c), None), v, length=2)[0],
    "scan_dtype": lambda v: pa.scan(lambda c, _: (xp.astype(c, xp.float32), None), v, length=2)[0],
    "fori_loop": lambda v: pa.fori_loop(0, 2, lambda i, c: _grows(c), v),
    "fori_loop_tree": lambda v: pa.fori_loop(0, 2, lambda i, c: (c, c), v),
    "while_loop": lambda v: pa.while_loop(lambda c: c[0] < 2, lambda c: (c[0] + 1, _grows(c[1])), (0, v))[1],
}


@pytest.mark.parametrize("transform", ["eager", "grad", "vmap", "jit"])
@pytest.mark.parametrize("kind", list(CHANGED_CARRY))
def test_a_body_that_changes_its_carry_is_refused_naming_the_loop(kind, transform):
    """A body returning a carry of another shape, dtype or structure: a TypeError naming the construct,
    eagerly (where it only ran on before, issue 33) and under transforms."""
    f = CHANGED_CARRY[kind]
    construct = kind.split("_dtype")[0].split("_tree")[0]
    wrapped = {
        "eager": f,
        "grad": pa.grad(lambda v: xp.sum(f(v))),
        "vmap": pa.vmap(f),
        "jit": pa.jit(f),
    }[transform]
    x = _arr([[0.5, 1.0], [1.5, 2.0]] if transform == "vmap" else [0.5, 1.0])
    with pytest.raises(TypeError, match=rf"pa\.{construct}") as info:
        wrapped(x)
    assert "structure" in str(info.value) or "shapes and dtypes" in str(info.value)
