"""``linalg.eig`` and ``linalg.eigvals`` (standard 2025.12), on the backend under test: derivatives against
central differences of NumPy's ``eig`` at matrices with distinct eigenvalues.

The eigenvectors' phase is a convention (LAPACK fixes each one's largest component real; polyad's
derivative takes the gauge ``v_k^H dv_k = 0``), so where eigenvectors are complex only phase-invariant
functions are compared: the eigenvalues, ``|V|^2`` elementwise, the projectors ``v_k v_k^H``, and
``V diag(w) V^-1`` (which is ``x``). Real eigenvectors (a real matrix with real eigenvalues) are compared
themselves. vmap against a loop; the gauge itself; second derivatives; bad input.
"""

import numpy as np
import pytest
from helpers import to_numpy

import polyad as pa
from polyad import xp as pxp
from polyad.core import dispatch

EPS = 1e-6


def _b(a):
    return dispatch.default_backend().xp.asarray(np.asarray(a))


def _real_spectrum(rng, n=4):
    """Distinct real eigenvalues near 1..n (disjoint Gershgorin discs)."""
    return np.diag(np.arange(1.0, n + 1)) + rng.uniform(-1, 1, (n, n)) * 0.3 / n


def _complex_pair(rng):
    return np.array([[1.0, -2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, -1.0]]) + 0.1 * rng.uniform(-1, 1, (3, 3))


def _complex_input(rng):
    noise = rng.uniform(-1, 1, (3, 3)) + 1j * rng.uniform(-1, 1, (3, 3))
    return np.diag([1.0, 2.0j, -1.0]) + 0.1 * noise


MATRICES = {
    "real spectrum": _real_spectrum,
    "complex pair": _complex_pair,
    "complex input": _complex_input,
}

# phase-invariant functions of (w, V): (polyad, NumPy)
INVARIANT = {
    "eigenvalues": (lambda w, v, xp: w),
    "|V|^2": (lambda w, v, xp: xp.abs(v) ** 2),
    "projectors v_k v_k^H": (lambda w, v, xp: v[..., :, None, :] * xp.conj(v)[..., None, :, :]),
    "V diag(w) V^-1": (lambda w, v, xp: v @ (w[..., :, None] * xp.linalg.inv(v))),
}


def _numpy_eig(a):
    w, v = np.linalg.eig(a)
    return w.astype(complex), v.astype(complex)


def _directions(a, rng):
    """Unit real directions (and imaginary ones for a complex matrix) with their scaling into ``a``."""
    dirs = []
    for idx in np.ndindex(a.shape):
        e = np.zeros(a.shape)
        e[idx] = 1.0
        dirs.append((idx, e, 1.0))
        if np.iscomplexobj(a):
            dirs.append((idx, e, 1j))
    return dirs


def _fd_grad(loss_np, a):
    """Central differences of a real function of ``a``: ``dL/dRe + i dL/dIm`` (polyad's gradient)."""
    g = np.zeros(a.shape, dtype=a.dtype)
    for idx, e, unit in _directions(a, None):
        d = (loss_np(a + EPS * unit * e) - loss_np(a - EPS * unit * e)) / (2 * EPS)
        g[idx] += d * unit
    return g


@pytest.mark.parametrize("fname", list(INVARIANT))
@pytest.mark.parametrize("mname", list(MATRICES))
def test_phase_invariant_derivatives_match_finite_differences(mname, fname):
    rng = np.random.default_rng(len(mname) * 7 + len(fname))
    a = MATRICES[mname](rng)
    f = INVARIANT[fname]
    out_np = lambda m: f(*_numpy_eig(m), np)  # noqa: E731
    weights = rng.standard_normal(out_np(a).shape) + 1j * rng.standard_normal(out_np(a).shape)

    def loss_np(m):
        return float(np.sum(np.real(np.conj(weights) * out_np(m))))

    def loss(m):
        w, v = pxp.linalg.eig(m)
        return pxp.sum(pxp.real(pxp.conj(_b(weights)) * f(w, v, pxp)))

    np.testing.assert_allclose(to_numpy(pa.grad(loss)(_b(a))), _fd_grad(loss_np, a), rtol=1e-6, atol=1e-6)
    # forward mode along one random direction
    t = rng.standard_normal(a.shape) + (1j * rng.standard_normal(a.shape) if np.iscomplexobj(a) else 0)
    _, tangent = pa.jvp(lambda m: f(*pxp.linalg.eig(m), pxp), (_b(a),), (_b(t),))
    fd = (out_np(a + EPS * t) - out_np(a - EPS * t)) / (2 * EPS)
    np.testing.assert_allclose(to_numpy(tangent), fd, rtol=1e-6, atol=1e-6)


def test_real_eigenvectors_match_finite_differences_themselves():
    """A real matrix with real eigenvalues: V is real with unit columns in both conventions (its sign stays
    put), so V's own derivative is NumPy's."""
    rng = np.random.default_rng(3)
    a = _real_spectrum(rng)
    jac = to_numpy(pa.jacfwd(lambda m: pxp.real(pxp.linalg.eig(m).eigenvectors))(_b(a)))
    fd = np.zeros((4, 4, 4, 4))
    for idx, e, _ in _directions(a, None):
        fd[(...,) + idx] = (np.linalg.eig(a + EPS * e)[1] - np.linalg.eig(a - EPS * e)[1]) / (2 * EPS)
    np.testing.assert_allclose(jac, fd, rtol=1e-6, atol=1e-7)
    rev = to_numpy(pa.jacrev(lambda m: pxp.real(pxp.linalg.eig(m).eigenvectors))(_b(a)))
    np.testing.assert_allclose(rev, fd, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("mname", list(MATRICES))
def test_the_gauge(mname):
    """The eigenvector tangent keeps each column's norm (Re v^H dv = 0) and moves no phase (Im v^H dv = 0);
    with the eigenvalue tangent it solves the differentiated eigen-equation dA V + A dV = dV W + V dW."""
    rng = np.random.default_rng(11)
    a = MATRICES[mname](rng)
    t = rng.standard_normal(a.shape) + (1j * rng.standard_normal(a.shape) if np.iscomplexobj(a) else 0)
    (w, v), (dw, dv) = pa.jvp(pxp.linalg.eig, (_b(a),), (_b(t),))
    w, v, dw, dv = map(to_numpy, (w, v, dw, dv))
    np.testing.assert_allclose(np.sum(np.conj(v) * dv, axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(t @ v + a @ dv, dv * w + v * dw, atol=1e-11)


def test_eigvals_derivatives_are_eigs():
    rng = np.random.default_rng(5)
    for make in MATRICES.values():
        a = make(rng)
        t = rng.standard_normal(a.shape) + (1j * rng.standard_normal(a.shape) if np.iscomplexobj(a) else 0)
        _, d_vals = pa.jvp(pxp.linalg.eigvals, (_b(a),), (_b(t),))
        _, (d_w, _) = pa.jvp(pxp.linalg.eig, (_b(a),), (_b(t),))
        np.testing.assert_allclose(to_numpy(d_vals), to_numpy(d_w), rtol=1e-12, atol=1e-12)
        weights = rng.standard_normal(a.shape[-1])

        def loss(m, weights=weights):
            return pxp.sum(pxp.real(pxp.linalg.eigvals(m)) * _b(weights))

        def loss_np(m, weights=weights):
            return float(np.sum(np.real(np.linalg.eigvals(m)) * weights))

        np.testing.assert_allclose(to_numpy(pa.grad(loss)(_b(a))), _fd_grad(loss_np, a), rtol=1e-6, atol=1e-6)


def test_second_derivative():
    """The Hessian of a smooth function of the eigenvalues against differences of its gradient."""
    rng = np.random.default_rng(7)
    a = _real_spectrum(rng, 3)

    def loss(m):
        w = pxp.linalg.eigvals(m)
        return pxp.sum(pxp.real(w) ** 3) + pxp.sum(pxp.abs(pxp.linalg.eig(m).eigenvectors[0, ...]) ** 2)

    hess = to_numpy(pa.hessian(loss)(_b(a))).reshape(9, 9)
    grad = lambda m: to_numpy(pa.grad(loss)(_b(m))).ravel()  # noqa: E731
    fd = np.stack([(grad(a + EPS * e) - grad(a - EPS * e)) / (2 * EPS) for _, e, _ in _directions(a, None)])
    np.testing.assert_allclose(hess, fd, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("in_dim", [0, 1])
def test_vmap_matches_a_loop(in_dim):
    rng = np.random.default_rng(9)
    stack = np.stack([_real_spectrum(rng), _real_spectrum(rng), _real_spectrum(rng)], axis=in_dim)
    examples = [np.take(stack, k, axis=in_dim) for k in range(3)]
    w, v = pa.vmap(pxp.linalg.eig, in_dims=in_dim)(_b(stack))
    for k, m in enumerate(examples):
        wk, vk = _numpy_eig(m)
        np.testing.assert_allclose(to_numpy(w)[k], wk, rtol=1e-12)
        np.testing.assert_allclose(to_numpy(v)[k], vk, rtol=1e-12, atol=1e-14)
    vals = pa.vmap(pxp.linalg.eigvals, in_dims=in_dim)(_b(stack))
    np.testing.assert_allclose(to_numpy(vals), np.stack([np.linalg.eigvals(m) for m in examples]), rtol=1e-12)
    # per-example gradients of a function of the eigenvalues
    grads = pa.vmap(pa.grad(lambda m: pxp.sum(pxp.real(pxp.linalg.eigvals(m)) ** 2)), in_dims=in_dim)(
        _b(stack)
    )
    loop = [
        to_numpy(pa.grad(lambda m: pxp.sum(pxp.real(pxp.linalg.eigvals(m)) ** 2))(_b(m))) for m in examples
    ]
    np.testing.assert_allclose(to_numpy(grads), np.stack(loop), rtol=1e-12, atol=1e-13)


def test_dtypes_follow_the_standard():
    a = _real_spectrum(np.random.default_rng(1), 3)
    for dtype, complex_dtype in ((np.float64, np.complex128), (np.float32, np.complex64)):
        w, v = pxp.linalg.eig(_b(a.astype(dtype)))
        assert to_numpy(w).dtype == complex_dtype and to_numpy(v).dtype == complex_dtype
        assert to_numpy(pxp.linalg.eigvals(_b(a.astype(dtype)))).dtype == complex_dtype
    # the gradient of a float32 input is float32 (the primal's dtype)
    g = pa.grad(lambda m: pxp.sum(pxp.real(pxp.linalg.eigvals(m))))(_b(a.astype(np.float32)))
    assert to_numpy(g).dtype == np.float32
    np.testing.assert_allclose(to_numpy(g), np.eye(3), atol=1e-5)  # d trace / dA = I


@pytest.mark.parametrize(
    "value,error,words",
    [
        (np.ones((2, 3)), ValueError, "square matrices"),
        (np.ones(3), ValueError, "square matrices"),
        (np.ones((2, 2), dtype=np.int64), TypeError, "floating-point"),
    ],
)
def test_bad_input(value, error, words):
    for f in (pxp.linalg.eig, pxp.linalg.eigvals):
        with pytest.raises(error, match=words):
            f(_b(value))


def test_roots_come_in_numpys_order_eagerly_and_under_transforms():
    """``xp.roots`` (and ``np.roots`` on tensors) builds NumPy's companion matrix, so the roots come in
    ``numpy.roots``'s order under jvp and vmap too; each root's derivative in a coefficient is
    ``-r**(N-1-j) / p'(r)`` (issue 31: SciPy's own companion matrix gave another order)."""
    p = np.array([2.0, -1.0, -7.0, 2.0, 3.0])  # roots near -1.6, -0.7, 0.8, 1.4: distinct and real
    expected = np.roots(p)
    assert np.allclose(to_numpy(pxp.roots(_b(p))), expected, rtol=1e-13)
    t = np.array([0.0, 0.0, 1.0, 0.0, 0.0])  # the coefficient of z**2
    value, tangent = pa.jvp(pxp.roots, (_b(p),), (_b(t),))
    assert np.allclose(to_numpy(value), expected, rtol=1e-13)
    slope = np.polyval(np.polyder(p), expected)
    assert np.allclose(to_numpy(tangent), -(expected**2) / slope, rtol=1e-10)
    batched = pa.vmap(pxp.roots)(_b(np.stack([p, 2.0 * p])))
    assert np.allclose(to_numpy(batched), np.stack([expected, expected]), rtol=1e-13)
    if dispatch.default_backend().name == "numpy":  # NumPy's own function on a tensor, by dispatch
        value, _ = pa.jvp(lambda q: np.roots(q), (p,), (t,))
        assert np.allclose(to_numpy(value), expected, rtol=1e-13)
