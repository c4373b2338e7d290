"""Diagonals: ``diagonal``, ``trace`` and their transpose, the internal ``diag_embed``."""

from polyad.core import bind
from polyad.core.avals import ShapeDtype, is_complex, shape_of
from polyad.ops.base import astype, broadcast_to, expand_dims
from polyad.ops.common import define
from polyad.ops.linalg.shared import leading_batch, real_if_complex

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
_diag_embed.register_rule("batch", leading_batch(_diag_embed, min_ndim=1))


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
_diagonal.register_rule("batch", leading_batch(_diagonal))


def diagonal(x, /, *, offset=0):
    """The diagonal ``offset`` of the matrices in ``x`` (last two axes)."""
    return bind(_diagonal, x, offset=offset)


def _trace_abstract(xp, x, *, offset=0, dtype=None):
    return ShapeDtype(x.shape[:-2], dtype if dtype is not None else x.dtype, x.device)


def _trace_vjp(g, y, x, *, offset=0, dtype=None):
    n, m = shape_of(x)[-2:]
    d = broadcast_to(expand_dims(g, axis=-1), shape_of(g) + (_diag_len(n, m, offset),))
    out = diag_embed(d, offset=offset, n=n, m=m)
    if out.dtype != x.dtype:
        out = astype(real_if_complex(out) if not is_complex(x) else out, x.dtype)
    return (out,)


_trace = define(
    "linalg.trace",
    abstract_eval=_trace_abstract,
    vjp=_trace_vjp,
    linear=True,
)
_trace.register_rule("batch", leading_batch(_trace))


def trace(x, /, *, offset=0, dtype=None):
    """Sum of diagonal ``offset`` of the matrices in ``x`` (in ``dtype`` if given)."""
    return bind(_trace, x, offset=offset, dtype=dtype)
