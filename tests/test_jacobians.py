"""jacrev, jacfwd and hessian against analytic Jacobians and each other: layouts (O + I, tuple argnums,
pytree inputs and outputs), has_aux, chunk_size, vmap of Jacobians against a loop, complex refusal."""

import numpy as np
import pytest
from helpers import assert_close, to_numpy

import polyad as pa
from polyad import core
from polyad import xp as pxp
from polyad.core import dispatch


@pytest.fixture
def A():
    xp = dispatch.default_backend().xp
    return lambda x: xp.asarray(np.asarray(x, dtype=np.float64), dtype=xp.float64)


def rand(*shape, seed=0):
    return np.random.default_rng(seed + 7 * sum(shape)).uniform(-1, 1, shape)


def softmax(x):
    e = pxp.exp(x - pxp.max(x))
    return e / pxp.sum(e)


W, B = rand(4, 3), rand(4, seed=1)
M1, M2 = rand(3, 3, seed=2), rand(3, 4, seed=3)


def _suite():
    """(name, function of the backend-converted constants, input, analytic Jacobian(x))."""
    return [
        ("tanh_affine", lambda c, x: pxp.tanh(c["W"] @ x + c["B"]), rand(3),
         lambda x: (1 - np.tanh(W @ x + B) ** 2)[:, None] * W),
        ("softmax", lambda c, x: softmax(x), rand(5),
         lambda x: np.diag(s := np.exp(x) / np.exp(x).sum()) - np.outer(s, s)),
        ("elementwise", lambda c, x: pxp.sin(x) * x, rand(2, 3),
         lambda x: np.diag((np.cos(x) * x + np.sin(x)).ravel()).reshape(2, 3, 2, 3)),
        ("sum_axis", lambda c, x: pxp.sum(x**2, axis=0), rand(2, 3),
         lambda x: np.einsum("ij,jk->jik", 2 * x, np.eye(3))),
        ("scalar_out", lambda c, x: pxp.sum(pxp.exp(x)), rand(4), lambda x: np.exp(x)),
        ("matmul_chain", lambda c, x: c["M1"] @ (c["M2"] @ x), rand(4), lambda x: M1 @ M2),
        ("scalar_in", lambda c, x: pxp.stack([x, x * x, pxp.sin(x)]), np.array(0.3),
         lambda x: np.array([1.0, 2 * x, np.cos(x)])),
    ]  # fmt: skip


def _consts(A):
    return {"W": A(W), "B": A(B), "M1": A(M1), "M2": A(M2)}


@pytest.mark.parametrize("name", [s[0] for s in _suite()])
def test_jacrev_jacfwd_analytic(A, name):
    _, f, x0, jac = next(s for s in _suite() if s[0] == name)
    c = _consts(A)
    fn = lambda x: f(c, x)  # noqa: E731
    x = A(x0)
    expected = jac(x0)
    assert_close(pa.jacrev(fn)(x), expected, rtol=1e-10, atol=1e-12)
    assert_close(pa.jacfwd(fn)(x), expected, rtol=1e-10, atol=1e-12)
    for chunk in (1, 2, 3, 1000):
        assert_close(pa.jacrev(fn, chunk_size=chunk)(x), expected, rtol=1e-10, atol=1e-12)


def test_argnums_and_layouts(A):
    x, y = A(rand(3)), A(rand(3, seed=1))
    f = lambda x, y: x * y  # noqa: E731
    for jac in (pa.jacrev, pa.jacfwd):
        jx, jy = jac(f, argnums=(0, 1))(x, y)
        assert_close(jx, np.diag(to_numpy(y)))
        assert_close(jy, np.diag(to_numpy(x)))
        assert_close(jac(f, argnums=-1)(x, y), np.diag(to_numpy(x)))
        with pytest.raises(ValueError, match="out of range"):
            jac(f, argnums=2)(x, y)


def test_pytree_inputs_and_outputs(A):
    params = {"w": A(W), "b": A(B)}
    x = A(rand(3, seed=5))

    def f(p, x):
        h = p["w"] @ x + p["b"]
        return {"h": h, "s": pxp.sum(h * h)}, pxp.tanh(x)

    for jac in (pa.jacrev, pa.jacfwd):
        out = jac(f, argnums=(0, 1))(params, x)
        dh, dt = out
        hn = W @ to_numpy(x) + B
        assert set(dh) == {"h", "s"} and isinstance(dh["h"], tuple)
        dh_dp, dh_dx = dh["h"]
        assert_close(dh_dp["w"], np.einsum("ij,k->ijk", np.eye(4), to_numpy(x)))
        assert_close(dh_dp["b"], np.eye(4))
        assert_close(dh_dx, W)
        ds_dp, ds_dx = dh["s"]
        assert_close(ds_dp["w"], 2 * np.outer(hn, to_numpy(x)), rtol=1e-10)
        assert_close(ds_dp["b"], 2 * hn, rtol=1e-10)
        assert_close(ds_dx, 2 * W.T @ hn, rtol=1e-10)
        dt_dp, dt_dx = dt
        assert_close(dt_dp["w"], np.zeros((3, 4, 3)))
        assert_close(dt_dx, np.diag(1 - np.tanh(to_numpy(x)) ** 2), rtol=1e-10)
        # a single argnum: the input pytree without the tuple
        single = jac(lambda p: f(p, x)[0]["h"])(params)
        assert set(single) == {"w", "b"}
        assert_close(single["b"], np.eye(4))


def test_has_aux(A):
    x = A(rand(3))

    def f(x):
        return pxp.sin(x), {"norm": pxp.sum(x * x)}

    for jac in (pa.jacrev, pa.jacfwd):
        j, aux = jac(f, has_aux=True)(x)
        assert_close(j, np.diag(np.cos(to_numpy(x))))
        assert_close(aux["norm"], np.sum(to_numpy(x) ** 2))


def test_hessian_analytic_and_vs_jacrev_jacrev(A):
    Q = rand(3, 3, seed=9)
    x = A(rand(3, seed=4))
    q = A(Q)

    def f(x):
        return pxp.sum(x**3) + x @ (q @ x)

    expected = np.diag(6 * to_numpy(x)) + Q + Q.T
    assert_close(pa.hessian(f)(x), expected, rtol=1e-10)
    assert_close(pa.jacrev(pa.jacrev(f))(x), expected, rtol=1e-10)
    assert_close(pa.jacfwd(pa.jacfwd(f))(x), expected, rtol=1e-10)

    def lse(x):
        return pxp.log(pxp.sum(pxp.exp(x)))

    s = np.exp(to_numpy(x)) / np.exp(to_numpy(x)).sum()
    assert_close(pa.hessian(lse)(x), np.diag(s) - np.outer(s, s), rtol=1e-10)


def test_hessian_argnums_tuple_layout(A):
    x, y = A(rand(2)), A(rand(3, seed=2))

    def f(x, y):
        return pxp.sum(x) ** 2 * pxp.sum(y**2)

    (hxx, hxy), (hyx, hyy) = pa.hessian(f, argnums=(0, 1))(x, y)
    sx, sy2, yn = float(np.sum(to_numpy(x))), float(np.sum(to_numpy(y) ** 2)), to_numpy(y)
    assert_close(hxx, np.full((2, 2), 2 * sy2), rtol=1e-10)
    assert_close(hxy, np.tile(4 * sx * yn, (2, 1)), rtol=1e-10)
    assert_close(hyx, np.tile(4 * sx * yn[:, None], (1, 2)), rtol=1e-10)
    assert_close(hyy, 2 * sx**2 * np.eye(3), rtol=1e-10)


@pytest.mark.parametrize("jac", ["jacrev", "jacfwd"])
def test_vmap_of_jacobian_vs_loop(A, jac):
    xs = A(rand(5, 3))
    c = _consts(A)
    f = lambda x: pxp.tanh(c["W"] @ x + c["B"])  # noqa: E731
    j = getattr(pa, jac)(f)
    got = pa.vmap(j)(xs)
    ref = np.stack([to_numpy(j(xs[i, ...])) for i in range(5)])
    assert got.shape == (5, 4, 3)
    assert_close(got, ref, rtol=1e-12)
    assert_close(pa.vmap(pa.jacrev(f, chunk_size=2))(xs), ref, rtol=1e-12)


def test_grad_of_jacrev(A):
    x = A(rand(3))
    g = pa.grad(lambda x: pxp.sum(pa.jacrev(lambda v: pxp.sin(v) * v, chunk_size=2)(x)))(x)
    xn = to_numpy(x)
    assert_close(g, 2 * np.cos(xn) - xn * np.sin(xn), rtol=1e-10)


def test_complex_refused(A):
    xp = dispatch.default_backend().xp
    z = xp.asarray(np.array([1 + 1j, 2.0]), dtype=xp.complex128)
    x = A(rand(2))
    for jac in (pa.jacrev, pa.jacfwd):
        with pytest.raises(TypeError, match="complex"):
            jac(lambda v: v * 2.0)(z)
        with pytest.raises(TypeError, match="complex"):
            jac(lambda v: pxp.astype(v, xp.complex128) * 1j)(x)
        assert core.current_level() == 0


def test_chunk_size_validation_and_empty_output(A):
    for bad in (0, -2):
        with pytest.raises(ValueError, match="chunk_size"):
            pa.jacrev(pxp.sin, chunk_size=bad)
    x = A(rand(3))
    j = pa.jacrev(lambda v: v[:0] * 2.0)(x)
    assert tuple(j.shape) == (0, 3)
    assert tuple(pa.jacfwd(lambda v: v[:0] * 2.0)(x).shape) == (0, 3)


def test_jacfwd_randomness(A):
    x = A(rand(3))
    f = lambda v: v * pa.random.normal(size=3)  # noqa: E731
    with pytest.raises(RuntimeError, match="randomness"):
        pa.jacfwd(f)(x)
    j = to_numpy(pa.jacfwd(f, randomness="same")(x))
    assert np.count_nonzero(j - np.diag(np.diag(j))) == 0 and np.all(np.diag(j) != 0)
