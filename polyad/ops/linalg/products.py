"""Products: ``matrix_transpose``, ``matmul``, ``tensordot``, ``vecdot``, ``cross`` and ``outer``.

``matmul``, ``tensordot``, ``vecdot`` and ``cross`` are bilinear (their JVP is the op on each tangent in
turn); ``outer`` writes its JVP, and batches by broadcasting rather than as a product.
"""

from contextlib import contextmanager

from polyad.core import bind
from polyad.core.avals import ShapeDtype, broadcast_shape, ndim_of, read_only, shape_of
from polyad.ops.base import (
    broadcast_batch_args,
    conj_if_complex,
    expand_dims,
    inverse_permutation,
    move_to_front,
    permute_dims,
    real_part_for,
    reshape,
    unbroadcast,
)
from polyad.ops.common import define
from polyad.ops.creation import asarray
from polyad.ops.linalg.shared import add_optional, leading_batch
from polyad.ops.manipulation import squeeze

# ------------------------------------------------------------------------------ matrix_transpose

_matrix_transpose = define(
    "matrix_transpose",
    abstract_eval=lambda xp, x: ShapeDtype(x.shape[:-2] + (x.shape[-1], x.shape[-2]), x.dtype, x.device),
    vjp=lambda g, y, x: (matrix_transpose(g),),
    linear=True,
)
_matrix_transpose.register_rule("batch", leading_batch(_matrix_transpose))


def matrix_transpose(x, /):
    """Transpose the last two axes of ``x``."""
    return bind(_matrix_transpose, x)


def conj_transpose(x):
    """Conjugate transpose of the last two axes."""
    return matrix_transpose(conj_if_complex(x))


# ------------------------------------------------------------------------------ matmul

# Symbolic identity. jacfwd's basis is rows of the identity; while a basis array is registered here
# (``identity_rows``), the batching rule of ``matmul`` gives a matrix times those rows as a slice of the
# matrix's transpose, without the product (W5's and W3's first GEMM).
_IDENTITY_ROWS = {}  # id(array) -> (array, k): the array is rows k, k+1, ... of an identity matrix


def identity_rows(x):
    """``k`` if ``x`` is registered as rows ``k:k + len(x)`` of an identity matrix, else None."""
    if not _IDENTITY_ROWS:
        return None
    entry = _IDENTITY_ROWS.get(id(x))
    return entry[1] if entry is not None and entry[0] is x else None


@contextmanager
def registered_identity_rows(x, k):
    """Within the block, ``x`` (a 2-D array, never written to) counts as rows ``k:`` of the identity."""
    outer = _IDENTITY_ROWS.get(id(x))  # the same kept basis, registered by an enclosing jacfwd
    _IDENTITY_ROWS[id(x)] = (x, k)
    try:
        yield x
    finally:
        if outer is None:
            _IDENTITY_ROWS.pop(id(x), None)
        else:
            _IDENTITY_ROWS[id(x)] = outer


def _matmul_shape(a, b):
    a1, b1 = len(a) == 1, len(b) == 1
    A = (1,) + a if a1 else a
    B = b + (1,) if b1 else b
    if A[-1] != B[-2]:
        raise ValueError(f"matmul: shapes {a} and {b} do not align ({A[-1]} != {B[-2]})")
    out = broadcast_shape(A[:-2], B[:-2]) + (A[-2], B[-1])
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
        lambda: reshape(unbroadcast(matmul(G, matrix_transpose(conj_if_complex(B))), A), shape_of(a)),
        lambda: reshape(unbroadcast(matmul(matrix_transpose(conj_if_complex(A)), G), B), shape_of(b)),
    )


def _rows_of(view):
    """A product by identity rows: a view of the other factor, marked read-only (jacfwd copies it if it
    reaches its result: the caller's Jacobian never shares the factor's memory); a copy where the view
    cannot be marked."""
    marked = read_only(view)
    return asarray(view, copy=True) if marked is None else marked


def _matmul_batch(info, dims, a, b):
    da, db = dims
    a_nd = ndim_of(a) - (da is not None)
    b_nd = ndim_of(b) - (db is not None)
    if not (a_nd and b_nd):  # the batch axis must not pass for a vector axis
        raise ValueError(f"matmul: examples of shapes {_example_shape(a, da)} and {_example_shape(b, db)}")
    # one matrix against a batch: fold the batch into a single GEMM (a broadcast batched matmul runs
    # one small product per example in NumPy, ~10x slower for per-example vectors, as in jacrev)
    if db is None and a_nd == 1 and ndim_of(b) == 2:
        a = move_to_front(a, da)
        k = identity_rows(a)
        if k is not None and a.dtype == b.dtype:  # rows k: of the identity (jacfwd's basis) times b
            return _rows_of(b[k : k + shape_of(a)[0], ...]), 0
        return matmul(a, b), 0
    if da is None and b_nd == 1 and ndim_of(a) == 2:
        b = move_to_front(b, db)
        k = identity_rows(b)
        if k is not None and a.dtype == b.dtype:  # a times rows k: of the identity: columns of a
            return _rows_of(matrix_transpose(a)[k : k + shape_of(b)[0], ...]), 0
        return matmul(b, matrix_transpose(a)), 0
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
    return permute_dims(r, inverse_permutation(order))


def _tensordot_vjp(g, y, x1, x2, *, axes):
    a1, a2 = axes
    f1, f2 = _free(ndim_of(x1), a1), _free(ndim_of(x2), a2)
    nf1, nf2 = len(f1), len(f2)

    def g1():
        r = tensordot(g, conj_if_complex(x2), axes=(tuple(range(nf1, nf1 + nf2)), tuple(f2)))
        r = _permute_back(r, f1 + [a1[j] for j in sorted(range(len(a2)), key=lambda j: a2[j])])
        return real_part_for(r, x1)

    def g2():
        r = tensordot(conj_if_complex(x1), g, axes=(tuple(f1), tuple(range(nf1))))
        r = _permute_back(r, [a2[j] for j in sorted(range(len(a1)), key=lambda j: a1[j])] + f2)
        return real_part_for(r, x2)

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
    s = broadcast_shape(x1.shape, x2.shape)
    a = axis % len(s)
    return ShapeDtype(s[:a] + s[a + 1 :], xp.result_type(x1.dtype, x2.dtype), x1.device)


def _vecdot_vjp(g, y, x1, x2, *, axis):
    ge = expand_dims(g, axis=axis)
    return (lambda: unbroadcast(conj_if_complex(ge) * x2, x1), lambda: unbroadcast(ge * x1, x2))


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
        lambda: unbroadcast(cross(conj_if_complex(x2), g, axis=axis), x1),
        lambda: unbroadcast(cross(g, conj_if_complex(x1), axis=axis), x2),
    )


_cross = define(
    "linalg.cross",
    abstract_eval=lambda xp, x1, x2, *, axis: ShapeDtype(
        broadcast_shape(x1.shape, x2.shape), xp.result_type(x1.dtype, x2.dtype), x1.device
    ),
    vjp=_cross_vjp,
    bilinear=True,
    batch=lambda info, dims, x1, x2, *, axis: (cross(*broadcast_batch_args(dims, (x1, x2)), axis=axis), 0),
)


def cross(x1, x2, /, *, axis=-1):
    """Cross product of 3-element vectors along ``axis`` (broadcasting the other axes)."""
    return bind(_cross, x1, x2, axis=_neg_axis(axis, x1, x2))


# ------------------------------------------------------------------------------ outer


def _example_shape(x, d):
    s = shape_of(x)
    return s if d is None else s[:d] + s[d + 1 :]


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
    vjp=lambda g, y, x1, x2: (
        lambda: real_part_for(matmul(g, conj_if_complex(x2)), x1),
        lambda: real_part_for(matmul(conj_if_complex(x1), g), x2),
    ),
    jvp=lambda ts, y, x1, x2: add_optional(
        None if ts[0] is None else outer(ts[0], x2), None if ts[1] is None else outer(x1, ts[1])
    ),
    batch=_outer_batch,
)


def outer(x1, x2, /):
    """Outer product of two 1-D arrays (others are refused, as the standard says: NumPy would flatten
    them)."""
    if ndim_of(x1) != 1 or ndim_of(x2) != 1:
        raise ValueError(f"outer: x1 and x2 must be 1-D, got shapes {shape_of(x1)} and {shape_of(x2)}")
    return bind(_outer, x1, x2)
