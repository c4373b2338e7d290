"""Manipulation functions of the standard: reshape, moving axes, broadcasting, stacking and joining.

All of these are linear, so each JVP is the op applied to the tangent (the ``linear`` marker) and each VJP
is the op's transpose, written next to it.

``reshape``, ``permute_dims``, ``moveaxis``, ``expand_dims``, ``broadcast_to``, ``stack``, ``unstack`` and
the internal ``take_index`` live in ``ops.base`` (the transforms and the shared rules need them); they
are importable from here.
"""

import math

from polyad.core import bind
from polyad.core.avals import ShapeDtype, broadcast_shape, device_of, ndim_of, normalize_axis, shape_of
from polyad.ops.base import (
    as_tuple,
    batch_all_front,
    broadcast_batch_args,
    broadcast_to,
    move_to_front,
    real_part_for,
    reshape,
    unbroadcast,
)
from polyad.ops.base import expand_dims as expand_dims
from polyad.ops.base import moveaxis as moveaxis
from polyad.ops.base import permute_dims as permute_dims
from polyad.ops.base import stack as stack
from polyad.ops.base import sum as _sum
from polyad.ops.base import take_index as take_index
from polyad.ops.base import unstack as unstack
from polyad.ops.common import define, shape_abstract
from polyad.ops.fills import arange, zeros_like
from polyad.ops.indexing import scatter_add

# ------------------------------------------------------------------------------ squeeze


def _squeeze_shape(s, axis):
    axes = {normalize_axis(a, len(s)) for a in as_tuple(axis)}
    for a in axes:
        if s[a] != 1:
            raise ValueError(f"cannot squeeze axis {a} of size {s[a]}")
    return tuple(d for i, d in enumerate(s) if i not in axes)


def _squeeze_batch(info, dims, x, axis):
    x = move_to_front(x, dims[0])
    n = ndim_of(x) - 1
    return squeeze(x, axis=tuple(normalize_axis(a, n) + 1 for a in as_tuple(axis))), 0


_squeeze = define(
    "squeeze",
    abstract_eval=shape_abstract(_squeeze_shape),
    vjp=lambda g, y, x, axis: (reshape(g, shape_of(x)),),
    linear=True,
    batch=_squeeze_batch,
)


def squeeze(x, /, axis):
    """Remove size-1 axes ``axis``."""
    if isinstance(axis, list):
        axis = tuple(axis)
    return bind(_squeeze, x, axis=axis)


squeeze.op = _squeeze

# ------------------------------------------------------------------------------ concat


def _concat_shape(*shapes, axis=0):
    if axis is None:
        return (sum(math.prod(s) for s in shapes),)
    a = normalize_axis(axis, len(shapes[0]))
    s0 = shapes[0]
    return s0[:a] + (sum(s[a] for s in shapes),) + s0[a + 1 :]


def _concat_vjp(g, y, *arrays, axis=0):
    if axis is None:
        pieces, start = [], 0
        for a in arrays:
            n = math.prod(shape_of(a))
            pieces.append(real_part_for(reshape(g[start : start + n], shape_of(a)), a))
            start += n
        return tuple(pieces)
    a = normalize_axis(axis, ndim_of(g))
    pieces, start = [], 0
    for x in arrays:
        n = shape_of(x)[a]
        pieces.append(real_part_for(g[(slice(None),) * a + (slice(start, start + n), ...)], x))
        start += n
    return tuple(pieces)


def _concat_batch(info, dims, *arrays, axis=0):
    arrays = batch_all_front(dims, arrays)
    if axis is None:
        arrays = [reshape(v, (v.shape[0], -1)) for v in arrays]
        return concat(arrays, axis=1), 0
    return concat(arrays, axis=normalize_axis(axis, ndim_of(arrays[0]) - 1) + 1), 0


_concat = define(
    "concat",
    lambda xp, *arrays, axis=0: xp.concat(arrays, axis=axis),
    abstract_eval=lambda xp, *avals, axis=0: ShapeDtype(
        _concat_shape(*[a.shape for a in avals], axis=axis),
        xp.result_type(*[a.dtype for a in avals]),
        avals[0].device,
    ),
    vjp=_concat_vjp,
    linear=True,
    batch=_concat_batch,
)


def concat(arrays, /, *, axis=0):
    """Join a sequence of arrays along an existing axis (``axis=None`` flattens them first)."""
    arrays = tuple(arrays)
    if axis is not None:
        axis = normalize_axis(axis, ndim_of(arrays[0]))
    return bind(_concat, *arrays, axis=axis)


concat.op = _concat

# ------------------------------------------------------------------------------ broadcast_arrays / meshgrid
# Each is one op with several results, so that a transform sees every member: a member made from a
# constant is still a tensor of the transform (an unbatched one is broadcast along vmap's batch).


def _broadcast_arrays_abstract(xp, *avals):
    shape = broadcast_shape(*[a.shape for a in avals])
    return tuple(ShapeDtype(shape, a.dtype, a.device) for a in avals)


def _broadcast_arrays_vjp(g, ys, *arrays):
    return tuple((lambda gi=gi, a=a: unbroadcast(gi, a)) for gi, a in zip(g, arrays))


def _broadcast_arrays_jvp(ts, ys, *arrays):
    # member i depends on array i alone: a member without a tangent (a bool mask) keeps None
    return tuple(None if t is None else broadcast_to(t, shape_of(y)) for t, y in zip(ts, ys))


def _broadcast_arrays_batch(info, dims, *values):
    out = bind(_broadcast_arrays, *broadcast_batch_args(dims, values))
    return out, (0,) * len(out)


_broadcast_arrays = define(
    "broadcast_arrays",
    lambda xp, *arrays: tuple(xp.broadcast_arrays(*arrays)),
    abstract_eval=_broadcast_arrays_abstract,
    vjp=_broadcast_arrays_vjp,
    jvp=_broadcast_arrays_jvp,
    batch=_broadcast_arrays_batch,
    multiple_results=True,
)


def broadcast_arrays(*arrays):
    """The arrays broadcast against each other, as a tuple (the 2025.12 standard; 2024.12 said a list)."""
    return tuple(bind(_broadcast_arrays, *arrays))


broadcast_arrays.op = _broadcast_arrays


def broadcast_shapes(*shapes):
    """The shape that ``shapes`` broadcast to (standard 2025.12): a pure function of the shapes, no op.

    Dimensions of unknown size (None, as lazy libraries report them) propagate, as the standard says:
    against a known size other than 1 the result is that size (the unknown one must match it or be 1), else
    it stays None.

    Args:
        *shapes: tuples (or other sequences) of non-negative ints or None.

    Returns:
        The broadcast shape, a tuple (``()`` when no shape is given).

    Raises:
        ValueError: for shapes that do not broadcast together. TypeError: for a shape that is not a
        sequence of ints and None.

    Example:
        >>> from polyad import xp
        >>> xp.broadcast_shapes((3, 1), (1, 4), (4,))
        (3, 4)
        >>> xp.broadcast_shapes((None, 1), (5,))
        (None, 5)
    """
    checked = []
    for shape in shapes:
        try:
            dims = tuple(shape)
        except TypeError:
            raise TypeError(f"broadcast_shapes: each shape must be a tuple of ints, got {shape!r}") from None
        if any(d is not None and (isinstance(d, bool) or not hasattr(d, "__index__") or d < 0) for d in dims):
            raise TypeError(f"broadcast_shapes: each shape must hold ints >= 0 (or None), got {shape!r}")
        checked.append(tuple(None if d is None else int(d) for d in dims))
    ndim = max((len(s) for s in checked), default=0)
    out = []
    for i in range(-ndim, 0):
        dims = [s[i] for s in checked if len(s) >= -i]
        known = {d for d in dims if d is not None and d != 1}
        if len(known) > 1:
            raise ValueError(f"broadcast_shapes: shapes {tuple(checked)} cannot be broadcast together")
        out.append(known.pop() if known else (None if None in dims else 1))
    return tuple(out)


def _grid_layout(sizes, indexing):
    """``(shape, positions)`` of a meshgrid of 1-D arrays of ``sizes``: the grid's shape, and the axis of
    the grid along which each array runs (``"xy"`` swaps the first two)."""
    n = len(sizes)
    order = list(range(n))
    if indexing == "xy" and n >= 2:
        order[0], order[1] = 1, 0
    return tuple(sizes[order[d]] for d in range(n)), [order.index(i) for i in range(n)]


def _meshgrid_abstract(xp, *avals, indexing):
    shape, _ = _grid_layout([a.shape[0] for a in avals], indexing)
    return tuple(ShapeDtype(shape, a.dtype, a.device) for a in avals)


def _meshgrid_vjp(g, ys, *arrays, indexing):
    _, positions = _grid_layout([shape_of(a)[0] for a in arrays], indexing)
    n = len(arrays)

    def back(gi, pos):
        return _sum(gi, axis=tuple(d for d in range(n) if d != pos))

    return tuple((lambda gi=gi, pos=pos: back(gi, pos)) for gi, pos in zip(g, positions))


def _meshgrid_jvp(ts, ys, *arrays, indexing):
    # member i depends on array i alone: its tangent is member i of the grid with t_i in place of it
    return tuple(
        None if t is None else bind(_meshgrid, *arrays[:i], t, *arrays[i + 1 :], indexing=indexing)[i]
        for i, t in enumerate(ts)
    )


def _meshgrid_batch(info, dims, *values, indexing):
    sizes = [shape_of(v)[0 if d is None else 1 - d] for v, d in zip(values, dims)]
    shape, positions = _grid_layout(sizes, indexing)
    n, b = len(values), info.batch_size
    out = []
    for v, d, size, pos in zip(values, dims, sizes, positions):
        lead = 1 if d is None else b
        v = v if d is None else move_to_front(v, d)
        v = reshape(v, (lead,) + (1,) * pos + (size,) + (1,) * (n - pos - 1))
        out.append(broadcast_to(v, (b, *shape)))
    return tuple(out), (0,) * n


_meshgrid = define(
    "meshgrid",
    lambda xp, *arrays, indexing: tuple(xp.meshgrid(*arrays, indexing=indexing)),
    abstract_eval=_meshgrid_abstract,
    vjp=_meshgrid_vjp,
    jvp=_meshgrid_jvp,
    batch=_meshgrid_batch,
    multiple_results=True,
)


def meshgrid(*arrays, indexing="xy"):
    """Coordinate grids from 1-D arrays, as a tuple (the 2025.12 standard; 2024.12 said a list):
    ``indexing="xy"`` (Cartesian) or ``"ij"`` (matrix)."""
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    for a in arrays:
        if ndim_of(a) != 1:
            raise ValueError(f"meshgrid takes 1-D arrays, got one of shape {shape_of(a)}")
    return tuple(bind(_meshgrid, *arrays, indexing=indexing))


meshgrid.op = _meshgrid


# ------------------------------------------------------------------------------ flip / roll


def _axes_tuple(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    return tuple(sorted({normalize_axis(a, ndim) for a in as_tuple(axis)}))


_flip = define(
    "flip",
    abstract_eval=shape_abstract(lambda s, axis: s),
    vjp=lambda g, y, x, *, axis: (flip(g, axis=axis),),
    linear=True,
    batch=lambda info, dims, x, *, axis: (
        flip(move_to_front(x, dims[0]), axis=tuple(a + 1 for a in axis)),
        0,
    ),
)


def flip(x, /, *, axis=None):
    """``x`` with the order of elements along ``axis`` (every axis when None) reversed."""
    return bind(_flip, x, axis=_axes_tuple(axis, ndim_of(x)))


flip.op = _flip


def _roll_batch(info, dims, x, *, shift, axis):
    x = move_to_front(x, dims[0])
    if axis is None:
        s = shape_of(x)
        return reshape(roll(reshape(x, (s[0], -1)), shift, axis=1), s), 0
    return roll(x, shift, axis=tuple(a + 1 for a in axis)), 0


_roll = define(
    "roll",
    abstract_eval=shape_abstract(lambda s, shift, axis: s),
    vjp=lambda g, y, x, *, shift, axis: (roll(g, _negate(shift), axis=axis),),
    linear=True,
    batch=_roll_batch,
)


def _negate(shift):
    return tuple(-s for s in shift) if isinstance(shift, tuple) else -shift


def roll(x, /, shift, *, axis=None):
    """``x`` with elements shifted by ``shift`` along ``axis`` (over the flattened array when None)."""
    if isinstance(shift, list):
        shift = tuple(shift)
    if axis is not None:
        axis = tuple(normalize_axis(a, ndim_of(x)) for a in as_tuple(axis))
        if not isinstance(shift, tuple):
            shift = (shift,) * len(axis)
        if len(shift) != len(axis):
            raise ValueError(f"roll: shift {shift} and axis {axis} differ in length")
    elif isinstance(shift, tuple):
        raise ValueError("roll: a tuple shift needs an axis")
    return bind(_roll, x, shift=shift, axis=axis)


roll.op = _roll

# ------------------------------------------------------------------------------ repeat / tile


def _repeat_kernel(xp, x, repeats, *, axis):
    return xp.repeat(x, repeats, axis=axis)


def _repeat_abstract(xp, x, repeats, *, axis):
    if hasattr(repeats, "shape"):
        raise NotImplementedError("repeat: the output shape depends on the values of an array `repeats`")
    s = tuple(x.shape)
    return ShapeDtype(s[:axis] + (s[axis] * repeats,) + s[axis + 1 :], x.dtype, x.device)


def _repeat_vjp(g, y, x, repeats, *, axis):
    s = shape_of(x)
    if not hasattr(repeats, "shape"):
        # each input element fills ``repeats`` consecutive slots: sum them back
        grouped = reshape(g, s[:axis] + (s[axis], repeats) + s[axis + 1 :])
        return (_sum(grouped, axis=axis + 1), None)
    owner = repeat(arange(s[axis], device=device_of(g)), repeats)  # which input each output slot copies
    return (scatter_add(zeros_like(x, dtype=g.dtype), owner, g, axis=axis), None)


def _repeat_batch(info, dims, x, repeats, *, axis):
    xd, rd = dims
    if rd is not None or ndim_of(x) == 1:
        # per-example repeats give per-example output lengths, and NumPy repeats a 0-d example along
        # axis 0: only a loop can tell
        return NotImplemented
    return bind(_repeat, move_to_front(x, xd), repeats, axis=axis + 1), 0


_repeat = define(
    "repeat",
    _repeat_kernel,
    abstract_eval=_repeat_abstract,
    vjp=_repeat_vjp,
    linear=(0,),
    batch=_repeat_batch,
)


def repeat(x, repeats, /, *, axis=None):
    """Each element of ``x`` repeated ``repeats`` times (an int, or an integer array of per-element counts)
    along ``axis`` (over the flattened array when None)."""
    if axis is None:
        x = reshape(x, (-1,))
        axis = 0
    return bind(_repeat, x, repeats, axis=normalize_axis(axis, ndim_of(x)))


repeat.op = _repeat


def _tile_layout(s, reps):
    """Input shape and repetitions padded to a common rank (NumPy's and the standard's rule)."""
    n = max(len(s), len(reps))
    return (1,) * (n - len(s)) + tuple(s), (1,) * (n - len(reps)) + tuple(reps)


def _tile_vjp(g, y, x, *, repetitions):
    s, r = _tile_layout(shape_of(x), repetitions)
    interleaved = reshape(g, tuple(d for pair in zip(r, s) for d in pair))
    summed = _sum(interleaved, axis=tuple(range(0, 2 * len(s), 2)))
    return (reshape(summed, shape_of(x)),)


def _tile_batch(info, dims, x, *, repetitions):
    x = move_to_front(x, dims[0])
    size, logical = shape_of(x)[0], shape_of(x)[1:]
    s, r = _tile_layout(logical, repetitions)
    return tile(reshape(x, (size, *s)), (1, *r)), 0


_tile = define(
    "tile",
    lambda xp, x, *, repetitions: xp.tile(x, repetitions),
    abstract_eval=shape_abstract(
        lambda s, repetitions: tuple(a * b for a, b in zip(*_tile_layout(s, repetitions)))
    ),
    vjp=_tile_vjp,
    linear=True,
    batch=_tile_batch,
)


def tile(x, repetitions, /):
    """``x`` repeated ``repetitions[i]`` times along each axis ``i`` (shapes padded with leading ones)."""
    return bind(_tile, x, repetitions=tuple(repetitions))


tile.op = _tile
