"""Derivatives take their primal's dtype, as in JAX and torch.func: the cotangent of an input has the
input's dtype (grad, vjp_fn, jacrev, hessian), the tangent of an output the output's (jvp, linearize,
jacfwd), whatever precision the function computed in. Jacobians refuse integer outputs alike."""

import numpy as np
import pytest
from helpers import assert_close, raises_cleanly, to_numpy

import polyad as pa
from polyad import xp
from polyad.core import dispatch

BX = dispatch.default_backend().xp
C64 = BX.asarray([1.0, 2.0, -0.5], dtype=BX.float64)  # a float64 constant: promotes float32 inputs
X32 = BX.asarray([0.3, -1.2, 2.0], dtype=BX.float32)
T32 = BX.asarray([1.0, 0.5, -2.0], dtype=BX.float32)
xn, cn, tn = to_numpy(X32).astype(np.float64), to_numpy(C64), to_numpy(T32).astype(np.float64)


def f(v):
    return xp.sin(v) * C64  # float64 output of a float32 input


def loss(v):
    return xp.sum(f(v))


def _check(got, dtype, expected):
    assert got.dtype == dtype, (got.dtype, dtype)
    rtol = 1e-5 if dtype == BX.float32 else 1e-12
    np.testing.assert_allclose(to_numpy(got).astype(np.float64), expected, rtol=rtol, atol=1e-6)


def test_input_cotangents_have_the_input_dtype():
    _check(pa.grad(loss)(X32), BX.float32, np.cos(xn) * cn)
    value, g = pa.value_and_grad(loss)(X32)
    assert value.dtype == BX.float64
    _check(g, BX.float32, np.cos(xn) * cn)
    out, vjp_fn = pa.vjp(f, X32)
    assert out.dtype == BX.float64
    _check(vjp_fn(BX.ones(3, dtype=BX.float64))[0], BX.float32, np.cos(xn) * cn)
    _check(pa.jacrev(f)(X32), BX.float32, np.diag(np.cos(xn) * cn))
    _check(pa.hessian(loss)(X32), BX.float32, np.diag(-np.sin(xn) * cn))
    _check(pa.vmap(pa.grad(loss))(BX.stack([X32, X32])), BX.float32, np.stack([np.cos(xn) * cn] * 2))


def test_output_tangents_have_the_output_dtype():
    out, tangent = pa.jvp(f, (X32,), (T32,))
    assert out.dtype == BX.float64
    _check(tangent, BX.float64, np.cos(xn) * cn * tn)
    _, jvp_fn = pa.linearize(f, X32)
    _check(jvp_fn(T32), BX.float64, np.cos(xn) * cn * tn)
    _check(pa.jacfwd(f)(X32), BX.float64, np.diag(np.cos(xn) * cn))
    # a constant plus a float32 input: the tangent is float32 on the way but the output is float64
    _, tangent = pa.jvp(lambda v: v + C64, (X32,), (T32,))
    _check(tangent, BX.float64, tn)


def test_a_narrowing_function_keeps_each_side_in_its_dtype():
    x64 = BX.asarray(xn, dtype=BX.float64)

    def narrow(v):
        return xp.astype(xp.sin(v), BX.float32)

    _, tangent = pa.jvp(narrow, (x64,), (BX.ones(3, dtype=BX.float64),))
    _check(tangent, BX.float32, np.cos(xn))
    _check(pa.grad(lambda v: xp.sum(narrow(v)))(x64), BX.float64, np.cos(xn))


def test_a_real_input_through_complex_values_gets_a_real_gradient():
    x = BX.asarray(xn, dtype=BX.float64)

    def through_complex(v):
        z = xp.astype(v, BX.complex128) * (1.0 + 2.0j)
        return xp.sum(xp.real(z * z))  # Re((1+2i)^2 v^2) = -3 v^2

    _check(pa.grad(through_complex)(x), BX.float64, -6 * xn)


@pytest.mark.parametrize("jacobian", [pa.jacrev, pa.jacfwd])
def test_jacobians_refuse_integer_outputs_alike(jacobian):
    x = BX.asarray(xn, dtype=BX.float64)
    name = jacobian.__name__
    with raises_cleanly(TypeError, f"{name}(", "output has dtype int64", "has_aux=True"):
        jacobian(lambda v: xp.astype(v, BX.int64))(x)
    with raises_cleanly(TypeError, "output[1] has dtype bool"):
        jacobian(lambda v: (xp.sin(v), v > 0.0))(x)
    # as aux, an integer result is fine and the Jacobian is right
    jac, aux = jacobian(lambda v: (xp.sin(v), xp.astype(v, BX.int64)), has_aux=True)(x)
    assert_close(jac, np.diag(np.cos(xn)))
    assert aux.dtype == BX.int64
