"""Reductions of the standard (sum, prod, mean, max, ...) with their rules.

Family rules: ``reduction_abstract`` and ``reduction_batch`` serve every op of the shape
``f(x, /, *, axis=None, keepdims=False, ...)``; ``expand_reduced`` puts the reduced axes back so a
cotangent broadcasts against the input.
"""

from polyad.core import bind
from polyad.ops.common import ShapeDtype, define, move_to_front, ndim_of, shape_of


def reduced_axes(axis, ndim):
    """The reduced axes as a sorted tuple of non-negative ints."""
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, tuple | list) else (axis,)
    out = []
    for a in axes:
        if not -ndim <= a < max(ndim, 1):
            raise ValueError(f"axis {a} is out of bounds for an array of dimension {ndim}")
        out.append(a % ndim if ndim else 0)
    return tuple(sorted(out))


def reduction_shape(shape, axis=None, keepdims=False):
    axes = reduced_axes(axis, len(shape))
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def reduction_abstract(dtype_rule=None):
    def rule(xp, x, *, axis=None, keepdims=False, dtype=None, **params):
        out_dtype = dtype if dtype is not None else (dtype_rule(xp, x) if dtype_rule else x.dtype)
        return ShapeDtype(reduction_shape(x.shape, axis, keepdims), out_dtype, x.device)

    return rule


def reduction_batch(op):
    """Batching rule of a reduction: batch dimension to the front, reduced axes shifted past it."""

    def rule(dims, x, *, axis=None, **params):
        x = move_to_front(x, dims[0])
        n = ndim_of(x) - 1
        axes = tuple(a + 1 for a in reduced_axes(axis, n))
        return bind(op, x, axis=axes, **params), 0

    return rule


def expand_reduced(g, x_shape, axis, keepdims):
    """Reshape a reduction's cotangent so it broadcasts against the input of shape ``x_shape``."""
    from polyad.ops.manipulation import reshape

    if keepdims:
        return g
    axes = reduced_axes(axis, len(x_shape))
    return reshape(g, tuple(1 if i in axes else d for i, d in enumerate(x_shape)))


def _sum_vjp(g, y, x, *, axis=None, dtype=None, keepdims=False):
    from polyad.ops.manipulation import broadcast_to

    return (broadcast_to(expand_reduced(g, shape_of(x), axis, keepdims), shape_of(x)),)


_sum = define("sum", abstract_eval=reduction_abstract(), vjp=_sum_vjp, linear=True)
_sum.batch = reduction_batch(_sum)


def sum(x, /, *, axis=None, dtype=None, keepdims=False):
    """Sum of ``x`` over ``axis`` (all axes when None)."""
    if isinstance(axis, list):
        axis = tuple(axis)
    return bind(_sum, x, axis=axis, dtype=dtype, keepdims=keepdims)


sum.op = _sum
