"""The fills: ``zeros``, ``arange``, ``zeros_like`` and ``ones_like`` (and the ``full`` op), the creation ops
that transforms (reverse mode's zero cotangents, forward mode's zero tangents) and rules need. They read
no array's values, so they sit below every other op file; ``polyad.ops.creation`` re-exports them with
the rest of the standard's creation functions.
"""

import math

import polyad.core.dispatch as dispatch
from polyad.core import bind
from polyad.core.avals import ShapeDtype, bottom, dtype_name, shape_tuple
from polyad.ops.common import creation_op, define, on_device


def _arange_len(start, stop=None, step=1):
    if stop is None:
        start, stop = 0, start
    return (max(0, math.ceil((stop - start) / step)),)


_zeros = creation_op("zeros", lambda shape: shape_tuple(shape))
full_op = creation_op("full", lambda shape, fill_value: shape_tuple(shape))  # ``full`` is in creation.py
_arange = creation_op("arange", _arange_len)


def zeros(shape, *, dtype=None, device=None):
    """An array of zeros of ``shape``."""
    return on_device(_zeros, shape, dtype=dtype, device=device)


def arange(start, /, stop=None, step=1, *, dtype=None, device=None):
    """Evenly spaced values in ``[start, stop)``."""
    return on_device(_arange, start, stop, step, dtype=dtype, device=device)


# ------------------------------------------------------------------------------ zeros_like, ones_like


def like_op(name, from_shape):
    """A ``*like_op`` op; ``from_shape(xp, shape, dtype, **params)`` builds its output without its input
    (the ``shape_only`` marker, used where only the shape was recorded)."""

    def abstract(xp, x, *args, dtype=None, device=None, **params):
        return ShapeDtype(
            x.shape, dtype if dtype is not None else x.dtype, x.device if device is None else device
        )

    op = define(name, abstract_eval=abstract, nondiff=True, shape_only=from_shape)
    op.register_rule("batch", lambda info, dims, x, *args, **params: (bind(op, x, *args, **params), dims[0]))
    return op


_zeros_like = like_op(
    "zeros_like", lambda xp, shape, dtype, device=None: xp.zeros(shape, dtype=dtype, device=device)
)
_ones_like = like_op(
    "ones_like", lambda xp, shape, dtype, device=None: xp.ones(shape, dtype=dtype, device=device)
)


def other_library(x, device):
    """The backend owning ``device`` when it is not ``x``'s library (a ``*like_op`` then creates there)."""
    if device is None:
        return None
    own = dispatch.backend_of_array(bottom(x))
    if own is None or dispatch.owns_device(own, device):
        return None
    return dispatch.owner_of_device(device)


def like_elsewhere(backend, x, dtype, device, fill=None):
    """A ``*like_op`` of ``x`` created on ``backend`` (another library than ``x``'s)."""
    dtype = dtype if dtype is not None else getattr(backend.xp, dtype_name(x.dtype))
    if fill is None:
        return on_device(_zeros, tuple(x.shape), dtype=dtype, device=device)
    return on_device(full_op, tuple(x.shape), fill, dtype=dtype, device=device)


def zeros_like(x, /, *, dtype=None, device=None):
    """Zeros with the shape of ``x``, on ``x``'s library and device and with its dtype unless given."""
    other = other_library(x, device)
    if other is not None:
        return like_elsewhere(other, x, dtype, device)
    return bind(_zeros_like, x, dtype=dtype, device=device)


def ones_like(x, /, *, dtype=None, device=None):
    """Ones with the shape of ``x``, on ``x``'s library and device and with its dtype unless given."""
    other = other_library(x, device)
    if other is not None:
        return like_elsewhere(other, x, dtype, device, fill=1)
    return bind(_ones_like, x, dtype=dtype, device=device)
