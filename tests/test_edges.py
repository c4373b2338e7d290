"""Derivatives at the edges of their domains, each against an analytic value or finite differences:
powers with a zero exponent or a Python base, real operands of complex products, var/std of complex
arrays, imag of real arrays, linspace/arange with traced endpoints, det/slogdet/qr at singular matrices."""

import math

import numpy as np
import pytest
from helpers import assert_close, to_numpy

import polyad as pa
from polyad import xp as pxp
from polyad.core import dispatch
from polyad.ops.linalg.solves import adjugate
from polyad.testing import check_grads, check_jvp, check_vjp
from polyad.testing.op_table import Sampler


def _xp():
    return dispatch.default_backend().xp


def _a(values, dtype=None):
    xp = _xp()
    return xp.asarray(values, dtype=dtype if dtype is not None else xp.float64)


# ------------------------------------------------------------------------------ pow


def test_zero_exponent_has_zero_derivative_at_zero():
    """d(x**0)/dx is 0 everywhere, 0 included (b * x**(b-1) would be 0 * inf there); torch agrees."""
    x = _a([0.0, 1.5, -2.0])
    for f in (lambda x: x**0.0, lambda x: x**0, lambda x: pxp.pow(x, _a([0.0, 0.0, 0.0]))):
        assert_close(pa.grad(lambda x, f=f: pxp.sum(f(x)))(x), _a([0.0, 0.0, 0.0]))
        assert_close(pa.jvp(f, (x,), (_a([1.0, 1.0, 1.0]),))[1], _a([0.0, 0.0, 0.0]))
    # an array exponent with a zero among other entries: each element gets its own derivative
    b = _a([0.0, 2.0, 3.0])
    assert_close(pa.grad(lambda x: pxp.sum(x**b))(_a([0.0, 0.0, 2.0])), _a([0.0, 0.0, 12.0]))


def test_python_base_power():
    """``2.0 ** y`` and ``xp.pow(2.0, y)``: d/dy = log(2) 2**y (the base is a Python number)."""
    y = _a([-1.0, 0.5, 2.0])
    expected = _a([math.log(2.0) * 2.0**v for v in (-1.0, 0.5, 2.0)])
    assert_close(pa.grad(lambda y: pxp.sum(2.0**y))(y), expected, rtol=1e-12)
    assert_close(pa.grad(lambda y: pxp.sum(pxp.pow(2.0, y)))(y), expected, rtol=1e-12)
    assert_close(pa.jvp(lambda y: 2.0**y, (y,), (_a([1.0, 1.0, 1.0]),))[1], expected, rtol=1e-12)
    check_grads(lambda y: 3**y, (y,), order=2)
    # 0 ** y is 0 for y > 0: its derivative in y is 0, not nan
    assert_close(pa.grad(lambda y: pxp.sum(0.0**y))(_a([0.5, 2.0])), _a([0.0, 0.0]))


# ------------------------------------------------------------------------------ complex


def test_real_operand_of_a_complex_product_gets_a_real_cotangent():
    """The cotangent of the real operand is Re(g * conj(other)) (what matmul and * give), for tensordot,
    outer, stack and concat alike."""
    xp = _xp()
    a = _a([1.0, 2.0])
    z = _a([1 + 2j, 3 - 1j], xp.complex128)
    g = xp.asarray(1.0 + 1.0j, dtype=xp.complex128)
    (ga,) = pa.vjp(lambda a: pxp.tensordot(a, z, axes=1), a)[1](g)
    assert_close(ga, _a([3.0, 2.0]))  # Re((1+i)(1-2i)) = 3, Re((1+i)(3+i)) = 2
    ones = xp.ones((2, 2), dtype=xp.complex128) * g
    (ga,) = pa.vjp(lambda a: pxp.linalg.outer(a, z), a)[1](ones)
    assert_close(ga, _a([5.0, 5.0]))
    (ga,) = pa.vjp(lambda a: pxp.stack([a, z]), a)[1](xp.stack([z, z]))
    assert_close(ga, _a([1.0, 3.0]))
    (ga,) = pa.vjp(lambda a: pxp.concat([a, z]), a)[1](xp.concat([z, z]))
    assert_close(ga, _a([1.0, 3.0]))


def _takes(name, x):
    """Whether the backend's function ``name`` accepts ``x`` (NumPy takes complex var and real imag; the
    standard, and so array_api_strict, do not)."""
    try:
        getattr(_xp(), name)(x)
    except TypeError:
        return False
    return True


@pytest.mark.parametrize("name", ["var", "std"])
def test_var_std_of_complex_jvp(name):
    """d var = 2 Re(sum(conj(x - mean) dx)) / (N - correction); std = sqrt(var). Forward and reverse mode
    agree with finite differences (NumPy takes complex input; the standard, and so array_api_strict, do
    not)."""
    xp = _xp()
    if not _takes("var", xp.asarray([1j])):
        pytest.skip("this backend's var/std take real input only, as the standard says")
    z = xp.asarray([1 + 2j, 3 - 1j, 0.5j, -1.0 + 0j])
    t = xp.asarray([1 + 0j, 1j, 0.3 - 0.2j, 0.5 + 0.5j])
    c = z - xp.mean(z)
    var = float(xp.sum(xp.real(xp.conj(c) * c))) / 3
    dvar = 2 * float(xp.sum(xp.real(xp.conj(c) * t))) / 3
    expected = dvar if name == "var" else dvar / (2 * math.sqrt(var))
    f = lambda z: getattr(pxp, name)(z, correction=1)  # noqa: E731
    value, tangent = pa.jvp(f, (z,), (t,))
    assert tangent.dtype == xp.float64 and pa.eval_shape(f, z).dtype == xp.float64
    assert abs(float(tangent) - expected) < 1e-12
    check_grads(f, (z,), order=2)


def test_imag_of_a_real_array_has_zero_gradient():
    x = _a([1.0, -2.0])
    if not _takes("imag", x):
        pytest.skip("this backend's imag takes complex input only, as the standard says")
    g = pa.grad(lambda x: pxp.sum(pxp.imag(x) + x))(x)
    assert_close(g, _a([1.0, 1.0]))  # real, and only from the "+ x"
    assert_close(pa.jvp(pxp.imag, (x,), (x,))[1], _a([0.0, 0.0]))
    # complex input unchanged: grad of sum(imag(z)) is 1j per element
    xp = _xp()
    z = xp.asarray([1 + 1j, 2 - 1j])
    assert_close(pa.grad(lambda z: pxp.sum(pxp.imag(z)))(z), xp.asarray([1j, 1j]))


# ------------------------------------------------------------------------------ creation


def test_linspace_with_traced_endpoints():
    """linspace(a, b, n)[i] = a + (b - a) i / (n - 1): d/da = 1 - i/(n-1), d/db = i/(n-1)."""
    a, b = _a(1.0), _a(3.0)
    w = [i / 4 for i in range(5)]
    ga, gb = pa.grad(lambda a, b: pxp.sum(pxp.linspace(a, b, 5) * _a(w)), argnums=(0, 1))(a, b)
    assert abs(float(ga) - sum((1 - v) * v for v in w)) < 1e-12
    assert abs(float(gb) - sum(v * v for v in w)) < 1e-12
    assert_close(pxp.linspace(pa.Tensor(a), b, 5), _xp().linspace(1.0, 3.0, 5))
    check_grads(lambda a, b: pxp.linspace(a, b, 4, endpoint=False), (a, b), order=2)
    check_grads(lambda a, b: pxp.linspace(a, b, 3), (_a([1.0, -2.0]), b), order=2)  # array endpoints
    out = pa.vmap(lambda a: pxp.linspace(a, 3.0, 3))(_a([0.0, 1.0]))
    assert_close(out, _a([[0.0, 1.5, 3.0], [1.0, 2.0, 3.0]]))


def test_arange_with_traced_start_and_step():
    """arange(a, stop, s)[k] = a + k s: d/da = 1, d/ds = k (the length is read from the values)."""
    assert float(pa.grad(lambda a: pxp.sum(pxp.arange(a, a + 3.0)))(_a(1.0))) == 3.0
    assert float(pa.grad(lambda s: pxp.sum(pxp.arange(0.0, 2.0, s)))(_a(0.5))) == 6.0  # 0+1+2+3
    check_grads(lambda a, s: pxp.arange(a, 5.0, s), (_a(0.3), _a(0.7)), order=2)
    assert_close(pxp.arange(pa.Tensor(_a(1.0)), 3.0, 0.5), _a([1.0, 1.5, 2.0, 2.5]))


# ------------------------------------------------------------------------------ linalg at singular points


def _cofactor_adjugate(m):
    """adj(m)[i, j] = (-1)**(i + j) det(m without row j and column i), in NumPy."""
    n = m.shape[0]
    out = np.zeros_like(m)
    for i in range(n):
        for j in range(n):
            minor = np.delete(np.delete(m, j, axis=0), i, axis=1)
            out[i, j] = (-1) ** (i + j) * np.linalg.det(minor)
    return out


SINGULAR = [
    [[1.0, 2.0], [2.0, 4.0]],
    [[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]],  # rank 2: adjugate of rank 1
    [[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [3.0, 6.0, 9.0]],  # rank 1: adjugate 0
    [[0.0, 0.0], [0.0, 0.0]],
]


@pytest.mark.parametrize("m", SINGULAR, ids=["2x2", "rank 2", "rank 1", "zero"])
def test_det_derivatives_at_singular_matrices(m):
    """grad(det) is the transposed adjugate, finite at singular matrices; jvp gives det = 0 and
    tr(adj(x) dx). det is a polynomial, so finite differences are exact enough there too."""
    x = _a(m)
    adj = _cofactor_adjugate(np.asarray(m))
    assert_close(pa.grad(pxp.linalg.det)(x), _a(adj.T.tolist()), atol=1e-12)
    t = Sampler(seed=1).float(*np.asarray(m).shape)
    value, tangent = pa.jvp(pxp.linalg.det, (x,), (t,))
    assert abs(float(value)) < 1e-14  # LAPACK's LU gives 0 exactly, cuSOLVER's -6.7e-16 at rank 2
    assert abs(float(tangent) - float(np.trace(adj @ to_numpy(t)))) < 1e-12
    check_jvp(pxp.linalg.det, (x,))
    check_vjp(pxp.linalg.det, (x,))


def test_grad_det_at_the_doc_example():
    assert_close(pa.grad(pxp.linalg.det)(_a(SINGULAR[0])), _a([[4.0, -2.0], [-2.0, 1.0]]), atol=1e-12)


def test_adjugate_complex_and_in_a_batch():
    xp = _xp()
    z = xp.asarray([[1 + 1j, 2.0 + 0j], [1 + 1j, 2.0 + 0j]])
    assert_close(adjugate(z), xp.asarray([[2.0 + 0j, -2.0], [-1 - 1j, 1 + 1j]]), atol=1e-12)
    check_vjp(pxp.linalg.det, (z,))
    # a stack mixing a singular and an invertible matrix, and vmap over it
    stack = _a([SINGULAR[0], [[2.0, 1.0], [1.0, 3.0]]])
    expected = _a([[[4.0, -2.0], [-2.0, 1.0]], [[3.0, -1.0], [-1.0, 2.0]]])
    assert_close(pa.grad(lambda a: pxp.sum(pxp.linalg.det(a)))(stack), expected, atol=1e-12)
    assert_close(pa.vmap(pa.grad(pxp.linalg.det))(stack), expected, atol=1e-12)
    assert_close(adjugate(_a([[[]]])[..., :0, :0]), _a([[[]]])[..., :0, :0])


def test_adjugate_derivatives_and_second_derivatives_of_det():
    s = Sampler(seed=2)
    x = s.well_conditioned(3)
    check_grads(adjugate, (x,), order=2)
    check_grads(pxp.linalg.det, (x,), order=3)
    check_grads(pxp.linalg.det, (s.complex(3, 3) + 3 * _xp().eye(3),), order=2)
    # second derivatives at a singular matrix need inv: the backend refuses loudly
    with pytest.raises(np.linalg.LinAlgError):
        pa.hessian(pxp.linalg.det)(_a(SINGULAR[0]))


def test_slogdet_at_a_singular_matrix_gives_nan_derivatives():
    """logabsdet is -inf at a singular matrix and has no derivative there: nan, no error (as JAX and
    PyTorch, which give inf or nan); an invertible matrix in the same stack keeps its derivative."""
    x = _a(SINGULAR[0])
    sign, logabsdet = pxp.linalg.slogdet(x)
    assert float(sign) == 0.0 and float(logabsdet) == -math.inf
    g = to_numpy(pa.grad(lambda a: pxp.linalg.slogdet(a).logabsdet)(x))
    assert np.isnan(g).all()
    _, (_, tangent) = pa.jvp(pxp.linalg.slogdet, (x,), (_a([[1.0, 0.0], [0.0, 1.0]]),))
    assert math.isnan(float(tangent))
    stack = _a([SINGULAR[0], [[2.0, 1.0], [1.0, 3.0]]])
    g = to_numpy(pa.vmap(pa.grad(lambda a: pxp.linalg.slogdet(a).logabsdet))(stack))
    assert np.isnan(g[0]).all()
    np.testing.assert_allclose(g[1], np.linalg.inv([[2.0, 1.0], [1.0, 3.0]]).T, rtol=1e-12)


@pytest.mark.parametrize("shape", [(2, 2), (3, 2), (2, 3)])
def test_qr_derivatives_at_the_zero_matrix_are_nan(shape):
    """Q is not determined by a rank-deficient matrix (it jumps), so neither factor has a derivative at
    the zero matrix: nan, no error (JAX and PyTorch give inf or nan)."""
    xp = _xp()
    x = xp.zeros(shape, dtype=xp.float64)
    _, (dq, dr) = pa.jvp(pxp.linalg.qr, (x,), (xp.ones(shape, dtype=xp.float64),))
    assert np.isnan(to_numpy(dq)).all() and np.isnan(to_numpy(dr)).all()
    g = to_numpy(pa.grad(lambda a: pxp.sum(pxp.linalg.qr(a).R))(x))
    k = min(shape)
    assert np.isnan(g[:, :k]).all()
    if shape[1] > k:  # a wide x = [x1 | x2]: R2 = Q^H x2 is linear in x2 for the Q of x1: finite
        q_rows = np.sum(to_numpy(pxp.linalg.qr(x).Q), axis=1, keepdims=True)
        np.testing.assert_allclose(g[:, k:], np.broadcast_to(q_rows, g[:, k:].shape))
