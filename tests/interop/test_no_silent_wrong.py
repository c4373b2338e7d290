"""The SciPy and scikit-learn functions that used to return silently wrong values under polyad's
transforms (issue 24), each against NumPy, finite differences or an analytic account of what is lost:

- ``scipy.signal.oaconvolve`` writes through a view (``part = ret[..., :k]; part += overlap``);
- ``scipy.stats.boxcox_llf`` computes ``2 * math.log(abs(lmb))``: that term's derivative cannot be
  followed, and polyad says so (``DerivativeLostWarning`` naming ``math.log`` and the line) instead of
  returning a wrong gradient quietly;
- ``sklearn.preprocessing.StandardScaler`` takes ``sqrt`` of a zero variance and overwrites it with 1,
  and computes ``0 / 0`` in a term it then overwrites: zero cotangents stay zero, no NaN.

Runs with ``SCIPY_ARRAY_API=1`` (as the rest of this directory), on the default backend.
"""

import os
import warnings

import pytest

if os.environ.get("SCIPY_ARRAY_API") != "1":
    pytest.skip(
        "needs SCIPY_ARRAY_API=1 before SciPy is imported (make test-interop)", allow_module_level=True
    )
scipy = pytest.importorskip("scipy")
sklearn = pytest.importorskip("sklearn")

import numpy as np  # noqa: E402
import scipy.signal as signal  # noqa: E402
import scipy.stats as stats  # noqa: E402
from helpers import assert_close, to_numpy  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

import polyad as pa  # noqa: E402
from polyad import xp as pxp  # noqa: E402
from polyad.core import dispatch  # noqa: E402

pytestmark = [pytest.mark.interop, pytest.mark.filterwarnings("ignore::RuntimeWarning")]
BX = dispatch.default_backend().xp
EPS = 1e-6


def arr(values):
    return BX.asarray(np.asarray(values, dtype=np.float64))


def _fd_grad(loss, x):
    x = np.asarray(x, dtype=np.float64)
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[idx] = EPS
        g[idx] = (loss(x + e) - loss(x - e)) / (2 * EPS)
    return g


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_oaconvolve_values_and_derivatives_equal_numpys(mode):
    rng = np.random.default_rng(0)
    a, k = rng.uniform(-1, 1, 16), rng.uniform(-1, 1, 3)
    expected = np.convolve(a, k, mode=mode)
    w = rng.uniform(-1, 1, expected.shape)

    def f(a, k):
        return signal.oaconvolve(a, k, mode=mode)

    def loss(a, k):
        return pxp.sum(f(a, k) * arr(w))

    ga, gk = pa.grad(loss, argnums=(0, 1))(arr(a), arr(k))
    assert_close(
        ga, _fd_grad(lambda v: float(np.sum(np.convolve(v, k, mode=mode) * w)), a), rtol=1e-6, atol=1e-8
    )
    assert_close(
        gk, _fd_grad(lambda v: float(np.sum(np.convolve(a, v, mode=mode) * w)), k), rtol=1e-6, atol=1e-8
    )
    t = rng.uniform(-1, 1, 16)
    out, tangent = pa.jvp(f, (arr(a), arr(k)), (arr(t), arr(np.zeros(3))))
    assert_close(out, expected)
    assert_close(tangent, np.convolve(t, k, mode=mode))
    batched = pa.vmap(f)(arr(np.stack([a, 2 * a])), arr(np.stack([k, -k])))
    assert_close(batched, np.stack([expected, -2 * expected]))
    assert_close(pa.jit(f)(arr(a), arr(k)), expected)


def test_boxcox_llf_reports_the_derivative_math_log_loses():
    rng = np.random.default_rng(1)
    data = rng.uniform(0.2, 3.0, 8)
    lmb = 0.7

    def llf(lmb):
        return stats.boxcox_llf(lmb, pxp.asarray(arr(data)))

    with pytest.warns(pa.DerivativeLostWarning, match=r"math\.log\(\) at .*_morestats\.py:\d+"):
        g = float(pa.grad(llf)(arr(lmb)))
    fd = (float(stats.boxcox_llf(lmb + EPS, data)) - float(stats.boxcox_llf(lmb - EPS, data))) / (2 * EPS)
    # what is lost is exactly the math.log term: d/dlmb of -N/2 * (-2 log|lmb|) = N / lmb
    assert abs(g + len(data) / lmb - fd) < 1e-5
    with warnings.catch_warnings():  # escalated, as the interop suite does: an error, never a quiet value
        warnings.simplefilter("error", pa.DerivativeLostWarning)
        with pytest.raises(pa.DerivativeLostWarning):
            pa.grad(llf)(arr(lmb))
        with pytest.raises(pa.DerivativeLostWarning):
            pa.jvp(llf, (arr(lmb),), (arr(1.0),))


def test_standard_scaler_with_a_constant_column_differentiates_without_nan():
    rng = np.random.default_rng(2)
    x = rng.uniform(-1, 1, (6, 3))
    x[:, 0] = 0.5  # zero variance: sqrt(0) is overwritten by 1
    w = rng.uniform(-1, 1, (6, 3))

    def loss(v):
        with sklearn.config_context(array_api_dispatch=True):
            return pxp.sum(StandardScaler().fit_transform(v) * arr(w))

    g = to_numpy(pa.grad(loss)(arr(x)))
    assert np.all(np.isfinite(g))
    fd = _fd_grad(lambda v: float(loss(arr(v))), x)
    assert_close(g[:, 1:], fd[:, 1:], rtol=1e-5, atol=1e-6)  # the regular columns
    # the constant column: the path taken divides by the constant 1, so the derivative is w - mean(w)
    assert_close(g[:, 0], w[:, 0] - w[:, 0].mean())
    with sklearn.config_context(array_api_dispatch=True):
        _, t = pa.jvp(lambda v: StandardScaler().fit_transform(v), (arr(x),), (arr(np.ones_like(x)),))
    assert np.all(np.isfinite(to_numpy(t)))


@pytest.mark.skipif(
    dispatch.default_backend().name != "numpy",
    reason="under transforms on array_api_strict, tf2zpk's normalize hands polyad a NumPy scalar "
    "(not yet traced)",
)
def test_tf2zpk_keeps_numpys_order_under_transforms():
    """SciPy asks ``xp.roots`` before building a companion matrix of its own layout: polyad's follows
    NumPy's, so jvp and vmap give the eager order (issue 31: [-0.5, -1] against NumPy's [-1, -0.5])."""
    b, a = np.array([1.0, 1.5, 0.5]), np.array([1.0, 0.3, 0.2])
    eager = signal.tf2zpk(b, a)[0]
    zeros = lambda b: signal.tf2zpk(b, pxp.asarray(a))[0]  # noqa: E731
    value, _ = pa.jvp(zeros, (arr(b),), (arr(np.ones(3)),))
    assert np.allclose(to_numpy(value), eager, rtol=1e-13)
    batched = pa.vmap(zeros)(arr(np.stack([b, b])))
    assert np.allclose(to_numpy(batched), np.stack([eager, eager]), rtol=1e-13)
