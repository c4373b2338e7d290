"""Linear algebra checks the op table cannot express: phase-invariant functions of complex eigenvectors and
singular vectors, derivatives at repeated eigenvalues, the unsupported derivative cases, closed forms."""

import numpy as np
import pytest
from helpers import assert_close, to_numpy

import polyad as pa
from polyad import xp as pxp
from polyad.core import dispatch
from polyad.testing import check_grads, check_jvp, numerical_jvp
from polyad.testing.op_table import Sampler


@pytest.fixture
def s():
    return Sampler(seed=3)


def _xp():
    return dispatch.default_backend().xp


def _herm(s, n):
    xp = _xp()
    a = s.complex(n, n)
    return a @ xp.conj(xp.matrix_transpose(a)) + xp.eye(n, dtype=xp.complex128) * xp.asarray(
        [float(i) for i in range(n)], dtype=xp.float64
    )


def test_eigh_complex_phase_invariant(s):
    """Eigenvalues and |V|^2 do not depend on the eigenvectors' phases: their derivatives match finite
    differences at orders 1 and 2."""

    def f(a):
        w, v = pxp.linalg.eigh(a)
        return w, pxp.real(v * pxp.conj(v))

    check_grads(f, (_herm(s, 3),), order=2, eps=1e-6, atol=1e-6, rtol=1e-5)


def test_svd_complex_phase_invariant(s):
    def f(a):
        u, sv, vh = pxp.linalg.svd(a, full_matrices=False)
        return sv, pxp.abs(u) ** 2, pxp.abs(vh) ** 2, (u * pxp.expand_dims(sv, axis=0)) @ vh

    check_grads(f, (s.complex(3, 2),), order=1)
    check_grads(f, (s.complex(2, 3),), order=1)


def test_eigh_repeated_eigenvalues_exact_for_invariant_functions():
    """At a repeated eigenvalue the derivative of the eigenvalues, and of the projector onto the whole
    eigenspace, is still the exact one (finite differences agree); nothing is nan."""
    xp = _xp()
    a = xp.asarray([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 3.0]])
    g = pa.grad(lambda m: pxp.sum(pxp.linalg.eigh(m).eigenvalues ** 2))(a)
    assert_close(g, 2 * a, atol=1e-12)

    def projector(m):
        v = pxp.linalg.eigh(m).eigenvectors[:, :2]
        return v @ pxp.matrix_transpose(v)

    t = xp.asarray([[0.3, 0.5, -0.2], [0.5, -0.1, 0.4], [-0.2, 0.4, 0.7]])
    _, jv = pa.jvp(projector, (a,), (t,))
    fd = numerical_jvp(projector, (a,), (t,), 1e-6)
    assert np.all(np.isfinite(to_numpy(jv)))
    assert_close(jv, fd, rtol=1e-5, atol=1e-7)
    ga = pa.grad(lambda m: pxp.sum(projector(m) * t))(a)
    assert abs(float(xp.sum(ga * t)) - float(xp.sum(fd * t))) < 1e-6


def test_eigvalsh_and_svdvals_at_repeated_values():
    xp = _xp()
    eye = xp.eye(3, dtype=xp.float64)
    assert_close(pa.grad(lambda m: pxp.sum(pxp.linalg.eigvalsh(m)))(eye), eye, atol=1e-12)
    assert_close(pa.grad(lambda m: pxp.sum(pxp.linalg.svdvals(m)))(2 * eye), eye, atol=1e-12)


def test_unsupported_derivatives_raise(s):
    a = s.float(3, 2)
    with pytest.raises(NotImplementedError, match="full_matrices"):
        pa.grad(lambda m: pxp.sum(pxp.linalg.svd(m).U))(a)
    with pytest.raises(NotImplementedError, match="complete"):
        pa.grad(lambda m: pxp.sum(pxp.linalg.qr(m, mode="complete").Q))(a)


def test_closed_forms(s):
    """Gradients against textbook formulas: d logdet = inv(A)^T, d tr(A^-1 B) / dB = inv(A)^T, solve's
    cotangents, d ||A||_2 = u1 v1^T."""
    xp = _xp()
    a = s.well_conditioned(3)
    b = s.float(3, 2)
    c = s.float(3, 2)
    a_np, b_np, c_np = to_numpy(a), to_numpy(b), to_numpy(c)
    g = pa.grad(lambda m: pxp.linalg.slogdet(m).logabsdet)(a)
    assert_close(g, np.linalg.inv(a_np).T, rtol=1e-10)
    ga, gb = pa.grad(lambda m, r: pxp.sum(pxp.linalg.solve(m, r) * c), argnums=(0, 1))(a, b)
    lam = np.linalg.solve(a_np.T, c_np)
    assert_close(gb, lam, rtol=1e-10)
    assert_close(ga, -lam @ np.linalg.solve(a_np, b_np).T, rtol=1e-10)
    u, sv, vt = np.linalg.svd(a_np)
    g2 = pa.grad(lambda m: pxp.linalg.matrix_norm(m, ord=2))(a)
    assert_close(g2, np.outer(u[:, 0], vt[0]), rtol=1e-9, atol=1e-12)
    assert xp.linalg.matrix_norm(a, ord=2).shape == ()


def test_hermitian_part_is_read(s):
    """cholesky/eigh read (x + x^H)/2: values are those of the Hermitian part, cotangents are Hermitian."""
    xp = _xp()
    a = s.spd(3)
    skew = s.float(3, 3)
    skew = skew - xp.matrix_transpose(skew)
    assert_close(pxp.linalg.cholesky(a + 0.1 * skew), xp.linalg.cholesky(a), rtol=1e-12)
    g = pa.grad(lambda m: pxp.sum(pxp.linalg.cholesky(m) * skew))(a)
    assert_close(g, xp.matrix_transpose(g), atol=1e-14)
    check_jvp(lambda m: pxp.linalg.eigh(m).eigenvalues, (a + 0.1 * skew,))


def test_namedtuples(s):
    a = s.spd(2)
    r = pxp.linalg.eigh(a)
    assert type(r).__name__ == "EighResult" and r.eigenvalues is r[0]
    assert pxp.linalg.slogdet(a)._fields == ("sign", "logabsdet")
    assert pxp.linalg.svd(a)._fields == ("U", "S", "Vh")
    assert pxp.linalg.qr(a)._fields == ("Q", "R")
    # the transforms keep the namedtuples
    out = pa.vmap(pxp.linalg.eigh)(s.float(2, 2, 2))
    assert type(out).__name__ == "EighResult"
