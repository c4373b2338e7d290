"""Linear algebra: ``matmul``, ``matrix_transpose``, ``tensordot``, ``vecdot`` and the linalg extension.

Family rules: ``leading_batch`` serves ops that already broadcast over leading dimensions (inv, det,
cholesky, ...): the batch dimension moves to the front and the op runs unchanged; ``leading_batch_multi``
is the same for ops with several results (eigh, qr, slogdet, svd).

Conventions shared by the family:

- Complex cotangents follow PyTorch (``g * conj(f'(x))``); every rule below is written in polyad ops, so
  it is itself differentiable (higher derivatives) and batchable.
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

from collections import namedtuple

from polyad.core import bind
from polyad.ops.common import (
    ShapeDtype,
    _bottom,
    broadcast_batch_args,
    define,
    is_complex,
    move_to_front,
    ndim_of,
    shape_of,
    unbroadcast,
)
from polyad.ops.creation import eye, full_like, tril, triu, zeros_like
from polyad.ops.elementwise import _broadcast, conj, imag, real, sign, where
from polyad.ops.elementwise import abs as _abs
from polyad.ops.indexing import getitem
from polyad.ops.manipulation import (
    _inverse,
    broadcast_to,
    concat,
    expand_dims,
    permute_dims,
    reshape,
    squeeze,
    take_index,
)
from polyad.ops.reductions import expand_reduced
from polyad.ops.reductions import sum as _sum

EighResult = namedtuple("EighResult", ["eigenvalues", "eigenvectors"])
QRResult = namedtuple("QRResult", ["Q", "R"])
SlogdetResult = namedtuple("SlogdetResult", ["sign", "logabsdet"])
SVDResult = namedtuple("SVDResult", ["U", "S", "Vh"])


def leading_batch(op):
    """Batching rule of a one-array op that broadcasts over leading dimensions."""
    return lambda info, dims, x, **params: (bind(op, move_to_front(x, dims[0]), **params), 0)


def leading_batch_multi(op, n):
    """``leading_batch`` for an op with ``n`` results: every result is batched at 0."""
    return lambda info, dims, x, **params: (bind(op, move_to_front(x, dims[0]), **params), (0,) * n)


def _cj(x):
    return conj(x) if is_complex(x) else x


# ------------------------------------------------------------------------------ matrix_transpose

_matrix_transpose = define(
    "matrix_transpose",
    abstract_eval=lambda xp, x: ShapeDtype(x.shape[:-2] + (x.shape[-1], x.shape[-2]), x.dtype, x.device),
    vjp=lambda g, y, x: (matrix_transpose(g),),
    linear=True,
)
_matrix_transpose.rules["batch"] = leading_batch(_matrix_transpose)


def matrix_transpose(x, /):
    """Transpose the last two axes of ``x``."""
    return bind(_matrix_transpose, x)


# ------------------------------------------------------------------------------ matmul


def _matmul_shape(a, b):
    a1, b1 = len(a) == 1, len(b) == 1
    A = (1,) + a if a1 else a
    B = b + (1,) if b1 else b
    if A[-1] != B[-2]:
        raise ValueError(f"matmul: shapes {a} and {b} do not align ({A[-1]} != {B[-2]})")
    out = _broadcast(A[:-2], B[:-2]) + (A[-2], B[-1])
    if a1:
        out = out[:-2] + out[-1:]
    if b1:
        out = out[:-1]
    return out


def _matmul_vjp(g, y, a, b):
    a1, b1 = ndim_of(a) == 1, ndim_of(b) == 1
    A = expand_dims(a, axis=0) if a1 else a
    B = expand_dims(b, axis=-1) if b1 else b
    G = expand_dims(g, axis=-1) if b1 else g
    if a1:
        G = expand_dims(G, axis=-2)
    return (
        lambda: reshape(unbroadcast(matmul(G, matrix_transpose(_cj(B))), A), shape_of(a)),
        lambda: reshape(unbroadcast(matmul(matrix_transpose(_cj(A)), G), B), shape_of(b)),
    )


def _matmul_batch(info, dims, a, b):
    da, db = dims
    a_nd = ndim_of(a) - (da is not None)
    b_nd = ndim_of(b) - (db is not None)
    # one matrix against a batch: fold the batch into a single GEMM (a broadcast batched matmul runs
    # one small product per example in NumPy, ~10x slower for per-example vectors, as in jacrev)
    if db is None and a_nd == 1 and ndim_of(b) == 2:
        return matmul(move_to_front(a, da), b), 0
    if da is None and b_nd == 1 and ndim_of(a) == 2:
        return matmul(move_to_front(b, db), matrix_transpose(a)), 0
    if da is None and b_nd == 2 and ndim_of(a) == 2:
        b = permute_dims(b, (1, db, 2) if db == 0 else (0, 1, 2) if db == 1 else (0, 2, 1))  # (k, B, m)
        s = shape_of(b)
        return reshape(matmul(a, reshape(b, (s[0], s[1] * s[2]))), (shape_of(a)[0], s[1], s[2])), 1
    if da is not None:
        a = move_to_front(a, da)
        if a_nd == 1:
            a = expand_dims(a, axis=1)
    if db is not None:
        b = move_to_front(b, db)
        if b_nd == 1:
            b = expand_dims(b, axis=-1)
    elif b_nd == 1:
        b = expand_dims(b, axis=-1)
    if da is None and a_nd == 1:
        a = expand_dims(a, axis=0)
    rank = max(max(a_nd, 2), max(b_nd, 2))
    if da is not None and ndim_of(a) - 1 < rank:
        s = shape_of(a)
        a = reshape(a, (s[0],) + (1,) * (rank - len(s) + 1) + s[1:])
    if db is not None and ndim_of(b) - 1 < rank:
        s = shape_of(b)
        b = reshape(b, (s[0],) + (1,) * (rank - len(s) + 1) + s[1:])
    out = matmul(a, b)
    if b_nd == 1:
        out = squeeze(out, axis=-1)
    if a_nd == 1:
        out = squeeze(out, axis=-1 if b_nd == 1 else -2)
    return out, 0


def _matmul_abstract(xp, a, b):
    return ShapeDtype(_matmul_shape(a.shape, b.shape), xp.result_type(a.dtype, b.dtype), a.device)


def _matmul_kernel(xp, a, b):
    # a contraction of length 1 is an outer product: broadcasting beats a batched GEMM per example
    # (per-example weight gradients in vmap(grad) are exactly this, (B, m, 1) @ (B, 1, n))
    if len(a.shape) >= 2 and len(b.shape) >= 2 and a.shape[-1] == 1 and len(a.shape) + len(b.shape) > 4:
        return a * b
    return xp.matmul(a, b)


_matmul = define(
    "matmul",
    _matmul_kernel,
    abstract_eval=_matmul_abstract,
    vjp=_matmul_vjp,
    bilinear=True,
    batch=_matmul_batch,
)


def matmul(x1, x2, /):
    """Matrix product with broadcasting over leading dimensions (1-D operands as in the standard)."""
    return bind(_matmul, x1, x2)


# ------------------------------------------------------------------------------ helpers (polyad ops only)


def _mH(x):
    """Conjugate transpose of the last two axes."""
    return matrix_transpose(_cj(x))


def _sym(x):
    """The Hermitian part ``(x + x^H) / 2``."""
    return (x + _mH(x)) * 0.5


def _dev(x):
    return getattr(_bottom(x), "device", None)


def _eye(k, like, dtype=None):
    return eye(k, dtype=dtype if dtype is not None else like.dtype, device=_dev(like))


def _diag_sq(d):
    """The square matrices with ``d`` (..., k) on their diagonals."""
    k = shape_of(d)[-1]
    return expand_dims(d, axis=-1) * _eye(k, d)


def _re(x):
    return real(x) if is_complex(x) else x


def _inv_gaps(w):
    """``F[..., i, j] = 1 / (w_j - w_i)`` off the diagonal, 0 on it and where two values are equal (the
    within-eigenspace term is dropped: module notes)."""
    k = shape_of(w)[-1]
    eye_k = _eye(k, w)
    gaps = expand_dims(w, axis=-2) - expand_dims(w, axis=-1)
    return _safe_div(1 - eye_k, gaps + eye_k)


def _times_i(r, like):
    """``1j * r`` for a real array ``r``, complex in ``like``'s dtype (no Python complex scalar)."""
    return r * full_like(r, 1j, dtype=like.dtype)


def _safe_div(a, b):
    """``a / b`` where ``b != 0``, else 0 (the subgradient polyad takes at the kink of a norm)."""
    nz = b != 0
    return where(nz, a, 0.0) / where(nz, b, 1.0)


def _sgn(x):
    """``x / |x|`` (0 at 0): the derivative of ``|x|``, real or complex."""
    if is_complex(x):
        return _safe_div(x, _abs(x))
    return sign(x)


def _right_solve(x, a):
    """``x @ inv(a)`` by one solve: ``(a^-H x^H)^H``."""
    return _mH(solve(_mH(a), _mH(x)))


def _right_solve_h(x, a):
    """``x @ inv(a)^H`` by one solve: ``(a^-1 x^H)^H``."""
    return _mH(solve(a, _mH(x)))


def _add(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return a + b


def _slice_last(x, start=None, stop=None):
    return getitem(x, (Ellipsis, slice(start, stop)))


# ------------------------------------------------------------------------------ tensordot


def _tensordot_axes(axes, n1, n2):
    if isinstance(axes, int):
        if axes < 0:
            raise ValueError(f"tensordot: axes must be a non-negative int, got {axes}")
        return tuple(range(n1 - axes, n1)), tuple(range(axes))
    a1, a2 = axes
    a1 = (a1,) if isinstance(a1, int) else tuple(a1)
    a2 = (a2,) if isinstance(a2, int) else tuple(a2)
    if len(a1) != len(a2):
        raise ValueError(f"tensordot: axes {axes} pair {len(a1)} axes of x1 with {len(a2)} of x2")
    return tuple(a % n1 for a in a1), tuple(a % n2 for a in a2)


def _free(n, axes):
    return [i for i in range(n) if i not in axes]


def _tensordot_abstract(xp, x1, x2, *, axes):
    a1, a2 = axes
    for i, j in zip(a1, a2):
        if x1.shape[i] != x2.shape[j]:
            raise ValueError(f"tensordot: contracted axes {i} and {j} differ in size")
    shape = tuple(x1.shape[i] for i in _free(len(x1.shape), a1))
    shape += tuple(x2.shape[i] for i in _free(len(x2.shape), a2))
    return ShapeDtype(shape, xp.result_type(x1.dtype, x2.dtype), x1.device)


def _permute_back(r, order):
    """``r`` whose axis p is the input's axis ``order[p]``, permuted into the input's order."""
    if list(order) == list(range(len(order))):
        return r
    return permute_dims(r, _inverse(order))


def _tensordot_vjp(g, y, x1, x2, *, axes):
    a1, a2 = axes
    f1, f2 = _free(ndim_of(x1), a1), _free(ndim_of(x2), a2)
    nf1, nf2 = len(f1), len(f2)

    def g1():
        r = tensordot(g, _cj(x2), axes=(tuple(range(nf1, nf1 + nf2)), tuple(f2)))
        return _permute_back(r, f1 + [a1[j] for j in sorted(range(len(a2)), key=lambda j: a2[j])])

    def g2():
        r = tensordot(_cj(x1), g, axes=(tuple(f1), tuple(range(nf1))))
        return _permute_back(r, [a2[j] for j in sorted(range(len(a1)), key=lambda j: a1[j])] + f2)

    return g1, g2


def _tensordot_batch(info, dims, x1, x2, *, axes):
    d1, d2 = dims
    a1, a2 = axes
    if d2 is None:
        x1 = move_to_front(x1, d1)
        return tensordot(x1, x2, axes=(tuple(a + 1 for a in a1), a2)), 0
    if d1 is None:
        x2 = move_to_front(x2, d2)
        return tensordot(x1, x2, axes=(a1, tuple(a + 1 for a in a2))), ndim_of(x1) - len(a1)
    # both batched: a batched matrix product of the flattened free and contracted axes
    x1, x2 = move_to_front(x1, d1), move_to_front(x2, d2)
    s1, s2 = shape_of(x1), shape_of(x2)
    f1, f2 = _free(len(s1) - 1, a1), _free(len(s2) - 1, a2)
    b = s1[0]
    p1 = permute_dims(x1, (0, *(i + 1 for i in f1), *(i + 1 for i in a1)))
    p2 = permute_dims(x2, (0, *(i + 1 for i in a2), *(i + 1 for i in f2)))
    k = _prod(s1[i + 1] for i in a1)
    m1 = reshape(p1, (b, _prod(s1[i + 1] for i in f1), k))
    m2 = reshape(p2, (b, k, _prod(s2[i + 1] for i in f2)))
    out = matmul(m1, m2)
    return reshape(out, (b, *(s1[i + 1] for i in f1), *(s2[i + 1] for i in f2))), 0


def _prod(xs):
    n = 1
    for x in xs:
        n *= x
    return n


_tensordot = define(
    "tensordot",
    lambda xp, x1, x2, *, axes: xp.tensordot(x1, x2, axes=axes),
    abstract_eval=_tensordot_abstract,
    vjp=_tensordot_vjp,
    bilinear=True,
    batch=_tensordot_batch,
)


def tensordot(x1, x2, /, *, axes=2):
    """Tensor contraction of ``x1`` and ``x2`` over ``axes`` (an int: the last ``axes`` axes of ``x1``
    with the first ones of ``x2``; or a pair of sequences of axes)."""
    return bind(_tensordot, x1, x2, axes=_tensordot_axes(axes, ndim_of(x1), ndim_of(x2)))


# ------------------------------------------------------------------------------ vecdot


def _neg_axis(axis, *xs):
    """``axis`` as a negative index into the broadcast shape of ``xs`` (so batching keeps it valid)."""
    n = max(ndim_of(x) for x in xs)
    if not -n <= axis < n:
        raise ValueError(f"axis {axis} is out of bounds for arrays of dimension {n}")
    return axis - n if axis >= 0 else axis


def _vecdot_abstract(xp, x1, x2, *, axis):
    s = _broadcast(x1.shape, x2.shape)
    a = axis % len(s)
    return ShapeDtype(s[:a] + s[a + 1 :], xp.result_type(x1.dtype, x2.dtype), x1.device)


def _vecdot_vjp(g, y, x1, x2, *, axis):
    ge = expand_dims(g, axis=axis)
    return (lambda: unbroadcast(_cj(ge) * x2, x1), lambda: unbroadcast(ge * x1, x2))


def _vecdot_batch(info, dims, x1, x2, *, axis):
    return vecdot(*broadcast_batch_args(dims, (x1, x2)), axis=axis), 0


_vecdot = define(
    "vecdot",
    lambda xp, x1, x2, *, axis: xp.vecdot(x1, x2, axis=axis),
    abstract_eval=_vecdot_abstract,
    vjp=_vecdot_vjp,
    bilinear=True,
    batch=_vecdot_batch,
)


def vecdot(x1, x2, /, *, axis=-1):
    """Dot product ``sum(conj(x1) * x2)`` along ``axis``, broadcasting the other axes."""
    return bind(_vecdot, x1, x2, axis=_neg_axis(axis, x1, x2))


# ------------------------------------------------------------------------------ cross


def _cross_vjp(g, y, x1, x2, *, axis):
    return (
        lambda: unbroadcast(cross(_cj(x2), g, axis=axis), x1),
        lambda: unbroadcast(cross(g, _cj(x1), axis=axis), x2),
    )


def _bcast(t, y):
    return t if shape_of(t) == shape_of(y) else broadcast_to(t, shape_of(y))


_cross = define(
    "linalg.cross",
    abstract_eval=lambda xp, x1, x2, *, axis: ShapeDtype(
        _broadcast(x1.shape, x2.shape), xp.result_type(x1.dtype, x2.dtype), x1.device
    ),
    vjp=_cross_vjp,
    bilinear=True,
    batch=lambda info, dims, x1, x2, *, axis: (cross(*broadcast_batch_args(dims, (x1, x2)), axis=axis), 0),
)


def cross(x1, x2, /, *, axis=-1):
    """Cross product of 3-element vectors along ``axis`` (broadcasting the other axes)."""
    return bind(_cross, x1, x2, axis=_neg_axis(axis, x1, x2))


# ------------------------------------------------------------------------------ outer


def _outer_batch(info, dims, x1, x2):
    d1, d2 = dims
    if d1 is not None:
        x1 = move_to_front(x1, d1)
    if d2 is not None:
        x2 = move_to_front(x2, d2)
    return expand_dims(x1, axis=-1) * expand_dims(x2, axis=-2), 0


_outer = define(
    "linalg.outer",
    abstract_eval=lambda xp, x1, x2: ShapeDtype(
        (x1.shape[0], x2.shape[0]), xp.result_type(x1.dtype, x2.dtype), x1.device
    ),
    vjp=lambda g, y, x1, x2: (lambda: matmul(g, _cj(x2)), lambda: matmul(_cj(x1), g)),
    jvp=lambda ts, y, x1, x2: _add(
        None if ts[0] is None else outer(ts[0], x2), None if ts[1] is None else outer(x1, ts[1])
    ),
    batch=_outer_batch,
)


def outer(x1, x2, /):
    """Outer product of two 1-D arrays."""
    return bind(_outer, x1, x2)


# ------------------------------------------------------------------------------ diagonal, trace


def _diag_len(n, m, offset):
    return max(0, min(n, m - offset) if offset >= 0 else min(n + offset, m))


def _diag_embed_kernel(xp, d, *, offset, n, m):
    batch = tuple(d.shape[:-1])
    out = xp.zeros(batch + (n * m,), dtype=d.dtype, device=d.device)
    length = d.shape[-1]
    if length:
        start = offset if offset >= 0 else -offset * m
        out[..., start : start + (length - 1) * (m + 1) + 1 : m + 1] = d
    return xp.reshape(out, batch + (n, m))


_diag_embed = define(
    "linalg.diag_embed",
    _diag_embed_kernel,
    abstract_eval=lambda xp, d, *, offset, n, m: ShapeDtype(d.shape[:-1] + (n, m), d.dtype, d.device),
    vjp=lambda g, y, d, *, offset, n, m: (diagonal(g, offset=offset),),
    linear=True,
)
_diag_embed.rules["batch"] = leading_batch(_diag_embed)


def diag_embed(d, *, offset=0, n, m):
    """Matrices of shape (..., n, m), zero but for ``d`` (..., L) on diagonal ``offset`` (internal: the
    transpose of ``diagonal``)."""
    return bind(_diag_embed, d, offset=offset, n=n, m=m)


def _diagonal_abstract(xp, x, *, offset=0):
    n, m = x.shape[-2:]
    return ShapeDtype(x.shape[:-2] + (_diag_len(n, m, offset),), x.dtype, x.device)


_diagonal = define(
    "linalg.diagonal",
    abstract_eval=_diagonal_abstract,
    vjp=lambda g, y, x, *, offset=0: (diag_embed(g, offset=offset, n=x.shape[-2], m=x.shape[-1]),),
    linear=True,
)
_diagonal.rules["batch"] = leading_batch(_diagonal)


def diagonal(x, /, *, offset=0):
    """The diagonal ``offset`` of the matrices in ``x`` (last two axes)."""
    return bind(_diagonal, x, offset=offset)


def _trace_abstract(xp, x, *, offset=0, dtype=None):
    return ShapeDtype(x.shape[:-2], dtype if dtype is not None else x.dtype, x.device)


def _trace_vjp(g, y, x, *, offset=0, dtype=None):
    from polyad.ops.dtypes import astype

    n, m = shape_of(x)[-2:]
    d = broadcast_to(expand_dims(g, axis=-1), shape_of(g) + (_diag_len(n, m, offset),))
    out = diag_embed(d, offset=offset, n=n, m=m)
    if out.dtype != x.dtype:
        out = astype(_re(out) if not is_complex(x) else out, x.dtype)
    return (out,)


_trace = define(
    "linalg.trace",
    abstract_eval=_trace_abstract,
    vjp=_trace_vjp,
    linear=True,
)
_trace.rules["batch"] = leading_batch(_trace)


def trace(x, /, *, offset=0, dtype=None):
    """Sum of diagonal ``offset`` of the matrices in ``x`` (in ``dtype`` if given)."""
    return bind(_trace, x, offset=offset, dtype=dtype)


# ------------------------------------------------------------------------------ inv, det, slogdet


def _same(xp, x):
    return ShapeDtype(x.shape, x.dtype, x.device)


_inv = define(
    "linalg.inv",
    abstract_eval=_same,
    vjp=lambda g, y, x: (-matmul(_mH(y), matmul(g, _mH(y))),),
    jvp=lambda ts, y, x: -matmul(y, matmul(ts[0], y)),
)
_inv.rules["batch"] = leading_batch(_inv)


def inv(x, /):
    """Inverse of the square matrices in ``x``."""
    return bind(_inv, x)


def _det_vjp(g, y, x):
    return ((expand_dims(expand_dims(g * _cj(y), axis=-1), axis=-1)) * _mH(inv(x)),)


_det = define(
    "linalg.det",
    abstract_eval=lambda xp, x: ShapeDtype(x.shape[:-2], x.dtype, x.device),
    vjp=_det_vjp,
    jvp=lambda ts, y, x: y * trace(solve(x, ts[0])),
)
_det.rules["batch"] = leading_batch(_det)


def det(x, /):
    """Determinant of the square matrices in ``x``."""
    return bind(_det, x)


def _real_dtype(xp, dtype):
    if dtype == xp.complex128:
        return xp.float64
    if dtype == xp.complex64:
        return xp.float32
    return dtype


def _slogdet_vjp(g, out, x):
    gs, gl = g
    s, _ = out
    ct = gl
    if is_complex(x):
        # d sign = sign * i Im(t), d logabsdet = Re(t), with t = tr(x^-1 dx)
        ct = gl - _times_i(imag(conj(gs) * s), x)
    return (expand_dims(expand_dims(ct, axis=-1), axis=-1) * _mH(inv(x)),)


def _slogdet_jvp(ts, out, x):
    s, _ = out
    t = trace(solve(x, ts[0]))
    if is_complex(x):
        return s * _times_i(imag(t), x), real(t)
    return None, t


_slogdet = define(
    "linalg.slogdet",
    lambda xp, x: tuple(xp.linalg.slogdet(x)),
    abstract_eval=lambda xp, x: (
        ShapeDtype(x.shape[:-2], x.dtype, x.device),
        ShapeDtype(x.shape[:-2], _real_dtype(xp, x.dtype), x.device),
    ),
    vjp=_slogdet_vjp,
    jvp=_slogdet_jvp,
    multiple_results=True,
)
_slogdet.rules["batch"] = leading_batch_multi(_slogdet, 2)


def slogdet(x, /):
    """Sign and natural log of the absolute determinant: a namedtuple ``(sign, logabsdet)``. The sign
    carries no derivative for real ``x``; for complex ``x`` it moves with the phase of the determinant."""
    return SlogdetResult(*bind(_slogdet, x))


# ------------------------------------------------------------------------------ solve


def _solve_abstract(xp, a, b):
    dtype = xp.result_type(a.dtype, b.dtype)
    if len(b.shape) == 1:
        return ShapeDtype(a.shape[:-1], dtype, a.device)
    return ShapeDtype(_broadcast(a.shape[:-2], b.shape[:-2]) + b.shape[-2:], dtype, a.device)


def _solve_vjp(g, y, a, b):
    vec = ndim_of(b) == 1
    cache = []

    def gb():  # a^-H g, shared by both cotangents
        if not cache:
            cache.append(solve(_mH(a), expand_dims(g, axis=-1) if vec else g))
        return cache[0]

    def ga():
        x = expand_dims(y, axis=-1) if vec else y
        return unbroadcast(-matmul(gb(), _mH(x)), a)

    def gb_():
        r = gb()
        return unbroadcast(squeeze(r, axis=-1) if vec else r, b)

    return ga, gb_


def _solve_jvp(ts, y, a, b):
    ta, tb = ts
    vec = ndim_of(b) == 1
    if ta is None:
        return _bcast(solve(a, tb), y)
    x = expand_dims(y, axis=-1) if vec else y
    r = -matmul(ta, x)
    if tb is not None:
        r = r + (expand_dims(tb, axis=-1) if vec else tb)
    out = solve(a, r)
    return squeeze(out, axis=-1) if vec else out


def _solve_batch(info, dims, a, b):
    da, db = dims
    vec = ndim_of(b) - (db is not None) == 1
    if vec and db is None:  # a 1-D b broadcasts against every matrix of a
        return solve(move_to_front(a, da), b), 0
    if vec:
        b, db = expand_dims(move_to_front(b, db), axis=-1), 0
    a, b = broadcast_batch_args((da, db), (a, b))
    out = solve(a, b)
    return (squeeze(out, axis=-1) if vec else out), 0


_solve = define(
    "linalg.solve",
    abstract_eval=_solve_abstract,
    vjp=_solve_vjp,
    jvp=_solve_jvp,
    batch=_solve_batch,
)


def solve(x1, x2, /):
    """The solution ``x`` of ``x1 @ x = x2`` for square ``x1``; a 1-D ``x2`` is one right-hand side for
    every matrix of ``x1``, else ``x2`` is a stack of matrices broadcast against ``x1``. The VJP costs one
    solve with ``x1^H``."""
    return bind(_solve, x1, x2)


# ------------------------------------------------------------------------------ cholesky


def _sym_kernel(xp, x):
    xh = xp.matrix_transpose(x)
    if xp.isdtype(x.dtype, "complex floating"):
        xh = xp.conj(xh)
    return (x + xh) / 2


def _cholesky_vjp(g, y, x, *, upper=False):
    lo = _mH(y) if upper else y
    gl = _mH(g) if upper else g
    t = tril(matmul(_mH(lo), gl))
    m = 0.5 * (t + _mH(tril(t, k=-1)))
    ga = _right_solve(solve(_mH(lo), m), lo)  # lo^-H m lo^-1
    return (_sym(ga),)


def _cholesky_jvp(ts, y, x, *, upper=False):
    lo = _mH(y) if upper else y
    z = solve(lo, _sym(ts[0]))  # lo^-1 dA
    w = _mH(solve(lo, _mH(z)))  # lo^-1 dA lo^-H (Hermitian)
    dl = matmul(lo, 0.5 * (tril(w) + tril(w, k=-1)))
    return _mH(dl) if upper else dl


_cholesky = define(
    "linalg.cholesky",
    lambda xp, x, *, upper=False: xp.linalg.cholesky(_sym_kernel(xp, x), upper=upper),
    abstract_eval=lambda xp, x, *, upper=False: ShapeDtype(x.shape, x.dtype, x.device),
    vjp=_cholesky_vjp,
    jvp=_cholesky_jvp,
)
_cholesky.rules["batch"] = leading_batch(_cholesky)


def cholesky(x, /, *, upper=False):
    """Cholesky factor of the Hermitian positive definite matrices in ``x``: lower ``L`` with
    ``x = L L^H``, or upper ``U = L^H`` if ``upper``. Reads the Hermitian part of ``x`` (module notes)."""
    return bind(_cholesky, x, upper=upper)


# ------------------------------------------------------------------------------ eigh, eigvalsh


def _eigh_kernel(xp, x):
    w, v = xp.linalg.eigh(_sym_kernel(xp, x))
    return (w, v)


def _eigh_vjp(g, out, x):
    gw, gv = g
    w, v = out
    vh = _mH(v)
    inner = _diag_sq(gw) + _inv_gaps(w) * matmul(vh, gv)
    return (_sym(matmul(v, matmul(inner, vh))),)


def _eigh_jvp(ts, out, x):
    w, v = out
    s = matmul(_mH(v), matmul(_sym(ts[0]), v))
    return _re(diagonal(s)), matmul(v, _inv_gaps(w) * s)


_eigh = define(
    "linalg.eigh",
    _eigh_kernel,
    abstract_eval=lambda xp, x: (
        ShapeDtype(x.shape[:-1], _real_dtype(xp, x.dtype), x.device),
        ShapeDtype(x.shape, x.dtype, x.device),
    ),
    vjp=_eigh_vjp,
    jvp=_eigh_jvp,
    multiple_results=True,
)
_eigh.rules["batch"] = leading_batch_multi(_eigh, 2)


def eigh(x, /):
    """Eigenvalues (ascending) and eigenvectors of the Hermitian matrices in ``x``: a namedtuple
    ``(eigenvalues, eigenvectors)``. Reads the Hermitian part of ``x``. The eigenvector derivative is
    undefined where eigenvalues repeat; there polyad drops the within-eigenspace term, which keeps
    derivatives of the eigenvalues and of whole-eigenspace projectors exact (module notes)."""
    return EighResult(*bind(_eigh, x))


def _eigvalsh_vjp(g, y, x):
    _, v = eigh(x)
    return (matmul(v, expand_dims(g, axis=-1) * _mH(v)),)


def _eigvalsh_jvp(ts, y, x):
    _, v = eigh(x)
    return _re(_sum(_cj(v) * matmul(_sym(ts[0]), v), axis=-2))


_eigvalsh = define(
    "linalg.eigvalsh",
    lambda xp, x: xp.linalg.eigvalsh(_sym_kernel(xp, x)),
    abstract_eval=lambda xp, x: ShapeDtype(x.shape[:-1], _real_dtype(xp, x.dtype), x.device),
    vjp=_eigvalsh_vjp,
    jvp=_eigvalsh_jvp,
)
_eigvalsh.rules["batch"] = leading_batch(_eigvalsh)


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
        ShapeDtype(lead + (k,), _real_dtype(xp, x.dtype), x.device),
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
    v = _mH(vh)
    ju = matmul(_mH(u), gu)
    jv = matmul(vh, _mH(gvh))
    f = _inv_gaps(s * s)
    s_row, s_col = expand_dims(s, axis=-2), expand_dims(s, axis=-1)
    inner = _diag_sq(gs) + (f * (ju - _mH(ju))) * s_row + s_col * (f * (jv - _mH(jv)))
    if is_complex(x):
        inner = inner + _diag_sq(_times_i(imag(diagonal(ju)) / s, x))
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
    v = _mH(vh)
    tv = matmul(t, v)
    dp = matmul(_mH(u), tv)
    f = _inv_gaps(s * s)
    s_row, s_col = expand_dims(s, axis=-2), expand_dims(s, axis=-1)
    dph = _mH(dp)
    om_u = f * (dp * s_row + s_col * dph)
    om_v = f * (s_col * dp + dph * s_row)
    if is_complex(x):
        om_u = om_u + _diag_sq(_times_i(imag(diagonal(dp)) / s, x))
    du = matmul(u, om_u)
    if m > k:
        du = du + (tv - matmul(u, dp)) / s_row
    dv = matmul(v, om_v)
    if n > k:
        dv = dv + (matmul(_mH(t), u) - matmul(v, dph)) / s_row
    return du, _re(diagonal(dp)), _mH(dv)


_svd = define(
    "linalg.svd",
    lambda xp, x, *, full_matrices=True: tuple(xp.linalg.svd(x, full_matrices=full_matrices)),
    abstract_eval=_svd_abstract,
    vjp=_svd_vjp,
    jvp=_svd_jvp,
    multiple_results=True,
)
_svd.rules["batch"] = leading_batch_multi(_svd, 3)


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
    return _re(_sum(_cj(u) * matmul(ts[0], _mH(vh)), axis=-2))


_svdvals = define(
    "linalg.svdvals",
    abstract_eval=lambda xp, x: ShapeDtype(
        x.shape[:-2] + (min(x.shape[-2:]),), _real_dtype(xp, x.dtype), x.device
    ),
    vjp=_svdvals_vjp,
    jvp=_svdvals_jvp,
)
_svdvals.rules["batch"] = leading_batch(_svdvals)


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


def _qr_tall_vjp(gq, gr, q, r):
    """Cotangent of ``a = q r`` (m >= n, q m x n, r n x n upper triangular with real diagonal)."""
    m0 = matmul(gr, _mH(r)) - matmul(_mH(q), gq)
    up = triu(m0, k=1)
    c = up + _mH(up) + _diag_sq(_re(diagonal(m0)))
    return _right_solve_h(gq + matmul(q, c), r)  # (gq + q c) r^-H


def _qr_tall_jvp(ta, q, r):
    b = _right_solve(ta, r)  # ta r^-1
    c = matmul(_mH(q), b)
    lo = tril(c, k=-1)
    om = lo - _mH(lo)
    if is_complex(c):
        om = om + _diag_sq(_times_i(imag(diagonal(c)), c))
    return matmul(q, om - c) + b, matmul(c - om, r)


def _qr_vjp(g, out, x, *, mode="reduced"):
    m, n = _qr_check(x, mode)
    gq, gr = g
    q, r = out
    if m >= n:
        return (_qr_tall_vjp(gq, gr, q, r),)
    # wide: x = [x1 | x2] with x1 = q r1 square, r2 = q^H x2
    x2 = _slice_last(x, m)
    gr1, gr2 = _slice_last(gr, None, m), _slice_last(gr, m)
    g1 = _qr_tall_vjp(gq + matmul(x2, _mH(gr2)), gr1, q, _slice_last(r, None, m))
    return (concat([g1, matmul(q, gr2)], axis=-1),)


def _qr_jvp(ts, out, x, *, mode="reduced"):
    m, n = _qr_check(x, mode)
    t = ts[0]
    q, r = out
    if m >= n:
        return _qr_tall_jvp(t, q, r)
    dq, dr1 = _qr_tall_jvp(_slice_last(t, None, m), q, _slice_last(r, None, m))
    dr2 = matmul(_mH(dq), _slice_last(x, m)) + matmul(_mH(q), _slice_last(t, m))
    return dq, concat([dr1, dr2], axis=-1)


_qr = define(
    "linalg.qr",
    lambda xp, x, *, mode="reduced": tuple(xp.linalg.qr(x, mode=mode)),
    abstract_eval=_qr_abstract,
    vjp=_qr_vjp,
    jvp=_qr_jvp,
    multiple_results=True,
)
_qr.rules["batch"] = leading_batch_multi(_qr, 2)


def qr(x, /, *, mode="reduced"):
    """QR decomposition ``x = Q R``: a namedtuple ``(Q, R)`` (``mode`` "reduced" or "complete").

    Derivatives: for full-rank ``x`` in "reduced" mode (any shape) and in "complete" mode when
    ``m <= n`` (then it is the same factorisation); "complete" with ``m > n`` raises NotImplementedError.
    They hold for the backend's gauge, R with a real diagonal.
    """
    return QRResult(*bind(_qr, x, mode=mode))


# ------------------------------------------------------------------------------ matrix_power


def _mat_powers(b, k):
    """``[None, b, b^2, ..., b^(k-1)]`` (None stands for the identity)."""
    ps = [None]
    for _ in range(1, k):
        ps.append(b if ps[-1] is None else matmul(ps[-1], b))
    return ps


def _sandwich(ps, mid, k):
    """``sum_j ps[j] mid ps[k-1-j]``."""
    total = None
    for j in range(k):
        left, right = ps[j], ps[k - 1 - j]
        term = mid if left is None else matmul(left, mid)
        term = term if right is None else matmul(term, right)
        total = _add(total, term)
    return total


def _mpow_vjp(g, y, x, *, n):
    if n == 0:
        return (zeros_like(x),)
    base = x if n > 0 else inv(x)
    bh = _mH(base)
    gb = _sandwich(_mat_powers(bh, abs(n)), g, abs(n))
    if n > 0:
        return (gb,)
    return (-matmul(bh, matmul(gb, bh)),)


def _mpow_jvp(ts, y, x, *, n):
    if n == 0:
        return zeros_like(y)
    t = ts[0]
    base = x if n > 0 else inv(x)
    db = t if n > 0 else -matmul(base, matmul(t, base))
    return _sandwich(_mat_powers(base, abs(n)), db, abs(n))


_matrix_power = define(
    "linalg.matrix_power",
    lambda xp, x, *, n: xp.linalg.matrix_power(x, n),
    abstract_eval=lambda xp, x, *, n: ShapeDtype(x.shape, x.dtype, x.device),
    vjp=_mpow_vjp,
    jvp=_mpow_jvp,
)
_matrix_power.rules["batch"] = leading_batch(_matrix_power)


def matrix_power(x, n, /):
    """``x`` raised to the integer power ``n`` (``n = 0``: identity; ``n < 0``: powers of the inverse)."""
    return bind(_matrix_power, x, n=int(n))


# ------------------------------------------------------------------------------ matrix_rank, pinv


def _rtol_batch(op):
    """Batching rule of ``op(x, rtol)`` where ``rtol`` (None, a float or an array) broadcasts against
    the stack shape ``x.shape[:-2]``."""

    def rule(info, dims, x, rtol):
        dx, dr = dims
        if dr is None:
            return bind(op, move_to_front(x, dx), rtol), 0
        rtol = move_to_front(rtol, dr)
        if dx is None:
            x = broadcast_to(expand_dims(x, axis=0), (rtol.shape[0], *shape_of(x)))
        else:
            x = move_to_front(x, dx)
        stack = ndim_of(x) - 2
        r = ndim_of(rtol)
        if r < stack:
            s = shape_of(rtol)
            rtol = reshape(rtol, (s[0],) + (1,) * (stack - r) + s[1:])
        return bind(op, x, rtol), 0

    return rule


def _rtol_kernel(name):
    def kernel(xp, x, rtol):
        return getattr(xp.linalg, name)(x, rtol=rtol)

    return kernel


def _stack_shape(x, rtol):
    lead = x.shape[:-2]
    if hasattr(rtol, "shape"):
        lead = _broadcast(lead, rtol.shape)
    return lead


_matrix_rank = define(
    "linalg.matrix_rank",
    _rtol_kernel("matrix_rank"),
    abstract_eval=lambda xp, x, rtol: ShapeDtype(
        _stack_shape(x, rtol), xp.__array_namespace_info__().default_dtypes()["indexing"], x.device
    ),
    nondiff=True,
)
_matrix_rank.rules["batch"] = _rtol_batch(_matrix_rank)


def matrix_rank(x, /, *, rtol=None):
    """Rank of the matrices in ``x``: singular values above ``rtol * max singular value`` (no derivative)."""
    return bind(_matrix_rank, x, rtol)


def _pinv_vjp(g, p, x, rtol):
    def gx():
        m, n = shape_of(x)[-2:]
        ph = _mH(p)
        gh = _mH(g)
        out = -matmul(ph, matmul(g, ph))
        # (I - x p) g^H p p^H  and  p^H p g^H (I - p x): zero for square invertible x
        left = matmul(gh, matmul(p, ph))
        out = out + left - matmul(x, matmul(p, left))
        right = matmul(matmul(ph, p), gh)
        out = out + right - matmul(right, matmul(p, x))
        return out

    return gx, None


def _pinv_jvp(ts, p, x, rtol):
    t = ts[0]
    th = _mH(t)
    out = -matmul(p, matmul(t, p))
    a = matmul(matmul(p, _mH(p)), th)  # p p^H t^H (I - x p)
    out = out + a - matmul(a, matmul(x, p))
    b = matmul(th, matmul(_mH(p), p))  # (I - p x) t^H p^H p
    return out + b - matmul(p, matmul(x, b))


_pinv = define(
    "linalg.pinv",
    _rtol_kernel("pinv"),
    abstract_eval=lambda xp, x, rtol: ShapeDtype(
        _stack_shape(x, rtol) + (x.shape[-1], x.shape[-2]), x.dtype, x.device
    ),
    vjp=_pinv_vjp,
    jvp=_pinv_jvp,
)
_pinv.rules["batch"] = _rtol_batch(_pinv)


def pinv(x, /, *, rtol=None):
    """Moore-Penrose pseudo-inverse of the matrices in ``x`` (singular values below ``rtol`` times the
    largest are treated as zero). Differentiable where the rank is locally constant."""
    return bind(_pinv, x, rtol)


# ------------------------------------------------------------------------------ vector_norm


def _norm_parts(x, y, g, axis, keepdims):
    """``y`` and ``g`` reshaped to broadcast against ``x``."""
    s = shape_of(x)
    ye = expand_reduced(y, s, axis, keepdims)
    return ye, (None if g is None else expand_reduced(g, s, axis, keepdims))


def _extreme_weights(ax, ye, axis):
    """Weights of the elements of ``ax`` equal to the extremum ``ye``: ties share equally."""
    from polyad.ops.dtypes import astype

    hit = astype(ax == ye, ax.dtype)
    return hit / _sum(hit, axis=axis, keepdims=True)


def _vnorm_deriv(x, ye, axis, ord):
    """``d ||x|| / d|x_i|`` broadcasting against ``x`` (None for ord 1: all ones); times ``sgn(x)`` it is
    the gradient. Ord 2 and 0 have their own rules."""
    inf = float("inf")
    if ord == 1:
        return None
    ax = _abs(x)
    if ord in (inf, -inf):
        return _extreme_weights(ax, ye, axis)
    p = float(ord)
    return _safe_div(ax ** (p - 1), ye ** (p - 1))


def _vector_norm_vjp(g, y, x, *, axis=None, keepdims=False, ord=2):
    if ord == 0:
        return (zeros_like(x),)
    ye, ge = _norm_parts(x, y, g, axis, keepdims)
    if ord == 2:
        return (ge * _safe_div(x, ye),)
    w = _vnorm_deriv(x, ye, axis, ord)
    s = _sgn(x)
    return (ge * s if w is None else ge * (s * w),)


def _vector_norm_jvp(ts, y, x, *, axis=None, keepdims=False, ord=2):
    if ord == 0:
        return zeros_like(y)
    t = ts[0]
    if ord == 2:
        return _safe_div(_sum(_re(_cj(x) * t), axis=axis, keepdims=keepdims), y)
    ye, _ = _norm_parts(x, y, None, axis, keepdims)
    w = _vnorm_deriv(x, ye, axis, ord)
    d = _re(_cj(_sgn(x)) * t)
    return _sum(d if w is None else d * w, axis=axis, keepdims=keepdims)


def _vector_norm_abstract(xp, x, *, axis=None, keepdims=False, ord=2):
    from polyad.ops.reductions import reduction_shape

    return ShapeDtype(reduction_shape(x.shape, axis, keepdims), _real_dtype(xp, x.dtype), x.device)


_vector_norm = define(
    "linalg.vector_norm",
    abstract_eval=_vector_norm_abstract,
    vjp=_vector_norm_vjp,
    jvp=_vector_norm_jvp,
)


def _vector_norm_batch(info, dims, x, *, axis=None, keepdims=False, ord=2):
    from polyad.ops.reductions import reduced_axes

    x = move_to_front(x, dims[0])
    axes = tuple(a + 1 for a in reduced_axes(axis, ndim_of(x) - 1))
    return vector_norm(x, axis=axes, keepdims=keepdims, ord=ord), 0


_vector_norm.rules["batch"] = _vector_norm_batch


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    """Vector norm of ``x`` over ``axis`` (all axes when None): ``ord`` 2, 1, inf, -inf, 0 (the count of
    nonzeros, zero derivative) or any other p. At zero, and at ties of inf/-inf, polyad takes the
    subgradient 0 and shares the derivative equally among ties."""
    if isinstance(axis, list):
        axis = tuple(axis)
    return bind(_vector_norm, x, axis=axis, keepdims=keepdims, ord=ord)


# ------------------------------------------------------------------------------ matrix_norm


def _mnorm_parts(y, g, keepdims):
    """``y`` and ``g`` with the matrix axes reduced away (shape ``x.shape[:-2]``)."""
    if keepdims:
        y = squeeze(y, axis=(-2, -1))
        g = None if g is None else squeeze(g, axis=(-2, -1))
    return y, g


def _mnorm_direction(x, y, ord):
    """``D`` with ``d||x|| = Re sum(conj(D) * dx)``: the gradient of the norm at ``x`` (shape of x)."""
    inf = float("inf")
    ye = expand_dims(expand_dims(y, axis=-1), axis=-1)
    if ord == "fro":
        return _safe_div(x, ye)
    if ord == "nuc":
        u, _, vh = svd(x, full_matrices=False)
        return matmul(u, vh)
    if ord in (2, -2):
        u, _, vh = svd(x, full_matrices=False)
        i = 0 if ord == 2 else min(shape_of(x)[-2:]) - 1
        return expand_dims(take_index(u, i, axis=ndim_of(u) - 1), axis=-1) * expand_dims(
            take_index(vh, i, axis=ndim_of(vh) - 2), axis=-2
        )
    if ord in (1, -1):  # extremum over columns of the column sums of |x|
        sums = _sum(_abs(x), axis=-2)
        w = _extreme_weights(sums, expand_dims(y, axis=-1), -1)
        return _sgn(x) * expand_dims(w, axis=-2)
    if ord in (inf, -inf):  # over rows of the row sums
        sums = _sum(_abs(x), axis=-1)
        w = _extreme_weights(sums, expand_dims(y, axis=-1), -1)
        return _sgn(x) * expand_dims(w, axis=-1)
    raise ValueError(f"matrix_norm: unknown ord {ord!r}")


def _matrix_norm_vjp(g, y, x, *, keepdims=False, ord="fro"):
    y, g = _mnorm_parts(y, g, keepdims)
    return (expand_dims(expand_dims(g, axis=-1), axis=-1) * _mnorm_direction(x, y, ord),)


def _matrix_norm_jvp(ts, y, x, *, keepdims=False, ord="fro"):
    y0, _ = _mnorm_parts(y, None, keepdims)
    d = _mnorm_direction(x, y0, ord)
    return _sum(_re(_cj(d) * ts[0]), axis=(-2, -1), keepdims=keepdims)


_matrix_norm = define(
    "linalg.matrix_norm",
    abstract_eval=lambda xp, x, *, keepdims=False, ord="fro": ShapeDtype(
        x.shape[:-2] + ((1, 1) if keepdims else ()), _real_dtype(xp, x.dtype), x.device
    ),
    vjp=_matrix_norm_vjp,
    jvp=_matrix_norm_jvp,
)
_matrix_norm.rules["batch"] = leading_batch(_matrix_norm)


def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    """Matrix norm of the matrices in ``x``: ``ord`` "fro", "nuc", 1, -1, 2, -2, inf or -inf.

    Derivatives: 2 and -2 follow the largest / smallest singular value (defined where it is simple);
    1, -1, inf and -inf share the derivative equally among tied columns or rows; at zero the
    subgradient 0.
    """
    return bind(_matrix_norm, x, keepdims=keepdims, ord=ord)
