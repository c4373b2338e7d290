"""Loop bodies that write into their own carry, NumPy style (``u[1:-1, 1:-1] = u[1:-1, 1:-1] * D; return
u``; issue 31): the carry a body receives is its own, so a write inside never reaches the caller's array,
a stored checkpoint or a step replayed by the backward pass. Every construct, schedule and transform is
checked against the closed form (three steps of multiplying a 4x4 grid's interior by D: f(D) = 12 + 4 D^3)
and random NumPy-style bodies against finite differences of the plain NumPy loop."""

import numpy as np
import pytest
from helpers import assert_close, to_numpy

import polyad as pa
from polyad.core import dispatch

xp = pa.xp
BACKEND = dispatch.default_backend().xp


def user_grid():
    """The caller's initial carry: an array of the backend under test (a NumPy array on the numpy lane)."""
    return BACKEND.asarray(np.ones((4, 4)).tolist(), dtype=BACKEND.float64)


def scalar(v):
    return xp.asarray(v, dtype=xp.float64)


def stencil(u, D):
    u[1:-1, 1:-1] = u[1:-1, 1:-1] * D
    return u


def loop(construct, init, D, checkpoints):
    """The grid after three in-place steps, by ``construct``."""
    if construct == "scan":
        return pa.scan(lambda u, x: (stencil(u, D), None), init, length=3, checkpoints=checkpoints)[0]
    if construct == "fori_loop":
        return pa.fori_loop(0, 3, lambda i, u: stencil(u, D), init, checkpoints=checkpoints)
    state = (xp.asarray(0), init)
    return pa.while_loop(
        lambda c: c[0] < 3, lambda c: (c[0] + 1, stencil(c[1], D)), state, checkpoints=checkpoints
    )[1]


def f_of(D):
    return 12.0 + 4.0 * D**3


def df_of(D):
    return 12.0 * D**2


def assert_untouched(user):
    """The caller's array holds its values and stays writeable (NumPy's flag)."""
    assert np.array_equal(to_numpy(user), np.ones((4, 4)))
    flags = getattr(user, "flags", None)
    if flags is not None:
        assert flags.writeable


TRANSFORMS = {
    "eager": (lambda f: f, f_of),
    "grad": (pa.grad, df_of),
    "jit": (pa.jit, f_of),
    "jit_grad": (lambda f: pa.jit(pa.grad(f)), df_of),
}


@pytest.mark.parametrize("transform", list(TRANSFORMS))
@pytest.mark.parametrize("checkpoints", [None, "sqrt", 1])
@pytest.mark.parametrize("construct", ["scan", "fori_loop", "while_loop"])
@pytest.mark.parametrize("init", ["users_array", "fresh_copy"])
def test_stencil_writing_into_its_carry(init, construct, checkpoints, transform):
    user = user_grid()

    def f(D):
        u0 = user if init == "users_array" else BACKEND.asarray(user, copy=True)
        return xp.sum(loop(construct, u0, D, checkpoints))

    wrap, expected = TRANSFORMS[transform]
    g = wrap(f)
    # "sqrt" on a while loop grows its slots as it runs (under pa.jit, None and "sqrt" take a fixed
    # number of slots: control/while_loop.JIT_SLOTS)
    for _ in range(3):  # a second and third call see the same initial values
        assert float(g(scalar(2.0))) == expected(2.0)
        assert_untouched(user)


# every other transform, and map and checkpoint: the same grid, D batched where vmap asks for it


def scanned(D, user, checkpoints=1):
    return xp.sum(loop("scan", user, D, checkpoints))


def while_looped(D, user, checkpoints=1):
    return xp.sum(loop("while_loop", user, D, checkpoints))


def checkpointed(D, user):
    return xp.sum(pa.checkpoint(lambda u: stencil(stencil(stencil(u, D), D), D))(user))


def mapped(D, user):
    # three grids, each its interior times D once: 3 (12 + 4 D)
    return xp.sum(pa.map(lambda u: stencil(u, D), xp.stack([user, user, user])))


CONSTRUCTS = {
    "scan": (scanned, f_of, df_of, lambda D: 24.0 * D),
    "scan_no_checkpoints": (lambda D, u: scanned(D, u, None), f_of, df_of, lambda D: 24.0 * D),
    "while_loop": (while_looped, f_of, df_of, lambda D: 24.0 * D),
    "checkpoint": (checkpointed, f_of, df_of, lambda D: 24.0 * D),
    "map": (mapped, lambda D: 36.0 + 12.0 * D, lambda D: 12.0 + 0.0 * D, lambda D: 0.0 * D),
}


def _jvp(f):
    return lambda D: pa.jvp(f, (D,), (scalar(1.0),))[1]


OTHER_TRANSFORMS = {  # (transform, which derivative it gives, batched over Ds)
    "jvp": (_jvp, 1, False),
    "jacrev": (pa.jacrev, 1, False),
    "jacfwd": (pa.jacfwd, 1, False),
    "hessian": (pa.hessian, 2, False),
    "vmap": (pa.vmap, 0, True),
    "vmap_grad": (lambda f: pa.vmap(pa.grad(f)), 1, True),
    "jit_vmap_grad": (lambda f: pa.jit(pa.vmap(pa.grad(f))), 1, True),
    "jit_hessian": (lambda f: pa.jit(pa.hessian(f)), 2, False),
}


@pytest.mark.parametrize("transform", list(OTHER_TRANSFORMS))
@pytest.mark.parametrize("construct", list(CONSTRUCTS))
def test_every_transform_of_a_body_writing_into_its_input(construct, transform):
    user = user_grid()
    fn, *derivatives = CONSTRUCTS[construct]
    wrap, order, batched = OTHER_TRANSFORMS[transform]
    g = wrap(lambda D: fn(D, user))
    points = np.array([2.0, 3.0])
    for _ in range(2):
        if batched:
            got = to_numpy(g(xp.asarray(points.tolist(), dtype=xp.float64)))
            assert_close(got, np.array([derivatives[order](p) for p in points]), rtol=1e-12)
        else:
            assert_close(float(g(scalar(2.0))), derivatives[order](2.0), rtol=1e-12)
        # jacrev's tape and a loop's body refer to each other (the body closes over the leaf D): jacrev
        # gives the caller's arrays back writeable when its rows are done, not when gc breaks the cycle
        assert_untouched(user)


def test_users_array_intact_after_the_body_raises():
    user = user_grid()

    def f(D):
        def body(u, x):
            stencil(u, D)
            raise RuntimeError("the body failed after writing")

        return xp.sum(pa.scan(body, user, length=3, checkpoints=1)[0])

    for g in (f, pa.grad(f), pa.jit(f), pa.jit(pa.grad(f))):
        with pytest.raises(RuntimeError, match="failed after writing"):
            g(scalar(2.0))
        assert_untouched(user)


def test_a_y_that_is_the_carry_keeps_its_step():
    """``return u, u`` after writing into ``u``: each y is the grid of its own step, not a later one's."""

    def f(D):
        def body(u, x):
            stencil(u, D)
            return u, u

        return pa.scan(body, user_grid(), length=3)[1]

    for g in (f, pa.jit(f)):
        ys = to_numpy(g(scalar(2.0)))
        assert [ys[k, 1, 1] for k in range(3)] == [2.0, 4.0, 8.0]
    jac = to_numpy(pa.jacfwd(lambda D: xp.sum(f(D)))(scalar(2.0)))
    assert float(jac) == 4.0 * (1.0 + 4.0 + 12.0)  # the interior's 4 cells: d/dD (D + D^2 + D^3)


# ------------------------------------------------------------------------------ NumPy-style bodies, at random


N = 5  # the carry's length
STEPS = 3
WEIGHTS = np.linspace(0.5, 1.5, N)


def random_ops(rng):
    """A body as a list of NumPy-style in-place operations on its carry ``u`` (see ``run_ops``)."""
    ops = []
    for _ in range(int(rng.integers(2, 5))):
        kind = str(rng.choice(["scale", "view_mul", "view_sin", "fill", "elem", "shift"]))
        a = int(rng.integers(0, N - 1))
        b = int(rng.integers(a + 1, N + 1))
        ops.append((kind, a, b, round(float(rng.uniform(-0.5, 0.5)), 3)))
    return ops


def run_ops(m, ops, u, p):
    """One step: ``ops`` run on carry ``u`` with parameter ``p``, ``m`` the namespace (NumPy for the
    reference loop, polyad's for the loops under test); returns ``u`` (or the buffer that replaced it)."""
    for kind, a, b, c in ops:
        if kind == "scale":  # an in-place stencil on a slice
            u[a:b] = u[a:b] * p + c
        elif kind == "view_mul":  # a write through a view of the carry
            v = u[a:b]
            # (p * 1.0, not p: a compiled loop runs the body on the backend's arrays, with the closed-over p
            # a polyad tensor, which array_api_strict's in-place operators refuse, as CuPy's may)
            v *= p * 1.0
        elif kind == "view_sin":
            v = u[a:b]
            v += c * m.sin(v)
        elif kind == "fill":  # a buffer filled element by element, then the new carry
            buf = m.zeros_like(u)
            for i in range(N):
                buf[i] = u[i] * p + c * u[(i + 1) % N]
            u = buf
        elif kind == "elem":  # one element of the carry written from two others
            u[a] = u[a] * u[b - 1] * 0.5 + p
        else:  # "shift": an in-place update of one slice from an overlapping one
            u[1:] += c * p * u[:-1]
    return u


def reference(ops, u0, p):
    """The plain NumPy loop's loss."""
    u = np.array(u0, dtype=np.float64)
    for _ in range(STEPS):
        u = run_ops(np, ops, u, p)
    return float(np.sum(WEIGHTS * u))


def polyad_loss(ops, construct, checkpoints, user):
    w = BACKEND.asarray(WEIGHTS.tolist(), dtype=BACKEND.float64)

    def f(p):
        if construct == "scan":
            u = pa.scan(
                lambda u, x: (run_ops(xp, ops, u, p), None), user, length=STEPS, checkpoints=checkpoints
            )[0]
        elif construct == "fori_loop":
            u = pa.fori_loop(0, STEPS, lambda i, u: run_ops(xp, ops, u, p), user, checkpoints=checkpoints)
        else:
            state = (xp.asarray(0), user)
            u = pa.while_loop(
                lambda s: s[0] < STEPS,
                lambda s: (s[0] + 1, run_ops(xp, ops, s[1], p)),
                state,
                checkpoints=checkpoints,
            )[1]
        return xp.sum(w * u)

    return f


def _first(f):
    return lambda p: pa.jvp(f, (p,), (scalar(1.0),))[1]


PROPERTY_TRANSFORMS = {  # (transform, derivative or value, batched)
    "value": (lambda f: f, False, False),
    "jit": (pa.jit, False, False),
    "grad": (pa.grad, True, False),
    "jvp": (_first, True, False),
    "jit_grad": (lambda f: pa.jit(pa.grad(f)), True, False),
    "jacrev": (pa.jacrev, True, False),
    "vmap_grad": (lambda f: pa.vmap(pa.grad(f)), True, True),
}


def test_numpy_style_bodies_match_finite_differences_of_the_numpy_loop():
    rng = np.random.default_rng(31)
    for _ in range(36):
        ops = random_ops(rng)
        construct = str(rng.choice(["scan", "fori_loop", "while_loop"]))
        schedules = [None, 1, 2, "auto", "sqrt"]
        checkpoints = schedules[int(rng.integers(len(schedules)))]
        name = str(rng.choice(list(PROPERTY_TRANSFORMS)))
        wrap, derivative, batched = PROPERTY_TRANSFORMS[name]
        u0 = rng.uniform(0.5, 1.5, N)
        user = BACKEND.asarray(u0.tolist(), dtype=BACKEND.float64)
        g = wrap(polyad_loss(ops, construct, checkpoints, user))
        points = [0.8, 1.1] if batched else [0.9]
        h = 1e-6
        want = [
            (reference(ops, u0, p + h) - reference(ops, u0, p - h)) / (2 * h)
            if derivative
            else reference(ops, u0, p)
            for p in points
        ]
        for _ in range(2):  # a second call (pa.jit's compiled one) sees the same initial carry
            p = xp.asarray(points, dtype=xp.float64) if batched else scalar(points[0])
            got = np.atleast_1d(to_numpy(g(p)))
            what = f"{name} of {construct}(checkpoints={checkpoints!r}) over {ops}"
            assert_close(got, np.array(want), rtol=1e-6, atol=1e-8), what
            assert np.array_equal(to_numpy(user), u0), what


# ------------------------------------------------------------------------------ the loops' messages


def test_cond_errors_name_pa_cond_and_the_branch():
    x = scalar(1.0)
    with pytest.raises(TypeError) as e:
        pa.grad(lambda x: pa.cond(x > 0, lambda v: v * 2, lambda v: xp.stack([v, v]), x))(x)
    msg = str(e.value)
    assert msg.startswith(
        "pa.cond: true_fun must return an output of the same shapes and dtypes as false_fun"
    )
    assert "(2,) float64 in false_fun and () float64 in true_fun" in msg
    assert "switch" not in msg and "branch 1" not in msg
    with pytest.raises(TypeError, match=r"^pa\.cond: true_fun must return an output of the same structure"):
        pa.grad(lambda x: pa.cond(x > 0, lambda v: (v, v), lambda v: v, x))(x)
    with pytest.raises(pa.ConcretizationError) as e:
        pa.grad(lambda x: pa.cond(x > 0, lambda v: v, lambda v: v * float(v), x))(x)
    msg = str(e.value)
    assert msg.startswith("pa.cond false_fun (<lambda>): float() of a traced value")
    assert "xp.where" in msg and "static_argnums" not in msg and "switch" not in msg
    # pa.switch keeps its own names
    with pytest.raises(
        TypeError, match=r"^pa\.switch: branch 1 must return .* \(2,\) float64 in branch 0 and \(\)"
    ):
        pa.grad(lambda x: pa.switch(0, [lambda v: xp.stack([v, v]), lambda v: v], x))(x)


@pytest.mark.parametrize("construct", ["scan", "fori_loop", "while_loop"])
def test_python_control_flow_on_a_loop_carry_says_it_is_a_loop_carry(construct):
    def branchy(c):
        return c * 2.0 if float(c) > 0 else c

    def f(x):
        if construct == "scan":
            return pa.scan(lambda c, _: (branchy(c), None), x, length=3)[0]
        if construct == "fori_loop":
            return pa.fori_loop(0, 3, lambda i, c: branchy(c), x)
        return pa.while_loop(lambda c: c < 10.0, branchy, x)

    for g in (pa.grad(f), pa.jit(f)):
        with pytest.raises(pa.ConcretizationError) as e:
            g(scalar(1.0))
        msg = str(e.value)
        assert msg.startswith(f"pa.{construct}(") and "float() of a traced value (the loop carry" in msg
        assert "traced once" in msg and "xp.where" in msg and "pa.cond" in msg and "cond_fun" in msg
        assert "static_argnums" not in msg


@pytest.mark.parametrize("bad", [-1, 0, "bogus", 1.5, True])
def test_fori_loop_refuses_bad_checkpoints_eagerly_too(bad):
    body = lambda i, c: c * 2.0  # noqa: E731
    for call in (
        lambda: pa.fori_loop(0, 3, body, scalar(1.0), checkpoints=bad),
        lambda: pa.grad(lambda x: pa.fori_loop(0, 3, body, x, checkpoints=bad))(scalar(1.0)),
    ):
        with pytest.raises(ValueError) as e:
            call()
        msg = str(e.value)
        assert msg.startswith("pa.fori_loop(<lambda>): checkpoints must be") and repr(bad) in msg
        assert "pa.scan" not in msg
    with pytest.raises(ValueError, match=r"^pa\.fori_loop\(<lambda>\): max_memory is the budget"):
        pa.fori_loop(0, 3, body, scalar(1.0), max_memory="1MiB")


def test_eager_constructs_leave_the_callers_arrays_intact():
    user = user_grid()
    D = scalar(2.0)
    stack = BACKEND.stack([user, user])
    assert float(xp.sum(pa.map(lambda u: stencil(u, D), stack))) == 2 * 20.0  # each grid's interior doubled
    assert np.array_equal(to_numpy(stack), np.ones((2, 4, 4)))
    assert float(checkpointed(D, user)) == f_of(2.0)
    # a body returning a view of its carry, then writing into it: each step's own
    out = pa.fori_loop(0, 3, lambda i, u: stencil(u, D)[...], user)
    assert float(xp.sum(out)) == f_of(2.0)
    assert_untouched(user)
