"""Norms: ``vector_norm`` and ``matrix_norm``. At zero, and at ties of the extremum norms (inf, -inf, and
the column and row sums of 1, -1, inf, -inf), polyad takes the subgradient 0 and shares the derivative
equally among ties.
"""

from polyad.core import bind
from polyad.core.avals import ShapeDtype, is_complex, ndim_of, shape_of
from polyad.ops.base import (
    astype,
    conj_if_complex,
    expand_dims,
    expand_reduced,
    move_to_front,
    reduced_axes,
    reduction_shape,
    take_index,
)
from polyad.ops.base import sum as _sum
from polyad.ops.common import define
from polyad.ops.elementwise import abs as _abs
from polyad.ops.elementwise import safe_divide, sign
from polyad.ops.fills import zeros_like
from polyad.ops.linalg.decompositions import svd
from polyad.ops.linalg.products import matmul
from polyad.ops.linalg.shared import leading_batch, real_dtype, real_if_complex
from polyad.ops.manipulation import squeeze
from polyad.ops.zero_safe import zero_safe_multiply


def _sgn(x):
    """``x / |x|`` (0 at 0): the derivative of ``|x|``, real or complex."""
    if is_complex(x):
        return safe_divide(x, _abs(x))
    return sign(x)


# ------------------------------------------------------------------------------ vector_norm


def _norm_parts(x, y, g, axis, keepdims):
    """``y`` and ``g`` reshaped to broadcast against ``x``."""
    s = shape_of(x)
    ye = expand_reduced(y, s, axis, keepdims)
    return ye, (None if g is None else expand_reduced(g, s, axis, keepdims))


def _extreme_weights(ax, ye, axis):
    """Weights of the elements of ``ax`` equal to the extremum ``ye``: ties share equally."""
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
    return safe_divide(ax ** (p - 1), ye ** (p - 1))


def _vector_norm_vjp(g, y, x, *, axis=None, keepdims=False, ord=2):
    if ord == 0:
        return (zeros_like(x),)
    ye, ge = _norm_parts(x, y, g, axis, keepdims)
    if ord == 2:
        return (ge * safe_divide(x, ye),)
    w = _vnorm_deriv(x, ye, axis, ord)
    s = _sgn(x)
    if w is None:
        return (ge * s,)
    # p < 1: |x|**(p-1) is infinite at a zero element, whose sign (0) takes the subgradient 0; a zero
    # cotangent stays zero (polyad.ops.zero_safe)
    return (zero_safe_multiply(ge, zero_safe_multiply(s, w)),)


def _vector_norm_jvp(ts, y, x, *, axis=None, keepdims=False, ord=2):
    if ord == 0:
        return zeros_like(y)
    t = ts[0]
    if ord == 2:
        return safe_divide(_sum(real_if_complex(conj_if_complex(x) * t), axis=axis, keepdims=keepdims), y)
    ye, _ = _norm_parts(x, y, None, axis, keepdims)
    w = _vnorm_deriv(x, ye, axis, ord)
    d = real_if_complex(conj_if_complex(_sgn(x)) * t)
    return _sum(d if w is None else zero_safe_multiply(d, w), axis=axis, keepdims=keepdims)


def _vector_norm_abstract(xp, x, *, axis=None, keepdims=False, ord=2):
    return ShapeDtype(reduction_shape(x.shape, axis, keepdims), real_dtype(xp, x.dtype), x.device)


_vector_norm = define(
    "linalg.vector_norm",
    abstract_eval=_vector_norm_abstract,
    vjp=_vector_norm_vjp,
    jvp=_vector_norm_jvp,
)


def _vector_norm_batch(info, dims, x, *, axis=None, keepdims=False, ord=2):
    x = move_to_front(x, dims[0])
    axes = tuple(a + 1 for a in reduced_axes(axis, ndim_of(x) - 1))
    return vector_norm(x, axis=axes, keepdims=keepdims, ord=ord), 0


_vector_norm.register_rule("batch", _vector_norm_batch)


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
        return safe_divide(x, ye)
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
    return _sum(real_if_complex(conj_if_complex(d) * ts[0]), axis=(-2, -1), keepdims=keepdims)


_matrix_norm = define(
    "linalg.matrix_norm",
    abstract_eval=lambda xp, x, *, keepdims=False, ord="fro": ShapeDtype(
        x.shape[:-2] + ((1, 1) if keepdims else ()), real_dtype(xp, x.dtype), x.device
    ),
    vjp=_matrix_norm_vjp,
    jvp=_matrix_norm_jvp,
)
_matrix_norm.register_rule("batch", leading_batch(_matrix_norm))


def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    """Matrix norm of the matrices in ``x``: ``ord`` "fro", "nuc", 1, -1, 2, -2, inf or -inf.

    Derivatives: 2 and -2 follow the largest / smallest singular value (defined where it is simple);
    1, -1, inf and -inf share the derivative equally among tied columns or rows; at zero the
    subgradient 0.
    """
    return bind(_matrix_norm, x, keepdims=keepdims, ord=ord)
