"""The family rules and small helpers the linalg files share (written in polyad ops, like every rule).

``leading_batch`` serves ops that already broadcast over leading dimensions (inv, det, cholesky, ...): the
batch dimension moves to the front and the op runs unchanged; ``leading_batch_multi`` is the same for ops
with several results (eigh, qr, slogdet, svd).
"""

from polyad.core import bind
from polyad.core.avals import is_complex, ndim_of
from polyad.ops.base import move_to_front, real
from polyad.ops.creation import full_like


def leading_batch(op, min_ndim=2):
    """Batching rule of a one-array op that broadcasts over leading dimensions (over the dimensions
    before its last ``min_ndim``, which each example must have)."""

    def rule(info, dims, x, **params):
        check_example_ndim(op, x, min_ndim)
        return bind(op, move_to_front(x, dims[0]), **params), 0

    return rule


def leading_batch_multi(op, n):
    """``leading_batch`` for an op with ``n`` results: every result is batched at 0."""

    def rule(info, dims, x, **params):
        check_example_ndim(op, x, 2)
        return bind(op, move_to_front(x, dims[0]), **params), (0,) * n

    return rule


def check_example_ndim(op, x, min_ndim):
    """Refuse a batched ``x`` whose examples have fewer than ``min_ndim`` dimensions: the batch axis
    would pass for a matrix axis (vmap then raises the error the op gives on one example)."""
    if ndim_of(x) - 1 < min_ndim:
        raise ValueError(
            f"{op.name}: each example needs at least {min_ndim} dimensions, got {ndim_of(x) - 1}"
        )


def real_if_complex(x):
    return real(x) if is_complex(x) else x


def times_i(r, like):
    """``1j * r`` for a real array ``r``, complex in ``like``'s dtype (no Python complex scalar)."""
    return r * full_like(r, 1j, dtype=like.dtype)


def add_optional(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return a + b


def real_dtype(xp, dtype):
    if dtype == xp.complex128:
        return xp.float64
    if dtype == xp.complex64:
        return xp.float32
    return dtype
