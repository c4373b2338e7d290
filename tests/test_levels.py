"""Transforms composed: higher derivatives (grad of grad of grad; jvp of grad, grad of jvp, jvp of jvp),
perturbation confusion in reverse, forward and mixed nestings, Hessian-vector products by every
nesting against the analytic Hessian, linearize under other transforms, and gradient modes across
levels."""

import numpy as np
import pytest
from helpers import assert_close, to_numpy

import polyad as pa
from polyad import core
from polyad.core import dispatch

xp = pa.xp
BX = dispatch.default_backend().xp


def arr(values):
    return BX.asarray(values, dtype=BX.float64)


@pytest.fixture(autouse=True)
def _levels_intact():
    yield
    assert core.current_level() == 0
    assert core.no_grad_level() == 0


def one():
    return arr(1.0)


# ------------------------------------------------------------------------------ higher derivatives


def test_grad_of_grad_of_grad():
    x = arr(0.7)
    assert_close(pa.grad(pa.grad(pa.grad(xp.sin)))(x), np.asarray(-np.cos(0.7)), rtol=1e-12)
    assert_close(pa.grad(pa.grad(pa.grad(lambda x: x**4)))(arr(2.0)), np.asarray(48.0))
    # fourth order of exp(2x): 16 exp(2x)
    g4 = pa.grad(pa.grad(pa.grad(pa.grad(lambda x: xp.exp(2.0 * x)))))(x)
    assert_close(g4, np.asarray(16 * np.exp(1.4)), rtol=1e-12)


def test_third_order_vector_input_mixed_partials():
    # f(x) = x0^2 x1^3: d/dx1 of d/dx0 of f = 6 x0 x1^2; its gradient = (6 x1^2, 12 x0 x1)
    def f(x):
        return x[0, ...] ** 2 * x[1, ...] ** 3

    def d01(x):
        return pa.grad(f)(x)[0, ...]  # df/dx0 = 2 x0 x1^3

    def d01_1(x):
        return pa.grad(d01)(x)[1, ...]  # 6 x0 x1^2

    x = arr([1.5, -2.0])
    assert_close(pa.grad(d01_1)(x), np.array([6 * 4.0, 12 * 1.5 * -2.0]))


def _h(x):
    return xp.sum(xp.sin(x) * x * x)


def _h2(xn):
    """Diagonal of the Hessian of ``_h``: (sin x * x^2)''."""
    return -np.sin(xn) * xn * xn + 4 * xn * np.cos(xn) + 2 * np.sin(xn)


def test_jvp_of_grad_grad_of_jvp_jvp_of_jvp():
    x, v, w = arr([0.3, -1.1, 2.0]), arr([1.0, 2.0, -0.5]), arr([0.5, -1.0, 3.0])
    xn, vn, wn = map(to_numpy, (x, v, w))
    hv = _h2(xn) * vn
    g, jg = pa.jvp(pa.grad(_h), (x,), (v,))
    assert_close(g, np.cos(xn) * xn * xn + 2 * xn * np.sin(xn), rtol=1e-12)
    assert_close(jg, hv, rtol=1e-12)
    assert_close(pa.grad(lambda x: pa.jvp(_h, (x,), (v,))[1])(x), hv, rtol=1e-12)
    _, jj = pa.jvp(lambda x: pa.jvp(_h, (x,), (v,))[1], (x,), (w,))
    assert_close(jj, np.asarray(np.sum(_h2(xn) * vn * wn)), rtol=1e-12)
    # third order by three forward levels: (x^3)''' = 6, times three tangents
    _, j3 = pa.jvp(
        lambda x: pa.jvp(lambda y: pa.jvp(lambda z: z * z * z, (y,), (arr(2.0),))[1], (x,), (arr(3.0),))[1],
        (arr(1.3),),
        (arr(0.5),),
    )
    assert_close(j3, np.asarray(6 * 2.0 * 3.0 * 0.5), rtol=1e-12)


# ------------------------------------------------------------------------------ perturbation confusion


def test_perturbation_confusion_reverse():
    # d/dx [x * d/dy (x + y)] = d/dx [x * 1] = 1 (the confused answer is 2)
    def outer(x):
        return x * pa.grad(lambda y: x + y)(one())

    assert_close(pa.grad(outer)(one()), np.asarray(1.0))
    # d/dx [x * d/dy (x * y)] = d/dx [x * x] = 2x
    assert_close(pa.grad(lambda x: x * pa.grad(lambda y: x * y)(one()))(arr(3.0)), np.asarray(6.0))


def test_perturbation_confusion_forward():
    def d(f, x):
        return pa.jvp(f, (x,), (one(),))[1]

    assert_close(d(lambda x: x * d(lambda y: x + y, one()), one()), np.asarray(1.0))
    assert_close(d(lambda x: x * d(lambda y: x * y, one()), arr(3.0)), np.asarray(6.0))


def test_perturbation_confusion_mixed():
    def dfwd(f, x):
        return pa.jvp(f, (x,), (one(),))[1]

    # reverse outside, forward inside, and the other way round
    assert_close(pa.grad(lambda x: x * dfwd(lambda y: x + y, one()))(one()), np.asarray(1.0))
    assert_close(dfwd(lambda x: x * pa.grad(lambda y: x + y)(one()), one()), np.asarray(1.0))
    assert_close(pa.grad(lambda x: x * dfwd(lambda y: x * y, one()))(arr(3.0)), np.asarray(6.0))
    assert_close(dfwd(lambda x: x * pa.grad(lambda y: x * y)(one()), arr(3.0)), np.asarray(6.0))
    # the inner derivative at a point that depends on x: d/dx [ d/dy (x y^2) at y = x ] = d/dx [2 x^2] = 4x
    assert_close(pa.grad(lambda x: pa.grad(lambda y: x * y * y)(x))(arr(1.5)), np.asarray(6.0))
    assert_close(dfwd(lambda x: pa.grad(lambda y: x * y * y)(x), arr(1.5)), np.asarray(6.0))


# ------------------------------------------------------------------------------ Hessian-vector products

A = [[1.0, -2.0, 0.5], [0.3, 0.0, 1.5], [-1.0, 2.0, 1.0], [0.2, 0.4, -0.6]]


def _f(x):
    a = arr(A)
    s = xp.sum(x * x)
    return xp.sum(xp.sin(xp.matmul(a, x))) + s * s


def _hessian(xn):
    an = np.asarray(A)
    return an.T @ np.diag(-np.sin(an @ xn)) @ an + 4 * (xn @ xn) * np.eye(3) + 8 * np.outer(xn, xn)


def test_hvp_every_nesting_against_analytic():
    x, v = arr([0.4, -0.3, 1.2]), arr([1.0, 0.5, -2.0])
    hv = _hessian(to_numpy(x)) @ to_numpy(v)
    fwd_over_rev = pa.jvp(pa.grad(_f), (x,), (v,))[1]
    rev_over_fwd = pa.grad(lambda x: pa.jvp(_f, (x,), (v,))[1])(x)
    rev_over_rev = pa.grad(lambda x: xp.sum(pa.grad(_f)(x) * v))(x)
    lin_of_grad = pa.linearize(pa.grad(_f), x)[1](v)
    grad_of_lin = pa.grad(lambda x: pa.linearize(_f, x)[1](v))(x)
    for got in (fwd_over_rev, rev_over_fwd, rev_over_rev, lin_of_grad, grad_of_lin):
        assert_close(got, hv, rtol=1e-11, atol=1e-12)
    # w^T H v by two forward levels
    w = arr([0.2, 1.0, 0.3])
    wHv = pa.jvp(lambda x: pa.jvp(_f, (x,), (v,))[1], (x,), (w,))[1]
    assert_close(wHv, np.asarray(to_numpy(w) @ hv), rtol=1e-11)


def test_hvp_over_a_pytree():
    def f(p):
        return xp.sum(p["a"] * p["a"] * p["b"]) + xp.sum(xp.exp(p["b"]))

    p = {"a": arr([1.0, 2.0]), "b": arr([0.5, -1.0])}
    v = {"a": arr([1.0, 0.0]), "b": arr([0.0, 2.0])}
    _, hv = pa.jvp(pa.grad(f), (p,), (v,))
    an, bn = to_numpy(p["a"]), to_numpy(p["b"])
    va, vb = to_numpy(v["a"]), to_numpy(v["b"])
    # d2f/da2 = 2b, d2f/dadb = 2a, d2f/db2 = exp(b)
    assert_close(hv["a"], 2 * bn * va + 2 * an * vb)
    assert_close(hv["b"], 2 * an * va + np.exp(bn) * vb)


# ------------------------------------------------------------------------------ modes across levels


def test_stop_gradient_blocks_every_level():
    # f = x^2 * sg(x): f' = 2x sg(x) (=2x^2), f'' = 2 sg(x) (=2x), f''' = 0
    def f(x):
        return x * x * pa.stop_gradient(x)

    x = arr(1.5)
    assert_close(pa.grad(f)(x), np.asarray(4.5))
    assert_close(pa.grad(pa.grad(f))(x), np.asarray(3.0))
    assert_close(pa.grad(pa.grad(pa.grad(f)))(x), np.asarray(0.0))
    assert_close(pa.jvp(pa.grad(f), (x,), (one(),))[1], np.asarray(3.0))
    assert_close(pa.grad(lambda x: pa.jvp(f, (x,), (one(),))[1])(x), np.asarray(3.0))


def test_no_grad_inside_inner_function_blocks_outer_level_too():
    def inner(y):
        with pa.no_grad():
            c = y * y  # constant to every grad level existing here
        return c * y

    # inner grad: c = y^2 -> 9;  the outer level recorded nothing through c either
    x = arr(3.0)
    assert_close(pa.grad(inner)(x), np.asarray(9.0))
    assert_close(pa.grad(pa.grad(inner))(x), np.asarray(0.0))
    # forward levels ignore no_grad: the jvp of the inner grad sees d/dy (c) = 0 only at the grad level
    assert_close(pa.jvp(pa.grad(inner), (x,), (one(),))[1], np.asarray(6.0))


def test_concrete_values_in_nested_levels():
    def f(x):
        if float(x) > 1.0 and int(x * 2.0) == 4 and bool(x < 3.0):
            return x**3
        return x

    x = arr(2.0)
    assert_close(pa.grad(pa.grad(f))(x), np.asarray(12.0))
    assert_close(pa.jvp(pa.grad(f), (x,), (one(),))[1], np.asarray(12.0))
    assert_close(pa.grad(pa.grad(f))(arr(0.5)), np.asarray(0.0))


def test_vjp_fn_called_under_an_outer_grad():
    # differentiate the backward pass itself: d/dx [vjp of sin at x, cotangent 1] = -sin(x)
    def g(x):
        _, f_vjp = pa.vjp(xp.sin, x)
        return f_vjp(one())[0]

    assert_close(pa.grad(g)(arr(0.4)), np.asarray(-np.sin(0.4)), rtol=1e-12)


def test_per_example_gradients_vmap_of_grad():
    w = arr([0.5, -1.0])
    xs = arr([[1.0, 2.0], [3.0, -1.0], [0.0, 0.5]])

    def loss(w, x):
        return xp.sum(xp.sin(w * x))

    per = pa.vmap(pa.grad(loss), in_dims=(None, 0))(w, xs)
    loop = np.stack([to_numpy(pa.grad(loss)(w, xs[i, ...])) for i in range(3)])
    assert_close(per, loop, rtol=1e-12)
    assert_close(per, np.cos(to_numpy(w) * to_numpy(xs)) * to_numpy(xs), rtol=1e-12)


def test_escaped_inner_tracer_is_an_error_at_the_outer_level():
    leaked = []

    def outer(x):
        def inner(y):
            leaked.append(y)
            return y * x

        pa.grad(inner)(x)
        return xp.sin(leaked[0]) * x  # the inner level is over: its tracer must not be used

    with pytest.raises(RuntimeError, match="escaped"):
        pa.grad(outer)(arr(1.0))
    assert core.current_level() == 0


def test_linearize_jvp_fn_under_vmap_and_grad():
    # vmap of jvp_fn over the basis is the Jacobian; grad of <w, jvp_fn(t)> in t is J^T w
    x = arr([0.4, -0.3, 1.2])
    _, jvp_fn = pa.linearize(pa.grad(_f), x)
    jac = pa.vmap(jvp_fn)(BX.eye(3, dtype=BX.float64))
    h = _hessian(to_numpy(x))
    assert_close(jac, h.T, rtol=1e-11, atol=1e-12)
    w = arr([1.0, -2.0, 0.5])
    gt = pa.grad(lambda t: xp.sum(jvp_fn(t) * w))(arr([0.0, 0.0, 0.0]))
    assert_close(gt, h.T @ to_numpy(w), rtol=1e-11, atol=1e-12)
    # linearize inside vmap: one linearization per example
    xs = arr([[0.1, 0.2, 0.3], [1.0, -1.0, 0.5]])
    v = arr([1.0, 0.0, 2.0])
    hvs = pa.vmap(lambda x: pa.linearize(pa.grad(_f), x)[1](v))(xs)
    for i in range(2):
        assert_close(hvs[i, ...], _hessian(to_numpy(xs)[i]) @ to_numpy(v), rtol=1e-11, atol=1e-12)
