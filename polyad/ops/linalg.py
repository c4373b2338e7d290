"""Linear algebra: ``matmul``, ``matrix_transpose``, ``tensordot``, ``vecdot`` and the linalg extension.

Family rule: ``leading_batch`` serves ops that already broadcast over leading dimensions (inv, det,
cholesky, ...): the batch dimension moves to the front and the op runs unchanged.
"""

from polyad.core import bind
from polyad.ops.common import (
    ShapeDtype,
    define,
    is_complex,
    move_to_front,
    ndim_of,
    shape_of,
    unbroadcast,
)
from polyad.ops.elementwise import _broadcast, conj
from polyad.ops.manipulation import expand_dims, reshape, squeeze


def leading_batch(op):
    """Batching rule of a one-array op that broadcasts over leading dimensions."""
    return lambda dims, x, **params: (bind(op, move_to_front(x, dims[0]), **params), 0)


def _cj(x):
    return conj(x) if is_complex(x) else x


# ------------------------------------------------------------------------------ matrix_transpose

_matrix_transpose = define(
    "matrix_transpose",
    abstract_eval=lambda xp, x: ShapeDtype(x.shape[:-2] + (x.shape[-1], x.shape[-2]), x.dtype, x.device),
    vjp=lambda g, y, x: (matrix_transpose(g),),
    linear=True,
)
_matrix_transpose.batch = leading_batch(_matrix_transpose)


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


def _matmul_jvp(ts, y, a, b):
    ta, tb = ts
    out = None if ta is None else matmul(ta, b)
    if tb is not None:
        d = matmul(a, tb)
        out = d if out is None else out + d
    return out


def _matmul_batch(dims, a, b):
    da, db = dims
    a_nd = ndim_of(a) - (da is not None)
    b_nd = ndim_of(b) - (db is not None)
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


_matmul = define(
    "matmul", abstract_eval=_matmul_abstract, vjp=_matmul_vjp, jvp=_matmul_jvp, batch=_matmul_batch
)


def matmul(x1, x2, /):
    """Matrix product with broadcasting over leading dimensions (1-D operands as in the standard)."""
    return bind(_matmul, x1, x2)
