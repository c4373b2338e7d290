"""Lazy tangents in eager forward mode (polyad/transforms/lazy_tangents.py, issue 23 item 4): values equal
the analytic derivatives under jvp, jacfwd, hessian, vmap and grad of jvp; a tangent nothing reads is never
computed; element-wise chains keep one scaled tangent; deferred chains stay bounded; a JVP rule registered
anew is obeyed."""

import warnings

import numpy as np
import pytest
from helpers import assert_close, to_numpy

import polyad as pa
from polyad import dispatch
from polyad import xp as pxp
from polyad.core import OPS
from polyad.transforms import lazy_tangents
from polyad.transforms.forward import JVP
from polyad.transforms.lazy_tangents import MAX_DEPTH, Deferred, Scaled

xb = dispatch.default_backend().xp


def arr(values, dtype="float64"):
    return xb.asarray(np.asarray(values, dtype=dtype))


X = np.array([0.3, 0.7, 1.1, 1.9])
T = np.array([1.0, -0.5, 0.25, 2.0])


def test_jvp_of_element_wise_chains_equals_the_analytic_tangent():
    def f(x):
        e = pxp.exp(x)
        s = 1.0 + e
        return pxp.log(s) * x / (2.0 - pxp.sin(x)) - pxp.tanh(x) + e * e

    def df(x):  # by hand
        e, s, q = np.exp(x), 1 + np.exp(x), 2 - np.sin(x)
        g = np.log(s) * x
        dg = e / s * x + np.log(s)
        return dg / q + g * np.cos(x) / q**2 - (1 - np.tanh(x) ** 2) + 2 * e * e

    out, tan = pa.jvp(f, (arr(X),), (arr(T),))
    assert_close(to_numpy(tan), df(X) * T, rtol=1e-13)
    assert_close(to_numpy(out), to_numpy(f(arr(X))), rtol=1e-15)


def test_broadcast_tangents_and_constants_take_the_rules():
    def f(x, w):
        return (x[:, None] * w + 3.0) / (w - x[:, None] + 5.0) - w

    w = np.array([[0.5, 1.5, 2.5]])
    tw = np.array([[0.2, -0.1, 1.0]])
    _, tan = pa.jvp(f, (arr(X), arr(w)), (arr(T), arr(tw)))
    x, t = X[:, None], T[:, None]
    num, den = x * w + 3, w - x + 5
    expected = ((t * w + x * tw) * den - num * (tw - t)) / den**2 - tw
    assert_close(to_numpy(tan), expected, rtol=1e-13)


def test_hessian_of_the_w5_loss_equals_the_analytic_one():
    rng = np.random.default_rng(2)
    A = rng.standard_normal((32, 32)) / 6.0
    x = rng.standard_normal(32)
    H = pa.hessian(lambda v: pxp.sum(pxp.log(1 + pxp.exp(arr(A) @ v))))(arr(x))
    s = 1 / (1 + np.exp(-(A @ x)))
    assert_close(to_numpy(H), A.T @ ((s * (1 - s))[:, None] * A), rtol=1e-12, atol=1e-14)


def test_jacfwd_vmap_and_grad_of_jvp():
    def f(x):
        return pxp.sin(x) * pxp.exp(-x) + x * x

    def df(x):
        return np.cos(x) * np.exp(-x) - np.sin(x) * np.exp(-x) + 2 * x

    J = pa.jacfwd(f)(arr(X))
    assert_close(to_numpy(J), np.diag(df(X)), rtol=1e-13, atol=1e-15)
    batch = np.stack([X, X + 0.5])
    tans = pa.vmap(lambda x: pa.jvp(f, (x,), (arr(T),))[1])(arr(batch))
    assert_close(to_numpy(tans), df(batch) * T, rtol=1e-13)

    def d2f(x):  # derivative of df
        return -2 * np.cos(x) * np.exp(-x) + 2

    # grad of the tangent: d/dx sum(df(x) * t) = d2f(x) * t (reverse over forward)
    g = pa.grad(lambda x: pxp.sum(pa.jvp(f, (x,), (arr(T),))[1]))(arr(X))
    assert_close(to_numpy(g), d2f(X) * T, rtol=1e-12)


@pytest.fixture
def counted_sum(monkeypatch):
    """Calls of the sum kernel (the primal's and any tangent's)."""
    op = OPS["sum"]
    calls = []
    generic = op.generic

    def counting(xp, *args, **params):
        calls.append(1)
        return generic(xp, *args, **params)

    monkeypatch.setattr(op, "generic", counting)
    yield calls
    op.generic = generic  # the setter clears the resolved kernels again


def test_a_tangent_nothing_reads_is_never_computed(counted_sum):
    def f(x):
        unused = pxp.sum(pxp.log(x) * x)  # its tangent (a deferred sum of a scaled tangent) is never read
        assert isinstance(unused._aux, Deferred)
        return pxp.exp(x)

    _, ty = pa.jvp(f, (arr(X),), (arr(T),))
    assert len(counted_sum) == 1  # the primal sum only
    assert_close(to_numpy(ty), np.exp(X) * T, rtol=1e-15)

    counted_sum.clear()
    _, t = pa.jvp(lambda x: pxp.sum(pxp.log(x) * x), (arr(X),), (arr(T),))
    assert len(counted_sum) == 2  # read: the tangent's sum runs too
    assert_close(to_numpy(t), np.sum((np.log(X) + 1) * T), rtol=1e-13)


def test_an_element_wise_chain_keeps_one_scaled_tangent():
    seen = []

    def f(x):
        y = pxp.log(1.0 + pxp.exp(x)) * 3.0 - x
        seen.append((type(y._aux), len(y._aux.terms)))
        return y

    _, t = pa.jvp(f, (arr(X),), (arr(T),))
    assert seen == [(Scaled, 1)]  # all of it one factor times T, computed when jvp returned it
    s = 1 / (1 + np.exp(-X))
    assert_close(to_numpy(t), (3 * s - 1) * T, rtol=1e-13)


def test_deferred_chains_are_bounded():
    depths = []

    def f(x):
        for _ in range(3 * MAX_DEPTH):
            x = pxp.reshape(pxp.reshape(x, (2, 2)), (4,))
            depths.append(x._aux.depth if isinstance(x._aux, Deferred) else 0)
        return x

    _, t = pa.jvp(f, (arr(X),), (arr(T),))
    assert max(depths) <= MAX_DEPTH and 0 in depths
    assert_close(to_numpy(t), T)


def test_a_jvp_rule_registered_anew_is_obeyed():
    op = OPS["multiply"]
    registered = op.rules.get(JVP.name)
    try:
        op.register_rule(JVP, lambda ts, y, a, b: 7.0 * y)  # a deliberately wrong rule, to see it is used
        _, t = pa.jvp(lambda x: x * 2.0, (arr(X),), (arr(T),))
        assert_close(to_numpy(t), 7.0 * X * 2.0)
    finally:
        op.register_rule(JVP, registered)
        lazy_tangents.know_rules(JVP)  # the rule as it was, known again
    _, t = pa.jvp(lambda x: x * 2.0, (arr(X),), (arr(T),))
    assert_close(to_numpy(t), 2.0 * T)


def test_a_zero_tangent_stays_zero_through_an_infinite_factor():
    """sqrt(x * x) at 0: the tangent of x * x is 0 there and sqrt's factor infinite; the zero-safe rules
    give 0 (polyad.ops.zero_safe), and so does the product of their factors."""
    x = arr([0.0, 2.0, -3.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's 0.5 / 0 in sqrt's factor, as eagerly
        _, t = pa.jvp(lambda v: pxp.sqrt(v * v) * 3.0, (x,), (arr([1.0, 1.0, 1.0]),))
        assert_close(to_numpy(t), np.array([0.0, 3.0, -3.0]))
        _, t = pa.jvp(lambda v: pxp.log(v * 0.0 + 1.0) + pxp.sqrt(v - v), (x,), (arr([1.0, 1.0, 1.0]),))
    assert np.all(to_numpy(t) == 0.0)
