"""Reverse mode through a while_loop's own reverse pass (issue 33): grad and jacrev nested any number of
times, eager and under pa.jit, for every ``checkpoints=``, equal to the Python loop unrolled with the
same trip count to 1e-12; and the batched loop's body count."""

import numpy as np
import pytest
from helpers import assert_close

import polyad as pa

xp = pa.xp
TOL = dict(rtol=1e-12, atol=1e-12)
CHECKPOINTS = [None, 1, 2, 3, "sqrt", "auto"]


def arr(values):
    return xp.asarray(np.asarray(values, dtype=np.float64).tolist(), dtype=xp.float64)


X0 = arr([0.5, -0.3, 0.8])
P = arr([1.0, 0.5, 0.2])


def _step(p, x):
    return x - 0.3 * (p[0] * xp.sin(x) + p[1] * x**3) + 0.1 * p[2] * xp.cos(xp.sum(x)) * x


def _going(x, i):
    # the trip count is the data's: a tolerance (about 9 steps here), with a cap
    return bool(float(xp.sum(x * x)) > 0.05) and i < 30


def looped(p, x0, checkpoints):
    """The final carry of a while_loop whose length its data decide; a vector carry, an int counter, and
    a closed-over parameter vector."""

    def cond(c):
        return (xp.sum(c[0] * c[0]) > 0.05) & (c[1] < 30)

    return pa.while_loop(
        cond, lambda c: (_step(p, c[0]), c[1] + 1), (x0, xp.asarray(0)), checkpoints=checkpoints
    )[0]


def unrolled(p, x0):
    """The same loop in Python: its length read from the values, each step an op of the transforms."""
    x, i = x0, 0
    while _going(x, i):
        x, i = _step(p, x), i + 1
    return x


def trips():
    x, i = X0, 0
    while _going(x, i):
        x, i = _step(P, x), i + 1
    return i


def scalar(loop, checkpoints=None):
    """A scalar function of a scalar, through both the closure and the initial carry."""

    def f(a):
        x = loop(P * a, X0 * a, checkpoints) if checkpoints != "ref" else loop(P * a, X0 * a)
        return xp.sum(x * x) + xp.sum(x) * a

    return f


def _ref_scalar():
    return scalar(unrolled, "ref")


def test_the_loop_runs_several_steps():
    assert 5 <= trips() < 30  # the comparison below is of a real loop, not one step or the cap


@pytest.mark.parametrize("checkpoints", CHECKPOINTS)
def test_grad_of_grad_and_grad_of_grad_of_grad_equal_the_unrolled_loop(checkpoints):
    a = xp.asarray(1.1)
    f, ref = scalar(looped, checkpoints), _ref_scalar()
    assert_close(pa.grad(pa.grad(f))(a), pa.grad(pa.grad(ref))(a), **TOL)
    assert_close(pa.grad(pa.grad(pa.grad(f)))(a), pa.grad(pa.grad(pa.grad(ref)))(a), **TOL)
    # forward over reverse still works, and reverse over forward over reverse
    assert_close(pa.jacfwd(pa.grad(f))(a), pa.grad(pa.grad(ref))(a), **TOL)
    assert_close(pa.grad(pa.jacfwd(pa.grad(f)))(a), pa.grad(pa.grad(pa.grad(ref)))(a), **TOL)


@pytest.mark.parametrize("checkpoints", CHECKPOINTS)
def test_jacrev_of_jacrev_and_hessian_by_reverse_over_reverse(checkpoints):
    final = lambda p, x0: looped(p, x0, checkpoints)  # noqa: E731
    expected = pa.jacrev(pa.jacrev(unrolled))(P, X0)
    got = pa.jacrev(pa.jacrev(final))(P, X0)
    assert tuple(got.shape) == (3, 3, 3)
    assert_close(got, expected, **TOL)
    # the Hessian in the initial carry and in the parameters, jointly: jacrev of grad
    loss = lambda z: xp.sum(looped(z[:3], z[3:], checkpoints) ** 3)  # noqa: E731
    loss_ref = lambda z: xp.sum(unrolled(z[:3], z[3:]) ** 3)  # noqa: E731
    z = xp.concat([P, X0])
    h = pa.jacrev(pa.grad(loss))(z)
    assert_close(h, pa.jacrev(pa.grad(loss_ref))(z), **TOL)
    assert_close(h, xp.permute_dims(h, (1, 0)), **TOL)  # a Hessian: symmetric
    assert_close(h, pa.hessian(loss)(z), **TOL)  # forward over reverse agrees


@pytest.mark.parametrize("checkpoints", [None, 2, "sqrt", "auto"])
def test_jitted_reverse_over_reverse(checkpoints):
    a = xp.asarray(1.1)
    f, ref = scalar(looped, checkpoints), _ref_scalar()
    assert_close(pa.jit(pa.grad(pa.grad(f)))(a), pa.grad(pa.grad(ref))(a), **TOL)
    assert_close(pa.jit(pa.grad(pa.grad(pa.grad(f))))(a), pa.grad(pa.grad(pa.grad(ref)))(a), **TOL)
    final = lambda p: looped(p, X0, checkpoints)  # noqa: E731
    assert_close(
        pa.jit(pa.jacrev(pa.jacrev(final)))(P), pa.jacrev(pa.jacrev(lambda p: unrolled(p, X0)))(P), **TOL
    )


def test_reverse_over_reverse_of_a_newton_iteration():
    """The issue's example: the square root by Newton's iteration, differentiated twice in reverse."""

    def newton(a, checkpoints):
        return pa.while_loop(lambda x: xp.abs(x * x - a) > 1e-12, lambda x: 0.5 * (x + a / x), a,
                             checkpoints=checkpoints)  # fmt: skip

    a = xp.asarray(2.0)
    for checkpoints in (None, 2):
        f = lambda a, checkpoints=checkpoints: newton(a, checkpoints)  # noqa: E731
        assert_close(pa.grad(pa.grad(f))(a), -0.25 * 2.0**-1.5, rtol=1e-9)  # d²/da² sqrt(a)
        assert_close(pa.grad(pa.grad(pa.grad(f)))(a), 0.375 * 2.0**-2.5, rtol=1e-8)


def _grow(x0, limit, checkpoints):
    return pa.while_loop(lambda x: x < limit, lambda x: x * 1.5 + 0.1 * x * x, x0, checkpoints=checkpoints)


def _grow_ref(x0, limit):
    x = x0
    while float(x) < float(limit):
        x = x * 1.5 + 0.1 * x * x
    return x


@pytest.mark.parametrize("checkpoints", [None, 2])
def test_reverse_over_reverse_with_vmap_between_or_around(checkpoints):
    """Every example stops at its own step (0 to 9 steps here): vmap of grad of grad, and grad of vmap of
    grad (whose sweep runs a masked step and no condition), eager and jitted."""
    x0, limit = arr([1.0, 1.0, 1.1, 0.9]), arr([2.0, 5.0, 20.0, 0.5])
    expected = xp.stack([pa.grad(pa.grad(_grow_ref))(a, b) for a, b in zip(x0, limit)])
    f = lambda a, b: _grow(a, b, checkpoints)  # noqa: E731
    assert_close(pa.vmap(pa.grad(pa.grad(f)))(x0, limit), expected, **TOL)
    outer = pa.grad(lambda x: xp.sum(pa.vmap(pa.grad(f))(x, limit)))
    assert_close(outer(x0), expected, **TOL)
    assert_close(pa.jit(outer)(x0), expected, **TOL)


def _complex_step(c, a):
    z, i = c
    return z * z * 0.3 * a + xp.conj(z) * 0.1 + a * 0.05j, i + 1


def _complex_loss(z):
    return xp.sum(xp.real(z * xp.conj(z)) + xp.imag(z) ** 3)


@pytest.mark.parametrize("checkpoints", [None, 2])
def test_reverse_over_reverse_of_a_complex_non_holomorphic_carry(checkpoints):
    """The VJP of the backward pass uses the symmetry of second derivatives, which holds for complex
    carries taken as pairs of reals (the conjugate convention is the real adjoint), conj included."""
    z0 = xp.asarray([0.3 + 0.2j, -0.1 + 0.4j])

    def f(a):
        c = pa.while_loop(lambda c: c[1] < 6, lambda c: _complex_step(c, a), (z0, xp.asarray(0)),
                          checkpoints=checkpoints)  # fmt: skip
        return _complex_loss(c[0])

    def ref(a):
        c = (z0, 0)
        for _ in range(6):
            c = _complex_step(c, a)
        return _complex_loss(c[0])

    a = xp.asarray(0.7)
    assert_close(pa.grad(pa.grad(f))(a), pa.grad(pa.grad(ref))(a), **TOL)
    assert_close(pa.grad(pa.grad(pa.grad(f)))(a), pa.grad(pa.grad(pa.grad(ref)))(a), **TOL)
