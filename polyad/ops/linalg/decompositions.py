"""Decompositions: ``cholesky``, ``eigh``, ``eigvalsh``, ``svd``, ``svdvals`` and ``qr``.

- ``cholesky``, ``eigh`` and ``eigvalsh`` read the Hermitian part ``(x + x^H) / 2`` of their input (as
  JAX does; the backends read one triangle). For Hermitian input, which the standard requires, the values
  are the backend's; derivatives are those of a function of a Hermitian matrix, so cotangents come back
  Hermitian and a non-Hermitian tangent acts through its Hermitian part.
- Eigenvector and singular-vector derivatives are defined only for distinct eigenvalues / singular values
  (and, for the SVD, nonzero ones): they grow like ``1 / (w_j - w_i)`` as two values approach. Where two
  are exactly equal polyad drops the term that would rotate within their common eigenspace (its factor
  is set to 0 instead of dividing by zero; PyTorch and JAX give inf or nan there). That is exact for
  functions that do not depend on the basis chosen inside the eigenspace (the eigenvalues, the projector
  onto the whole eigenspace), so ``grad`` of a function of ``eigh(x).eigenvalues`` is right at repeated
  eigenvalues; for functions of individual vectors the derivative there is undefined and polyad's is one
  arbitrary finite choice. A zero singular value still divides by zero (inf or nan) in the SVD's
  vector derivatives. Complex eigenvectors and singular vectors carry an arbitrary phase: polyad's
  derivatives take the gauge ``Im diag(V^H dV) = 0``, so only phase-invariant functions of them have
  derivatives that match finite differences.
"""

import math
from collections import namedtuple

from polyad.core import bind
from polyad.core.avals import ShapeDtype, device_of, is_complex, shape_of
from polyad.ops.base import conj_if_complex, expand_dims, where
from polyad.ops.base import sum as _sum
from polyad.ops.common import define
from polyad.ops.creation import eye, tril, triu
from polyad.ops.elementwise import imag, safe_divide
from polyad.ops.indexing import getitem
from polyad.ops.linalg.diagonals import diagonal
from polyad.ops.linalg.products import conj_transpose, matmul
from polyad.ops.linalg.shared import leading_batch, leading_batch_multi, real_dtype, real_if_complex, times_i
from polyad.ops.linalg.solves import right_solve, right_solve_h, solve
from polyad.ops.manipulation import concat
from polyad.ops.reductions import any as _any

EighResult = namedtuple("EighResult", ["eigenvalues", "eigenvectors"])
QRResult = namedtuple("QRResult", ["Q", "R"])
SVDResult = namedtuple("SVDResult", ["U", "S", "Vh"])

# ------------------------------------------------------------------------------ helpers


def _sym(x):
    """The Hermitian part ``(x + x^H) / 2``."""
    return (x + conj_transpose(x)) * 0.5


def _eye(k, like, dtype=None):
    return eye(k, dtype=dtype if dtype is not None else like.dtype, device=device_of(like))


def diag_matrix(d):
    """The square matrices with ``d`` (..., k) on their diagonals."""
    k = shape_of(d)[-1]
    return expand_dims(d, axis=-1) * _eye(k, d)


def inverse_gaps(w):
    """``F[..., i, j] = 1 / (w_j - w_i)`` off the diagonal, 0 on it and where two values are equal (the
    within-eigenspace term is dropped: module notes)."""
    k = shape_of(w)[-1]
    eye_k = _eye(k, w)
    gaps = expand_dims(w, axis=-2) - expand_dims(w, axis=-1)
    return safe_divide(1 - eye_k, gaps + eye_k)


def _slice_last(x, start=None, stop=None):
    return getitem(x, (Ellipsis, slice(start, stop)))


# ------------------------------------------------------------------------------ cholesky


def _sym_kernel(xp, x):
    xh = xp.matrix_transpose(x)
    if xp.isdtype(x.dtype, "complex floating"):
        xh = xp.conj(xh)
    return (x + xh) / 2


def _cholesky_vjp(g, y, x, *, upper=False):
    lo = conj_transpose(y) if upper else y
    gl = conj_transpose(g) if upper else g
    t = tril(matmul(conj_transpose(lo), gl))
    m = 0.5 * (t + conj_transpose(tril(t, k=-1)))
    ga = right_solve(solve(conj_transpose(lo), m), lo)  # lo^-H m lo^-1
    return (_sym(ga),)


def _cholesky_jvp(ts, y, x, *, upper=False):
    lo = conj_transpose(y) if upper else y
    z = solve(lo, _sym(ts[0]))  # lo^-1 dA
    w = conj_transpose(solve(lo, conj_transpose(z)))  # lo^-1 dA lo^-H (Hermitian)
    dl = matmul(lo, 0.5 * (tril(w) + tril(w, k=-1)))
    return conj_transpose(dl) if upper else dl


_cholesky = define(
    "linalg.cholesky",
    lambda xp, x, *, upper=False: xp.linalg.cholesky(_sym_kernel(xp, x), upper=upper),
    abstract_eval=lambda xp, x, *, upper=False: ShapeDtype(x.shape, x.dtype, x.device),
    vjp=_cholesky_vjp,
    jvp=_cholesky_jvp,
)
_cholesky.register_rule("batch", leading_batch(_cholesky))


def cholesky(x, /, *, upper=False):
    """Cholesky factor of the Hermitian positive definite matrices in ``x``: lower ``L`` with
    ``x = L L^H``, or upper ``U = L^H`` if ``upper``. Reads the Hermitian part of ``x`` (module notes)."""
    return bind(_cholesky, x, upper=upper)


# ------------------------------------------------------------------------------ eigh, eigvalsh


def _per_stack(xp, f, x):
    """``f`` of the stack of matrices ``x``: one call, or the backend's ``decompose_stack`` (a call per
    matrix, where its batched routine picks other vectors than its one-matrix one: CuPy's)."""
    decompose_stack = getattr(xp, "decompose_stack", None)
    return f(x) if decompose_stack is None else decompose_stack(f, x)


def _eigh_kernel(xp, x):
    def eigh(m):
        w, v = xp.linalg.eigh(_sym_kernel(xp, m))
        return (w, v)

    return _per_stack(xp, eigh, x)


def _eigh_vjp(g, out, x):
    gw, gv = g
    w, v = out
    vh = conj_transpose(v)
    inner = diag_matrix(gw) + inverse_gaps(w) * matmul(vh, gv)
    return (_sym(matmul(v, matmul(inner, vh))),)


def _eigh_jvp(ts, out, x):
    w, v = out
    s = matmul(conj_transpose(v), matmul(_sym(ts[0]), v))
    return real_if_complex(diagonal(s)), matmul(v, inverse_gaps(w) * s)


_eigh = define(
    "linalg.eigh",
    _eigh_kernel,
    abstract_eval=lambda xp, x: (
        ShapeDtype(x.shape[:-1], real_dtype(xp, x.dtype), x.device),
        ShapeDtype(x.shape, x.dtype, x.device),
    ),
    vjp=_eigh_vjp,
    jvp=_eigh_jvp,
    multiple_results=True,
)
_eigh.register_rule("batch", leading_batch_multi(_eigh, 2))


def eigh(x, /):
    """Eigenvalues (ascending) and eigenvectors of the Hermitian matrices in ``x``: a namedtuple
    ``(eigenvalues, eigenvectors)``. Reads the Hermitian part of ``x``. The eigenvector derivative is
    undefined where eigenvalues repeat; there polyad drops the within-eigenspace term, which keeps
    derivatives of the eigenvalues and of whole-eigenspace projectors exact (module notes)."""
    return EighResult(*bind(_eigh, x))


def _eigvalsh_vjp(g, y, x):
    _, v = eigh(x)
    return (matmul(v, expand_dims(g, axis=-1) * conj_transpose(v)),)


def _eigvalsh_jvp(ts, y, x):
    _, v = eigh(x)
    return real_if_complex(_sum(conj_if_complex(v) * matmul(_sym(ts[0]), v), axis=-2))


_eigvalsh = define(
    "linalg.eigvalsh",
    lambda xp, x: xp.linalg.eigvalsh(_sym_kernel(xp, x)),
    abstract_eval=lambda xp, x: ShapeDtype(x.shape[:-1], real_dtype(xp, x.dtype), x.device),
    vjp=_eigvalsh_vjp,
    jvp=_eigvalsh_jvp,
)
_eigvalsh.register_rule("batch", leading_batch(_eigvalsh))


def eigvalsh(x, /):
    """Eigenvalues (ascending) of the Hermitian matrices in ``x``. Reads the Hermitian part of ``x``; its
    derivatives (which need the eigenvectors, computed again) are defined at repeated eigenvalues too."""
    return bind(_eigvalsh, x)


# ------------------------------------------------------------------------------ svd, svdvals


def _svd_abstract(xp, x, *, full_matrices=True):
    m, n = x.shape[-2:]
    k = min(m, n)
    lead = x.shape[:-2]
    u = (m, m) if full_matrices else (m, k)
    vh = (n, n) if full_matrices else (k, n)
    return (
        ShapeDtype(lead + u, x.dtype, x.device),
        ShapeDtype(lead + (k,), real_dtype(xp, x.dtype), x.device),
        ShapeDtype(lead + vh, x.dtype, x.device),
    )


def _svd_check(x, full_matrices):
    m, n = shape_of(x)[-2:]
    if full_matrices and m != n:
        raise NotImplementedError(
            "svd: derivatives with full_matrices=True need square matrices (the extra singular vectors "
            "are not determined by x); use full_matrices=False"
        )
    return m, n, min(m, n)


def _svd_vjp(g, out, x, *, full_matrices=True):
    m, n, k = _svd_check(x, full_matrices)
    gu, gs, gvh = g
    u, s, vh = out
    v = conj_transpose(vh)
    ju = matmul(conj_transpose(u), gu)
    jv = matmul(vh, conj_transpose(gvh))
    f = inverse_gaps(s * s)
    s_row, s_col = expand_dims(s, axis=-2), expand_dims(s, axis=-1)
    inner = (
        diag_matrix(gs) + (f * (ju - conj_transpose(ju))) * s_row + s_col * (f * (jv - conj_transpose(jv)))
    )
    if is_complex(x):
        inner = inner + diag_matrix(times_i(imag(diagonal(ju)) / s, x))
    ga = matmul(u, matmul(inner, vh))
    if m > k:
        ga = ga + matmul((gu - matmul(u, ju)) / s_row, vh)
    if n > k:
        ga = ga + matmul(u, (gvh - matmul(matmul(gvh, v), vh)) / s_col)
    return (ga,)


def _svd_jvp(ts, out, x, *, full_matrices=True):
    m, n, k = _svd_check(x, full_matrices)
    t = ts[0]
    u, s, vh = out
    v = conj_transpose(vh)
    tv = matmul(t, v)
    dp = matmul(conj_transpose(u), tv)
    f = inverse_gaps(s * s)
    s_row, s_col = expand_dims(s, axis=-2), expand_dims(s, axis=-1)
    dph = conj_transpose(dp)
    om_u = f * (dp * s_row + s_col * dph)
    om_v = f * (s_col * dp + dph * s_row)
    if is_complex(x):
        om_u = om_u + diag_matrix(times_i(imag(diagonal(dp)) / s, x))
    du = matmul(u, om_u)
    if m > k:
        du = du + (tv - matmul(u, dp)) / s_row
    dv = matmul(v, om_v)
    if n > k:
        dv = dv + (matmul(conj_transpose(t), u) - matmul(v, dph)) / s_row
    return du, real_if_complex(diagonal(dp)), conj_transpose(dv)


_svd = define(
    "linalg.svd",
    lambda xp, x, *, full_matrices=True: _per_stack(
        xp, lambda m: tuple(xp.linalg.svd(m, full_matrices=full_matrices)), x
    ),
    abstract_eval=_svd_abstract,
    vjp=_svd_vjp,
    jvp=_svd_jvp,
    multiple_results=True,
)
_svd.register_rule("batch", leading_batch_multi(_svd, 3))


def svd(x, /, *, full_matrices=True):
    """Singular value decomposition ``x = U diag(S) Vh``: a namedtuple ``(U, S, Vh)``, S descending.

    Derivatives: with ``full_matrices=False`` (or square matrices), for distinct nonzero singular values;
    where two are equal the within-subspace term is dropped, where one vanishes the singular-vector
    derivatives are inf or nan (module notes). With
    ``full_matrices=True`` and non-square matrices the extra singular vectors are not functions of ``x``
    and differentiating raises NotImplementedError.
    """
    return SVDResult(*bind(_svd, x, full_matrices=full_matrices))


def _svdvals_vjp(g, y, x):
    u, _, vh = svd(x, full_matrices=False)
    return (matmul(u, expand_dims(g, axis=-1) * vh),)


def _svdvals_jvp(ts, y, x):
    u, _, vh = svd(x, full_matrices=False)
    return real_if_complex(_sum(conj_if_complex(u) * matmul(ts[0], conj_transpose(vh)), axis=-2))


_svdvals = define(
    "linalg.svdvals",
    abstract_eval=lambda xp, x: ShapeDtype(
        x.shape[:-2] + (min(x.shape[-2:]),), real_dtype(xp, x.dtype), x.device
    ),
    vjp=_svdvals_vjp,
    jvp=_svdvals_jvp,
)
_svdvals.register_rule("batch", leading_batch(_svdvals))


def svdvals(x, /):
    """Singular values (descending) of the matrices in ``x``; differentiable where they are distinct
    (the singular vectors the derivative needs are computed again)."""
    return bind(_svdvals, x)


# ------------------------------------------------------------------------------ qr


def _qr_abstract(xp, x, *, mode="reduced"):
    m, n = x.shape[-2:]
    k = m if mode == "complete" else min(m, n)
    lead = x.shape[:-2]
    return ShapeDtype(lead + (m, k), x.dtype, x.device), ShapeDtype(lead + (k, n), x.dtype, x.device)


def _qr_check(x, mode):
    m, n = shape_of(x)[-2:]
    if mode == "complete" and m > n:
        raise NotImplementedError(
            "qr: derivatives with mode='complete' and more rows than columns are not supported (the extra "
            "columns of Q are not determined by x); use mode='reduced'"
        )
    return m, n


def _rank_deficient(r):
    """Where the square ``r`` has a zero on its diagonal (x not of full rank), shaped (..., 1, 1): Q's
    derivative does not exist there (Q itself jumps), so the rules give nan (module notes)."""
    return expand_dims(_any(diagonal(r) == 0, axis=-1, keepdims=True), axis=-1)


def _qr_tall_vjp(gq, gr, q, r):
    """Cotangent of ``a = q r`` (m >= n, q m x n, r n x n upper triangular with real diagonal)."""
    m0 = matmul(gr, conj_transpose(r)) - matmul(conj_transpose(q), gq)
    up = triu(m0, k=1)
    c = up + conj_transpose(up) + diag_matrix(real_if_complex(diagonal(m0)))
    bad = _rank_deficient(r)
    out = right_solve_h(gq + matmul(q, c), where(bad, _eye(shape_of(r)[-1], r), r))  # (gq + q c) r^-H
    return where(bad, math.nan, out)


def _qr_tall_jvp(ta, q, r):
    bad = _rank_deficient(r)
    b = right_solve(ta, where(bad, _eye(shape_of(r)[-1], r), r))  # ta r^-1
    c = matmul(conj_transpose(q), b)
    lo = tril(c, k=-1)
    om = lo - conj_transpose(lo)
    if is_complex(c):
        om = om + diag_matrix(times_i(imag(diagonal(c)), c))
    return where(bad, math.nan, matmul(q, om - c) + b), where(bad, math.nan, matmul(c - om, r))


def _qr_vjp(g, out, x, *, mode="reduced"):
    m, n = _qr_check(x, mode)
    gq, gr = g
    q, r = out
    if m >= n:
        return (_qr_tall_vjp(gq, gr, q, r),)
    # wide: x = [x1 | x2] with x1 = q r1 square, r2 = q^H x2
    x2 = _slice_last(x, m)
    gr1, gr2 = _slice_last(gr, None, m), _slice_last(gr, m)
    g1 = _qr_tall_vjp(gq + matmul(x2, conj_transpose(gr2)), gr1, q, _slice_last(r, None, m))
    return (concat([g1, matmul(q, gr2)], axis=-1),)


def _qr_jvp(ts, out, x, *, mode="reduced"):
    m, n = _qr_check(x, mode)
    t = ts[0]
    q, r = out
    if m >= n:
        return _qr_tall_jvp(t, q, r)
    dq, dr1 = _qr_tall_jvp(_slice_last(t, None, m), q, _slice_last(r, None, m))
    dr2 = matmul(conj_transpose(dq), _slice_last(x, m)) + matmul(conj_transpose(q), _slice_last(t, m))
    return dq, concat([dr1, dr2], axis=-1)


_qr = define(
    "linalg.qr",
    lambda xp, x, *, mode="reduced": tuple(xp.linalg.qr(x, mode=mode)),
    abstract_eval=_qr_abstract,
    vjp=_qr_vjp,
    jvp=_qr_jvp,
    multiple_results=True,
)
_qr.register_rule("batch", leading_batch_multi(_qr, 2))


def qr(x, /, *, mode="reduced"):
    """QR decomposition ``x = Q R``: a namedtuple ``(Q, R)`` (``mode`` "reduced" or "complete").

    Derivatives: for full-rank ``x`` in "reduced" mode (any shape) and in "complete" mode when
    ``m <= n`` (then it is the same factorisation); "complete" with ``m > n`` raises NotImplementedError.
    They hold for the backend's gauge, R with a real diagonal. Where ``x`` is rank-deficient (a zero on
    R's diagonal, as for the zero matrix) Q is not determined by ``x`` and has no derivative: derivatives
    through it come back as nan, without an error (JAX and PyTorch give inf or nan there).
    """
    return QRResult(*bind(_qr, x, mode=mode))
