"""Reductions, scans and diff beyond the op table: gradients with respect to ``diff``'s keyword arrays
(prepend/append) and their batching, derivatives at zeros against analytic formulas (products of the
other elements), ``dtype=`` arguments, and the conventions at kinks (ties, zero deviation)."""

import itertools
import math

import numpy as np
import pytest
from helpers import assert_close, to_numpy

import polyad as pa
from polyad import xp as pxp
from polyad.core import dispatch
from polyad.testing import check_grads, check_vmap


def bxp():
    return dispatch.default_backend().xp


def arr(a, dtype=None):
    return bxp().asarray(np.asarray(a, dtype=dtype))


def rand(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape)


# ------------------------------------------------------------------------------ diff's keyword arrays


@pytest.mark.parametrize("n", [1, 2, 3])
def test_diff_grads_wrt_prepend_and_append(n):
    x, p, a = arr(rand(3, 4, seed=1)), arr(rand(3, 2, seed=2)), arr(rand(3, 1, seed=3))
    check_grads(lambda x, p, a: pxp.diff(x, axis=1, n=n, prepend=p, append=a), (x, p, a), order=2)
    check_grads(lambda x, p: pxp.diff(x, axis=-1, n=n, prepend=p), (x, p), order=1)


def test_diff_vjp_matches_transposed_matrix():
    # diff is linear: its Jacobian is the matrix of n-th differences of the joined array
    x, p, a = rand(4, seed=4), rand(2, seed=5), rand(1, seed=6)
    z = np.concatenate([p, x, a])
    d = np.eye(len(z))
    for _ in range(2):
        d = d[1:] - d[:-1]
    jx, jp, ja = pa.jacrev(lambda x, p, a: pxp.diff(x, n=2, prepend=p, append=a), argnums=(0, 1, 2))(
        arr(x), arr(p), arr(a)
    )
    assert_close(jp, d[:, :2])
    assert_close(jx, d[:, 2:6])
    assert_close(ja, d[:, 6:])


def test_diff_vmap_batched_keyword_arrays():
    x, p, a = arr(rand(3, 4, seed=7)), arr(rand(3, 1, seed=8)), arr(rand(3, 2, seed=9))

    def f(x, p, a):
        return pxp.diff(x, n=2, prepend=p, append=a)

    check_vmap(f, (x, p, a), (0, 0, 0))
    check_vmap(f, (x[0, ...], p, a[0, ...]), (None, 0, None))
    check_vmap(f, (x, p[0, ...], a), (0, None, 0))
    check_vmap(f, (x[0, ...], p[0, ...], arr(rand(2, 3, seed=10))), (None, None, 1), out_dims=-1)


# ------------------------------------------------------------------------------ zeros: analytic derivatives


def _others(x, skip):
    return math.prod(v for j, v in enumerate(x) if j not in skip)


@pytest.mark.parametrize(
    "x", [[2.0, 0.0, 3.0, -1.5], [0.0, 0.0, 2.0, 0.5], [0.0, 0.0, 0.0, 1.5], [1.5, -2.0, 0.5, 3.0]]
)
def test_prod_gradient_and_hessian_at_zeros(x):
    n = len(x)
    grad = [_others(x, {i}) for i in range(n)]
    hess = [[0.0 if i == j else _others(x, {i, j}) for j in range(n)] for i in range(n)]
    assert_close(pa.grad(pxp.prod)(arr(x)), arr(grad))
    assert_close(pa.hessian(pxp.prod)(arr(x)), arr(hess))
    assert_close(pa.jacfwd(pa.jacrev(pxp.prod))(arr(x)), arr(hess))


@pytest.mark.parametrize("include_initial", [False, True])
@pytest.mark.parametrize(
    "x", [[2.0, 0.0, 3.0, 0.0, -1.5], [0.0, 1.5, 2.0, -0.5, 3.0], [1.5, 2.0, -0.5, 0.5, 0.0]]
)
def test_cumulative_prod_jacobian_and_second_derivative_at_zeros(x, include_initial):
    n = len(x)
    # y[k] = x[0] ... x[k]: dy[k]/dx[i] = prod_{j <= k, j != i} x[j] for i <= k
    jac = [[_others(x[: k + 1], {i}) if i <= k else 0.0 for i in range(n)] for k in range(n)]
    # d2 y[k] / dx[i] dx[l] = prod_{j <= k, j not in {i, l}} x[j] for i != l, both <= k
    d2 = [[[_others(x[: k + 1], {i, m}) if i != m and i <= k and m <= k else 0.0 for m in range(n)]
           for i in range(n)] for k in range(n)]  # fmt: skip
    if include_initial:
        jac = [[0.0] * n] + jac
        d2 = [[[0.0] * n for _ in range(n)]] + d2

    def f(x):
        return pxp.cumulative_prod(x, include_initial=include_initial)

    assert_close(pa.jacrev(f)(arr(x)), arr(jac))
    assert_close(pa.jacfwd(f)(arr(x)), arr(jac))
    assert_close(pa.jacfwd(pa.jacrev(f))(arr(x)), arr(d2))
    assert_close(pa.jacrev(pa.jacfwd(f))(arr(x)), arr(d2))


def test_cumulative_prod_third_order_with_zeros():
    x = arr([[1.5, 0.0, 2.0, -0.5], [0.0, 0.0, 1.0, 2.0]])
    check_grads(lambda x: pxp.cumulative_prod(x, axis=1), (x,), order=3)


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 13])
def test_cumulative_prod_scan_lengths(size):
    # the rules' log-depth scans take ceil(log2 size) steps: check every power-of-two boundary
    x = rand(2, size, seed=size) * 1.5
    x[0, size // 2] = 0.0
    jac = pa.jacrev(lambda x: pxp.cumulative_prod(x, axis=1))(arr(x))
    expected = np.zeros((2, size, 2, size))
    for r, k, i in itertools.product(range(2), range(size), range(size)):
        if i <= k:
            expected[r, k, r, i] = _others(list(x[r, : k + 1]), {i})
    assert_close(jac, expected)
    check_grads(lambda x: pxp.cumulative_prod(x, axis=1, include_initial=True), (arr(x),), order=2)


def test_vmap_of_grad_of_prod_with_zeros():
    xs = arr([[2.0, 0.0, 3.0], [0.0, 0.0, 1.5], [1.0, 2.0, -1.0]])
    check_vmap(pa.grad(pxp.prod), (xs,), 0)
    check_vmap(pa.grad(lambda x: pxp.sum(pxp.cumulative_prod(x))), (xs,), 1, out_dims=1)


# ------------------------------------------------------------------------------ dtype= arguments


@pytest.mark.parametrize(
    "f",
    [
        lambda x: pxp.sum(x, dtype=pxp.float64),
        lambda x: pxp.prod(x, dtype=pxp.float64),
        lambda x: pxp.sum(pxp.cumulative_sum(x, dtype=pxp.float64)),
        lambda x: pxp.sum(pxp.cumulative_prod(x, dtype=pxp.float64, include_initial=True)),
    ],
    ids=["sum", "prod", "cumulative_sum", "cumulative_prod"],
)
def test_dtype_argument_widens_output_not_cotangent(f):
    x = arr([0.5, 2.0, -1.0], dtype=np.float32)
    y = f(x)
    assert y.dtype == pxp.float64
    g = pa.grad(f)(x)
    assert g.dtype == x.dtype
    # reference: the same function of the input widened beforehand
    expected = pa.grad(lambda v: f(pxp.astype(v, pxp.float32)))(arr(to_numpy(x), dtype=np.float64))
    np.testing.assert_allclose(to_numpy(g), to_numpy(expected), rtol=1e-6)
    _, t = pa.jvp(f, (x,), (arr([1.0, 1.0, 1.0], dtype=np.float32),))
    assert t.dtype == pxp.float64


# ------------------------------------------------------------------------------ conventions at kinks


def test_max_min_share_the_cotangent_among_ties():
    x = arr([[1.0, 3.0, 3.0, 3.0], [2.0, -1.0, 0.0, 2.0]])
    assert_close(
        pa.grad(lambda x: pxp.sum(pxp.max(x, axis=1)))(x), arr([[0, 1 / 3, 1 / 3, 1 / 3], [0.5, 0, 0, 0.5]])
    )
    assert_close(pa.grad(lambda x: pxp.min(x))(x), arr([[0, 0, 0, 0], [0, 1.0, 0, 0]]))
    _, t = pa.jvp(lambda x: pxp.max(x, axis=1), (x,), (arr([[0, 3.0, 6.0, 0], [1.0, 0, 0, 3.0]]),))
    assert_close(t, arr([3.0, 2.0]))


def test_std_of_constant_slice_has_zero_gradient():
    x = arr([[1.5, 1.5, 1.5], [0.0, 1.0, 2.0]])
    g = pa.grad(lambda x: pxp.sum(pxp.std(x, axis=1)))(x)
    # the second row: d std / dx = (x - mean) / (N * std)
    std = math.sqrt(2 / 3)
    assert_close(g, arr([[0.0, 0.0, 0.0], [-1 / (3 * std), 0.0, 1 / (3 * std)]]))


def test_var_gradient_formula_with_correction():
    x = rand(5, seed=11)
    g = pa.grad(lambda x: pxp.var(x, correction=1.0))(arr(x))
    assert_close(g, arr(2 * (x - x.mean()) / 4))


# ------------------------------------------------------------------------------ errors and shapes


@pytest.mark.parametrize("name", ["cumulative_sum", "cumulative_prod"])
def test_cumulative_needs_an_axis(name):
    f = getattr(pxp, name)
    with pytest.raises(ValueError, match="at least one dimension"):
        f(arr(1.5))
    with pytest.raises(ValueError, match="axis must be given"):
        f(arr(rand(2, 3)))


def test_eval_shape_of_reductions():
    x = arr(rand(2, 3, 4))
    assert pa.eval_shape(lambda x: pxp.var(x, axis=(0, -1), keepdims=True), x).shape == (1, 3, 1)
    assert pa.eval_shape(lambda x: pxp.cumulative_sum(x, axis=1, include_initial=True), x).shape == (2, 4, 4)
    assert pa.eval_shape(lambda x: pxp.diff(x, axis=0, n=2, append=x), x).shape == (2, 3, 4)
    assert pa.eval_shape(lambda x: pxp.count_nonzero(x, axis=1), x).dtype == pxp.int64
