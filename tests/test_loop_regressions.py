"""Issue 33: branches that disagree are refused eagerly and under every transform, naming the construct,
what differs and both values; and the reported failures of linearize, vmap of grad and pytree arguments
through loops and branches, each against the unrolled Python loop or finite differences."""

import optree
import pytest
from helpers import assert_close

import polyad as pa
from polyad import xp

TOL = dict(rtol=1e-12, atol=1e-12)


def num(v):
    return xp.asarray(v, dtype=xp.float64)


# the second branch of each pair disagrees with the first: (what the message says, both values)
MISMATCHES = {
    "shape": (
        lambda v: v * 2.0,
        lambda v: xp.stack([v, v]),
        "shapes and dtypes",
        "() float64",
        "(2,) float64",
    ),
    "dtype": (
        lambda v: v * 2.0,
        lambda v: xp.astype(v, xp.float32),
        "shapes and dtypes",
        "() float64",
        "() float32",
    ),
    "structure": (lambda v: v * 2.0, lambda v: (v, v), "structure", "PyTreeSpec(*)", "PyTreeSpec((*, *))"),
}

TRANSFORMS = {
    "eager": lambda f: f,
    "grad": pa.grad,
    "jvp": lambda f: lambda x: pa.jvp(f, (x,), (num(1.0),)),
    "vmap": lambda f: lambda x: pa.vmap(f)(xp.stack([x, -x])),
    "jit": pa.jit,
    "linearize": lambda f: lambda x: pa.linearize(f, x),
}


@pytest.mark.parametrize("transform", list(TRANSFORMS))
@pytest.mark.parametrize("what", list(MISMATCHES))
@pytest.mark.parametrize("construct", ["cond", "switch"])
def test_branches_that_disagree_are_refused(construct, what, transform):
    good, bad, differs, first, second = MISMATCHES[what]

    def f(x):
        if construct == "cond":  # false_fun is branch 0, as in jax.lax.cond
            return xp.sum(pa.cond(x > 0.0, bad, good, x))
        return xp.sum(pa.switch(xp.astype(x > 0.0, xp.int64), [good, bad], x))

    # eagerly both choices: the branch taken and the one only traced
    for x in (num(0.5), num(-0.5)):
        with pytest.raises(TypeError) as info:
            TRANSFORMS[transform](f)(x)
        message = str(info.value)
        assert message.startswith(f"pa.{construct}:"), message
        assert differs in message and first in message and second in message, message
        names = ("true_fun", "false_fun") if construct == "cond" else ("branch 1", "branch 0")
        assert all(n in message for n in names), message


def test_an_eager_branch_that_cannot_be_traced_is_not_checked_until_it_runs():
    # Python control flow on the operand's value: fine eagerly where it is not taken, as before
    def concrete(v):
        return v if float(v) > 0 else -v

    assert float(pa.cond(xp.asarray(True), lambda v: v * 3.0, concrete, num(2.0))) == 6.0
    assert float(pa.cond(False, lambda v: v * 3.0, concrete, num(-2.0))) == 2.0


# ------------------------------------------------------------------------------ reported failures


def _pytree_scan(a, checkpoints=None):
    def body(c, x):
        return {"u": c["u"] * a + x, "w": (c["w"][0] * c["u"], c["w"][1] + x)}, c["u"]

    c, ys = pa.scan(
        body, {"u": a, "w": (a * 2.0, num(0.0))}, xp.linspace(0.1, 0.4, 4), checkpoints=checkpoints
    )
    return c["u"] + c["w"][0] + c["w"][1] + xp.sum(ys)


def _pytree_unrolled(a):
    u, w0, w1, total = a, a * 2.0, num(0.0), num(0.0)
    for x in (0.1, 0.2, 0.3, 0.4):
        total = total + u
        u, w0, w1 = u * a + x, w0 * u, w1 + x
    return u + w0 + w1 + total


def _cond_scan(a):
    def body(c, x):
        return pa.cond(c > 0.6, lambda v: v * a, lambda v: v + x * a, c), c

    c, ys = pa.scan(body, a, xp.linspace(0.1, 0.4, 4))
    return c + xp.sum(ys)


def _cond_unrolled(a):
    c, total = a, num(0.0)
    for x in (0.1, 0.2, 0.3, 0.4):
        total = total + c
        c = c * a if float(c) > 0.6 else c + x * a
    return c + total


def _map(a):
    return xp.sum(pa.map(lambda v: xp.sin(v * a) * v, xp.linspace(0.1, 0.4, 4)))


def _map_unrolled(a):
    return sum(xp.sin(num(v) * a) * v for v in (0.1, 0.2, 0.3, 0.4))


def _fd(f, a, h=1e-6):
    return (float(f(num(a + h))) - float(f(num(a - h)))) / (2 * h)


@pytest.mark.parametrize(
    "f,ref",
    [
        (_pytree_scan, _pytree_unrolled),
        (lambda a: _pytree_scan(a, 2), _pytree_unrolled),
        (_map, _map_unrolled),
        (_cond_scan, _cond_unrolled),
    ],  # fmt: skip
)
def test_linearize_of_loops_and_branches_equals_the_unrolled_loop(f, ref):
    for a in (0.5, 0.9):  # the cond takes different branches along the loop at each
        out, jvp_fn = pa.linearize(f, num(a))
        assert_close(out, ref(num(a)), **TOL)
        slope = float(pa.grad(ref)(num(a)))
        assert_close(jvp_fn(num(1.0)), num(slope), **TOL)
        assert_close(jvp_fn(num(-2.5)), num(-2.5 * slope), **TOL)
        assert abs(slope - _fd(ref, a)) < 1e-6 * max(1.0, abs(slope))


def test_vmap_of_grad_of_a_scan_with_a_cond_inside():
    a = xp.asarray([0.5, 0.7, 0.9], dtype=xp.float64)
    got = pa.vmap(pa.grad(_cond_scan))(a)
    for k, v in enumerate((0.5, 0.7, 0.9)):
        assert abs(float(got[k]) - _fd(_cond_unrolled, v)) < 1e-6
        assert_close(got[k], pa.grad(_cond_unrolled)(num(v)), **TOL)


def _h(d):
    return xp.sum(d["a"] * d["b"][0]) + xp.sum(xp.sin(d["b"][1]) ** 2)


def _h_grad(d):  # written by hand
    return {"a": d["b"][0], "b": (d["a"], 2.0 * xp.sin(d["b"][1]) * xp.cos(d["b"][1]))}


def _point():
    return {"a": xp.asarray([0.3, -0.2]), "b": (xp.asarray([1.5, 0.5]), xp.asarray([0.7, -1.1]))}


def _assert_tree(got, expected):
    (g, tg), (e, te) = _flatten(got), _flatten(expected)
    assert tg == te
    for x, y in zip(g, e):
        assert_close(x, y, **TOL)


def _flatten(tree):
    return optree.tree_flatten(tree)


def test_pytree_arguments_through_every_transform_and_argnums():
    d = _point()
    ga = _h_grad(d)
    _assert_tree(pa.grad(_h)(d), ga)
    _assert_tree(pa.jit(pa.grad(_h))(d), ga)
    two = lambda u, w: _h({"a": u, "b": w})  # noqa: E731
    _assert_tree(pa.grad(two, argnums=(0, 1))(d["a"], d["b"]), (ga["a"], ga["b"]))
    _assert_tree(pa.jit(pa.grad(two, argnums=1))(d["a"], d["b"]), ga["b"])
    # Jacobians of a scalar: the gradient's structure
    _assert_tree(pa.jacrev(_h)(d), ga)
    _assert_tree(pa.jacfwd(two, argnums=1)(d["a"], d["b"]), ga["b"])
    # the Hessian's block of b[1] with itself: diag(2 cos(2 x))
    hess = pa.hessian(two, argnums=1)(d["a"], d["b"])
    expected = 2.0 * xp.cos(2.0 * d["b"][1])
    assert_close(xp.stack([hess[1][1][0, 0], hess[1][1][1, 1]]), expected, **TOL)
    assert_close(hess[0][1], xp.zeros((2, 2), dtype=xp.float64), **TOL)
    # vmap with nested in_dims, linearize and jvp of tuples
    batch = xp.stack([d["a"], d["a"] * 2.0])
    got = pa.vmap(two, in_dims=(0, (None, 0)))(batch, (d["b"][0], xp.stack([d["b"][1], d["b"][1]])))
    assert_close(got[1], _h({"a": d["a"] * 2.0, "b": d["b"]}), **TOL)
    out, jvp_fn = pa.linearize(two, d["a"], d["b"])
    tangent = (xp.asarray([1.0, 0.0]), (xp.asarray([0.0, 1.0]), xp.asarray([1.0, 1.0])))
    expected = sum(float(xp.sum(x * y)) for x, y in zip(_flatten(ga)[0], [tangent[0], *tangent[1]]))
    assert abs(float(jvp_fn(*tangent)) - expected) < 1e-12
    assert abs(float(pa.jvp(two, (d["a"], d["b"]), tangent)[1]) - expected) < 1e-12


def test_an_eager_cond_traces_the_branch_not_taken_once_and_checks_a_changed_closure():
    calls = {"taken": 0, "other": 0}

    def taken(v):
        calls["taken"] += 1
        return v * 2.0

    def other(v):
        calls["other"] += 1
        return xp.sin(v)

    for step in range(5):  # an eager loop: the branch not taken is traced on the first step only
        assert abs(float(pa.cond(True, taken, other, num(0.5 + step))) - (1.0 + 2.0 * step)) < 1e-15
    assert calls == {"taken": 5, "other": 1}

    def f(n):  # the branch not taken closes over n: a new n is a new trace, and a wrong one is refused
        return pa.cond(
            True, lambda v: xp.zeros(3, dtype=xp.float64), lambda v: xp.zeros(n, dtype=xp.float64), num(1.0)
        )

    assert tuple(f(3).shape) == (3,)
    with pytest.raises(
        TypeError, match=r"pa\.cond: true_fun must return .* \(4,\) float64 in false_fun and \(3,\)"
    ):
        f(4)
