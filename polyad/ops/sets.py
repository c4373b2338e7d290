"""``isin``, the set function the 2025.12 standard added (the ``unique_*`` functions live in
``ops/searching.py``, with the other functions whose output lengths depend on values).

``isin(x1, x2)`` tests each element of ``x1`` for membership in ``x2`` by value equality (``equal``: NaN is in
nothing). Its result is boolean: no derivative (``nondiff``), and under ``grad``/``jvp`` it is a tensor
without one, usable as a mask. Batching: an unbatched ``x2`` is a fixed set, so the op runs unchanged on
the batched ``x1`` (element-wise in it); a batched ``x2`` gives each example its own set, compared with
``x1`` element by element along a new last axis and reduced with ``any``, written in polyad ops.

Kernel: for integer arrays, the backend's ``isin`` (NumPy, CuPy, Dask and array_api_strict have it);
otherwise, and for a library without one, the same broadcast comparison in standard calls (memory
``x1.size * x2.size``), which the batching rule also makes.

Arguments follow the standard: arrays or Python ints (as the comparison functions, Python floats and bools
too), at least one an array; a scalar takes the other argument's dtype and device. The standard asks for
integer arrays and leaves other dtypes to the implementation: polyad compares floating, complex and
boolean arrays by ``==`` on every backend (array_api_strict's ``isin`` takes integers only), and arrays
of two kinds as the backend's ``==`` does (NumPy compares them by value, array_api_strict refuses).
"""

from polyad.core import bind
from polyad.core.avals import ShapeDtype, device_of, ndim_of, shape_of
from polyad.ops.base import expand_dims, move_to_front, reshape
from polyad.ops.common import define
from polyad.ops.creation import asarray
from polyad.ops.elementwise import equal, logical_not
from polyad.ops.reductions import any as _any


def _isin_kernel(xp, x1, x2, *, invert):
    native = getattr(xp, "isin", None)
    integers = not any(xp.isdtype(a.dtype, ("real floating", "complex floating", "bool")) for a in (x1, x2))
    if native is not None and integers:
        found = native(x1, x2)  # inverted here: array_api_strict 2.6.1's isin ignores ``invert``
    else:
        found = xp.any(xp.reshape(x1, tuple(x1.shape) + (1,)) == xp.reshape(x2, (-1,)), axis=-1)
    return xp.logical_not(found) if invert else found


def _isin_abstract(xp, x1, x2, *, invert):
    return ShapeDtype(x1.shape, xp.bool, x1.device)


def _isin_batch(info, dims, x1, x2, *, invert):
    d1, d2 = dims
    if d2 is None:  # one set for every example: element-wise in x1, its batch dimension kept
        return bind(_isin, x1, x2, invert=invert), d1
    # a set per example: x1 (batch first, or shared) against x2's examples flattened along a last axis
    x2 = move_to_front(x2, d2)
    size = shape_of(x2)[0]
    if d1 is not None:
        x1 = move_to_front(x1, d1)
    example_ndim = ndim_of(x1) - (d1 is not None)
    sets = reshape(x2, (size,) + (1,) * example_ndim + (-1,))
    found = _any(equal(expand_dims(x1, axis=-1), sets), axis=-1)
    return (logical_not(found) if invert else found), 0


_isin = define("isin", _isin_kernel, abstract_eval=_isin_abstract, nondiff=True, batch=_isin_batch)


def _as_array(v, like):
    """A Python scalar as a 0-d array of ``like``'s dtype and device."""
    if hasattr(v, "shape"):
        return v
    if not isinstance(v, bool | int | float):
        raise TypeError(f"isin: arguments must be arrays or Python ints, got {type(v).__name__}")
    return asarray(v, dtype=like.dtype, device=device_of(like))


def isin(x1, x2, /, *, invert=False):
    """Whether each element of ``x1`` is in ``x2`` (standard 2025.12), by value equality.

    Args:
        x1: the elements to test: an array, or a Python int (then the result is 0-d).
        x2: the values to test against, any shape (an array or a Python int).
        invert: test for absence instead (``not in``).

    Returns:
        A boolean array of ``x1``'s shape (no derivative: a mask).

    Example:
        >>> import numpy as np
        >>> from polyad import xp
        >>> xp.isin(np.array([[1, 2], [3, 4]]), np.array([4, 1, 7]))
        array([[ True, False],
               [False,  True]])
    """
    if not hasattr(x1, "shape") and not hasattr(x2, "shape"):
        raise TypeError("isin: at least one of x1 and x2 must be an array, got two Python scalars")
    if not isinstance(invert, bool):
        raise TypeError(f"isin: invert must be a bool, got {invert!r}")
    x1 = _as_array(x1, x2)
    x2 = _as_array(x2, x1)
    return bind(_isin, x1, x2, invert=invert)


isin.op = _isin
