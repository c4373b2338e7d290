"""A zero cotangent stays zero: never NaN unless the function itself is NaN (docs/conventions.rst).

Where an element's cotangent (or tangent) is exactly zero, a rule whose local derivative is infinite or
NaN there gives zero. The test is the ``xp.where(mask, f(x), 0)`` trap: the branch ``where`` does not
select still runs, at a point where ``f'`` is infinite (sqrt at 0, log at 0, asin at 1, exp overflowing,
x * log(x) at 0...); its cotangent is zero, and ``0 * inf`` must not turn the whole derivative into NaN,
under grad, jacrev, jacfwd, jvp and hessian. At the selected element the derivative is ``f'``'s (against
finite differences).
"""

import math

import numpy as np
import pytest
from helpers import assert_close, to_numpy

import polyad as pa
from polyad import xp as pxp
from polyad.core import dispatch
from polyad.xp import special

BX = dispatch.default_backend().xp


def arr(values):
    return BX.asarray(np.asarray(values, dtype=np.float64))


# name -> (f, a point where f' is infinite or NaN (f itself finite or infinite, not NaN), a regular point)
SINGULAR = {
    "sqrt": (pxp.sqrt, 0.0, 0.7),
    "log": (pxp.log, 0.0, 0.7),
    "log1p": (pxp.log1p, -1.0, 0.7),
    "log2": (pxp.log2, 0.0, 0.7),
    "log10": (pxp.log10, 0.0, 0.7),
    "asin": (pxp.asin, 1.0, 0.3),
    "acos": (pxp.acos, -1.0, 0.3),
    "atanh": (pxp.atanh, 1.0, 0.3),
    "acosh": (pxp.acosh, 1.0, 1.7),
    "reciprocal (1 / x)": (lambda x: 1.0 / x, 0.0, 0.7),
    "exp (overflow)": (pxp.exp, 1000.0, 0.7),
    "expm1 (overflow)": (pxp.expm1, 1000.0, 0.7),
    "sinh (overflow)": (pxp.sinh, 1000.0, 0.7),
    "cosh (overflow)": (pxp.cosh, -1000.0, 0.7),
    "x ** 0.5": (lambda x: x**0.5, 0.0, 0.7),
    "x ** 1.5 / x": (lambda x: x**1.5 / x, 0.0, 0.7),
    "x * log(x)": (lambda x: x * pxp.log(x), 0.0, 0.7),
    "atan2(x, x)": (lambda x: pxp.atan2(x, x * 2.0), 0.0, 0.7),
    "2 ** log(x)": (lambda x: 2.0 ** pxp.log(x), 0.0, 0.7),
    "erfinv": (special.erfinv, 1.0, 0.3),
    "ndtri": (special.ndtri, 0.0, 0.3),
    "logit": (special.logit, 0.0, 0.3),
    "entr": (special.entr, 0.0, 0.3),
    "gammaln": (special.gammaln, 0.0, 0.7),
    "vector_norm(ord=0.5)": (
        lambda x: pxp.linalg.vector_norm(pxp.stack([x, 1.0 + 0.0 * x]), ord=0.5),
        0.0,
        0.7,
    ),
}


def _trap(f):
    """``where(mask, f(x), 0)`` element by element, the first element masked out."""
    mask = arr([0.0, 1.0]) > 0.5

    def g(x):
        return pxp.where(mask, pxp.stack([f(x[0]), f(x[1])]), 0.0)

    return g


def _fd(f, x, eps=1e-6):
    return (float(f(arr(x + eps))) - float(f(arr(x - eps)))) / (2 * eps)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("name", list(SINGULAR))
def test_the_unselected_branch_of_where_gives_zero_not_nan(name):
    f, bad, good = SINGULAR[name]
    g = _trap(f)
    x = arr([bad, good])
    d = _fd(f, good)
    expected_jac = np.array([[0.0, 0.0], [0.0, d]])
    assert_close(pa.jacrev(g)(x), expected_jac, rtol=1e-5, atol=1e-7)
    assert_close(pa.jacfwd(g)(x), expected_jac, rtol=1e-5, atol=1e-7)
    assert_close(pa.grad(lambda v: pxp.sum(g(v)))(x), np.array([0.0, d]), rtol=1e-5, atol=1e-7)
    _, t = pa.jvp(g, (x,), (arr([1.0, 1.0]),))
    assert_close(t, np.array([0.0, d]), rtol=1e-5, atol=1e-7)
    h = to_numpy(pa.hessian(lambda v: pxp.sum(g(v)))(x))
    assert np.all(np.isfinite(h)) and h[0, 0] == 0.0 and h[0, 1] == 0.0 and h[1, 0] == 0.0


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_a_term_the_code_overwrites_gets_no_nan():
    """StandardScaler's pattern: ``scale = sqrt(var); scale[scale == 0] = 1`` for a constant column; and
    sklearn's ``0 / 0`` in a term it then replaces."""

    def scale(x):
        var = pxp.mean((x - pxp.mean(x, axis=0)) ** 2, axis=0)
        s = pxp.sqrt(var)
        s[s == 0.0] = 1.0
        ratio = pxp.sum(x, axis=0) / pxp.sum(x * 0.0, axis=0)  # 0/0 in every column: NaN
        ratio[...] = 2.0  # overwritten
        return (x - pxp.mean(x, axis=0)) / s * ratio

    x = arr([[1.0, 2.0], [1.0, 3.0], [1.0, 5.0]])  # the first column is constant
    w = arr([[0.5, -1.0], [2.0, 0.25], [-1.5, 1.0]])
    g = to_numpy(pa.grad(lambda v: pxp.sum(scale(v) * w))(x))
    assert np.all(np.isfinite(g))
    xn, wn = to_numpy(x), to_numpy(w)

    def loss(v):
        return float(pxp.sum(scale(pa.Tensor(arr(v))) * w))

    eps = 1e-6
    fd = np.zeros_like(xn)
    for idx in np.ndindex(xn.shape):
        e = np.zeros_like(xn)
        e[idx] = eps
        fd[idx] = (loss(xn + e) - loss(xn - e)) / (2 * eps)
    # the regular column against finite differences; the constant column (where a perturbation would
    # make the column vary, and its sqrt regular: a kink) has the derivative of the path taken, the
    # overwritten scale being the constant 1: d/dx sum(w * 2 (x - mean x)) = 2 (w - mean w)
    assert_close(g[:, 1], fd[:, 1], rtol=1e-5, atol=1e-6)
    assert_close(g[:, 0], 2.0 * (wn[:, 0] - wn[:, 0].mean()))


def test_nan_from_the_function_itself_stays():
    """The promise is "never NaN unless the function itself is NaN": sqrt(-1) is NaN, and so is its
    derivative with a nonzero cotangent."""
    with np.errstate(invalid="ignore", divide="ignore"):
        g = to_numpy(pa.grad(lambda v: pxp.sum(pxp.sqrt(v)))(arr([-1.0, 4.0])))
    assert math.isnan(g[0]) and g[1] == 0.25


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_zero_safe_products_under_vmap_and_jit():
    f = _trap(pxp.sqrt)
    xs = arr([[0.0, 0.7], [0.0, 4.0]])
    got = pa.vmap(pa.grad(lambda v: pxp.sum(f(v))))(xs)
    assert_close(got, np.array([[0.0, 0.5 / math.sqrt(0.7)], [0.0, 0.25]]))
    assert_close(pa.jit(pa.grad(lambda v: pxp.sum(f(v))))(xs[1, :]), np.array([0.0, 0.25]))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("divide", [False, True])
@pytest.mark.parametrize(
    "d_shape", [(5,), (1, 5), (4, 5)]
)  # a small factor (its own sum decides) and a full one
def test_zero_safe_products_equal_the_masked_formula(divide, d_shape):
    """The zero-safe kernels against ``g * where(m, d, 0)`` / ``g / where(m, d, 1)`` written in NumPy, for
    factors with and without the values the mask replaces, against cotangents with zeros, infinities and
    NaN, broadcast both ways."""
    rng = np.random.default_rng(0)
    op = pa.ops.zero_safe.zero_safe_divide if divide else pa.ops.zero_safe.zero_safe_multiply
    g = rng.standard_normal((4, 5))
    g[0, :] = 0.0
    g[1, 1], g[2, 2] = np.inf, np.nan
    bad = [0.0, np.nan, np.inf] if divide else [np.inf, -np.inf, np.nan]
    factors = [rng.uniform(0.5, 2.0, d_shape)]
    for value in bad:
        d = rng.uniform(0.5, 2.0, d_shape)
        d.flat[0], d.flat[-1] = value, value
        factors.append(d)
    huge = np.full(d_shape, 1e308)  # finite, but its sum overflows: the product decides, as before
    factors.append(huge)
    for d in factors:
        usable = ((d != 0) & (d == d)) if divide else np.isfinite(d)
        m = (g != 0) | usable
        want = g / np.where(m, d, 1.0) if divide else g * np.where(m, d, 0.0)
        got = to_numpy(op(arr(g), arr(d)))
        np.testing.assert_array_equal(got, want)
