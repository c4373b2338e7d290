"""Manipulation functions of the standard: reshape, moving axes, broadcasting, stacking and joining.

All of these are linear, so each JVP is the op applied to the tangent (the ``linear`` marker) and each VJP
is the op's transpose, written next to it.
"""

from polyad.core import bind
from polyad.ops.common import (
    ShapeDtype,
    define,
    move_to_front,
    ndim_of,
    shape_of,
    unbroadcast,
)


def _norm(axis, ndim):
    if not -ndim <= axis < max(ndim, 1):
        raise ValueError(f"axis {axis} is out of bounds for an array of dimension {ndim}")
    return axis % ndim if ndim else 0


def _abstract_from(fn):
    """Abstract evaluation of a shape-only op from a function of (input shapes, params) -> output shape."""

    def rule(xp, *avals, **params):
        a = avals[0]
        return ShapeDtype(fn(*[x.shape for x in avals], **params), a.dtype, a.device)

    return rule


# ------------------------------------------------------------------------------ reshape


def _reshape_shape(s, shape, copy=None):
    shape = tuple(shape)
    n = 1
    for d in s:
        n *= d
    if -1 in shape:
        known = 1
        for d in shape:
            if d != -1:
                known *= d
        shape = tuple((n // known if known else 0) if d == -1 else d for d in shape)
    return shape


def _reshape_batch(info, dims, x, shape, copy=None):
    x = move_to_front(x, dims[0])
    return reshape(x, (x.shape[0], *shape)), 0


_reshape = define(
    "reshape",
    abstract_eval=_abstract_from(_reshape_shape),
    vjp=lambda g, y, x, shape, copy=None: (reshape(g, shape_of(x)),),
    linear=True,
    batch=_reshape_batch,
)


def reshape(x, /, shape, *, copy=None):
    """Reshape ``x`` to ``shape`` (one entry may be -1)."""
    return bind(_reshape, x, shape=tuple(shape), copy=copy)


reshape.op = _reshape

# ------------------------------------------------------------------------------ permute_dims


def _inverse(perm):
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def _permute_batch(info, dims, x, axes):
    x = move_to_front(x, dims[0])
    n = len(axes)
    return permute_dims(x, (0, *(_norm(a, n) + 1 for a in axes))), 0


_permute_dims = define(
    "permute_dims",
    abstract_eval=_abstract_from(lambda s, axes: tuple(s[a] for a in axes)),
    vjp=lambda g, y, x, axes: (permute_dims(g, _inverse([_norm(a, len(axes)) for a in axes])),),
    linear=True,
    batch=_permute_batch,
)


def permute_dims(x, /, axes):
    """Permute the axes of ``x``."""
    return bind(_permute_dims, x, axes=tuple(axes))


permute_dims.op = _permute_dims

# ------------------------------------------------------------------------------ moveaxis


def _as_tuple(a):
    return tuple(a) if isinstance(a, tuple | list) else (a,)


def _moveaxis_shape(s, source, destination):
    n = len(s)
    src = [_norm(a, n) for a in _as_tuple(source)]
    dst = [_norm(a, n) for a in _as_tuple(destination)]
    order = [i for i in range(n) if i not in src]
    for d, sidx in sorted(zip(dst, src)):
        order.insert(d, sidx)
    return order


def _moveaxis_batch(info, dims, x, source, destination):
    x = move_to_front(x, dims[0])
    n = ndim_of(x) - 1
    src = tuple(_norm(a, n) + 1 for a in _as_tuple(source))
    dst = tuple(_norm(a, n) + 1 for a in _as_tuple(destination))
    return moveaxis(x, src, dst), 0


_moveaxis = define(
    "moveaxis",
    lambda xp, x, *, source, destination: xp.moveaxis(x, source, destination),
    abstract_eval=_abstract_from(
        lambda s, source, destination: tuple(s[i] for i in _moveaxis_shape(s, source, destination))
    ),
    vjp=lambda g, y, x, source, destination: (moveaxis(g, destination, source),),
    linear=True,
    batch=_moveaxis_batch,
)


def moveaxis(x, source, destination, /):
    """Move axes ``source`` of ``x`` to positions ``destination``."""
    if isinstance(source, list):
        source = tuple(source)
    if isinstance(destination, list):
        destination = tuple(destination)
    return bind(_moveaxis, x, source=source, destination=destination)


moveaxis.op = _moveaxis

# ------------------------------------------------------------------------------ expand_dims / squeeze


def _expand_shape(s, axis=0):
    a = _norm(axis, len(s) + 1)
    return s[:a] + (1,) + s[a:]


def _expand_batch(info, dims, x, axis=0):
    x = move_to_front(x, dims[0])
    return expand_dims(x, axis=_norm(axis, ndim_of(x)) + 1), 0


_expand_dims = define(
    "expand_dims",
    abstract_eval=_abstract_from(_expand_shape),
    vjp=lambda g, y, x, axis=0: (reshape(g, shape_of(x)),),
    linear=True,
    batch=_expand_batch,
)


def expand_dims(x, /, axis=0):
    """Insert a size-1 axis at ``axis``."""
    return bind(_expand_dims, x, axis=axis)


expand_dims.op = _expand_dims


def _squeeze_shape(s, axis):
    axes = {_norm(a, len(s)) for a in _as_tuple(axis)}
    for a in axes:
        if s[a] != 1:
            raise ValueError(f"cannot squeeze axis {a} of size {s[a]}")
    return tuple(d for i, d in enumerate(s) if i not in axes)


def _squeeze_batch(info, dims, x, axis):
    x = move_to_front(x, dims[0])
    n = ndim_of(x) - 1
    return squeeze(x, axis=tuple(_norm(a, n) + 1 for a in _as_tuple(axis))), 0


_squeeze = define(
    "squeeze",
    abstract_eval=_abstract_from(_squeeze_shape),
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

# ------------------------------------------------------------------------------ broadcast_to


def _broadcast_to_batch(info, dims, x, shape):
    x = move_to_front(x, dims[0])
    s = shape_of(x)
    pad = len(shape) - (len(s) - 1)
    if pad:
        x = reshape(x, (s[0],) + (1,) * pad + s[1:])
    return broadcast_to(x, (s[0], *shape)), 0


_broadcast_to = define(
    "broadcast_to",
    abstract_eval=_abstract_from(lambda s, shape: tuple(shape)),
    vjp=lambda g, y, x, shape: (unbroadcast(g, x),),
    linear=True,
    batch=_broadcast_to_batch,
)


def broadcast_to(x, /, shape):
    """Broadcast ``x`` to ``shape``."""
    return bind(_broadcast_to, x, shape=tuple(shape))


broadcast_to.op = _broadcast_to

# ------------------------------------------------------------------------------ stack / concat


def _batch_all_front(dims, values):
    """Every value with its batch dimension at 0; unbatched ones broadcast along a new batch axis."""
    size = next(v.shape[d] for v, d in zip(values, dims) if d is not None)
    out = []
    for v, d in zip(values, dims):
        if d is None:
            out.append(broadcast_to(expand_dims(v, axis=0), (size, *shape_of(v))))
        else:
            out.append(move_to_front(v, d))
    return out


def _stack_shape(s, n, axis):
    a = _norm(axis, len(s) + 1)
    return tuple(s[:a]) + (n,) + tuple(s[a:])


def _stack_batch(info, dims, *arrays, axis=0):
    arrays = _batch_all_front(dims, arrays)
    return stack(arrays, axis=_norm(axis, ndim_of(arrays[0])) + 1), 0


_stack = define(
    "stack",
    lambda xp, *arrays, axis=0: xp.stack(arrays, axis=axis),
    abstract_eval=lambda xp, *avals, axis=0: ShapeDtype(
        _stack_shape(avals[0].shape, len(avals), axis),
        xp.result_type(*[a.dtype for a in avals]),
        avals[0].device,
    ),
    vjp=lambda g, y, *arrays, axis=0: unstack(g, axis=axis),
    linear=True,
    batch=_stack_batch,
)


def stack(arrays, /, *, axis=0):
    """Join a sequence of same-shape arrays along a new axis ``axis``."""
    arrays = tuple(arrays)
    return bind(_stack, *arrays, axis=_norm(axis, ndim_of(arrays[0]) + 1))


stack.op = _stack


def _concat_shape(*shapes, axis=0):
    if axis is None:
        return (sum(_size(s) for s in shapes),)
    a = _norm(axis, len(shapes[0]))
    s0 = shapes[0]
    return s0[:a] + (sum(s[a] for s in shapes),) + s0[a + 1 :]


def _size(s):
    n = 1
    for d in s:
        n *= d
    return n


def _concat_vjp(g, y, *arrays, axis=0):
    if axis is None:
        pieces, start = [], 0
        for a in arrays:
            n = _size(shape_of(a))
            pieces.append(reshape(g[start : start + n], shape_of(a)))
            start += n
        return tuple(pieces)
    a = _norm(axis, ndim_of(g))
    pieces, start = [], 0
    for x in arrays:
        n = shape_of(x)[a]
        pieces.append(g[(slice(None),) * a + (slice(start, start + n), ...)])
        start += n
    return tuple(pieces)


def _concat_batch(info, dims, *arrays, axis=0):
    arrays = _batch_all_front(dims, arrays)
    if axis is None:
        arrays = [reshape(v, (v.shape[0], -1)) for v in arrays]
        return concat(arrays, axis=1), 0
    return concat(arrays, axis=_norm(axis, ndim_of(arrays[0]) - 1) + 1), 0


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
        axis = _norm(axis, ndim_of(arrays[0]))
    return bind(_concat, *arrays, axis=axis)


concat.op = _concat

# ------------------------------------------------------------------------------ take_index (internal)


def _take_index_kernel(xp, x, index, axis):
    return x[(slice(None),) * axis + (index, ...)]


def _take_index_vjp(g, y, x, index, axis):
    from polyad.ops.creation import arange
    from polyad.ops.elementwise import where

    n = shape_of(x)[axis]
    mask = reshape(arange(n, device=_device(g)) == index, (n,) + (1,) * (ndim_of(x) - axis - 1))
    return (where(mask, expand_dims(g, axis=axis), 0.0),)


def _device(x):
    from polyad.ops.common import _bottom

    return _bottom(x).device if hasattr(_bottom(x), "device") else None


def _take_index_batch(info, dims, x, index, axis):
    d = dims[0]
    # the batch dimension moves past the removed axis or stays
    if d <= axis:
        return take_index(x, index, axis=axis + 1), d
    return take_index(x, index, axis=axis), d - 1


_take_index = define(
    "take_index",
    _take_index_kernel,
    abstract_eval=_abstract_from(lambda s, index, axis: s[:axis] + s[axis + 1 :]),
    vjp=_take_index_vjp,
    linear=(0,),
    batch=_take_index_batch,
)


def take_index(x, index, *, axis=0):
    """``x[..., index, ...]`` with the Python int ``index`` at non-negative ``axis`` (used by rules)."""
    return bind(_take_index, x, index=index, axis=_norm(axis, ndim_of(x)))


# ------------------------------------------------------------------------------ unstack


def _unstack_abstract(xp, x, *, axis=0):
    s = tuple(x.shape)
    return tuple(ShapeDtype(s[:axis] + s[axis + 1 :], x.dtype, x.device) for _ in range(s[axis]))


def _unstack_batch(info, dims, x, *, axis=0):
    x = move_to_front(x, dims[0])
    out = unstack(x, axis=axis + 1)
    return out, (0,) * len(out)


_unstack = define(
    "unstack",
    lambda xp, x, *, axis=0: tuple(xp.unstack(x, axis=axis)),
    abstract_eval=_unstack_abstract,
    vjp=lambda g, ys, x, *, axis=0: (stack(g, axis=axis),),
    linear=True,
    batch=_unstack_batch,
    multiple_results=True,
)


def unstack(x, /, *, axis=0):
    """The slices of ``x`` along ``axis``, as a tuple (the inverse of ``stack``)."""
    return bind(_unstack, x, axis=_norm(axis, ndim_of(x)))


unstack.op = _unstack

# ------------------------------------------------------------------------------ broadcast_arrays / meshgrid


def broadcast_arrays(*arrays):
    """The arrays broadcast against each other, as a list as the 2024.12 standard says (each one a
    ``broadcast_to``)."""
    from polyad.ops.elementwise import _broadcast

    shape = _broadcast(*[shape_of(a) for a in arrays])
    return [a if shape_of(a) == shape else broadcast_to(a, shape) for a in arrays]


def meshgrid(*arrays, indexing="xy"):
    """Coordinate grids from 1-D arrays, as a list: ``indexing="xy"`` (Cartesian) or ``"ij"`` (matrix)."""
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    for a in arrays:
        if ndim_of(a) != 1:
            raise ValueError(f"meshgrid takes 1-D arrays, got one of shape {shape_of(a)}")
    sizes = [shape_of(a)[0] for a in arrays]
    n = len(arrays)
    order = list(range(n))
    if indexing == "xy" and n >= 2:
        order[0], order[1] = 1, 0  # the first two output axes swap
    shape = tuple(sizes[order[d]] for d in range(n))
    out = []
    for i, a in enumerate(arrays):
        pos = order.index(i)
        out.append(broadcast_to(reshape(a, (1,) * pos + (sizes[i],) + (1,) * (n - pos - 1)), shape))
    return out


# ------------------------------------------------------------------------------ flip / roll


def _axes_tuple(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    return tuple(sorted({_norm(a, ndim) for a in _as_tuple(axis)}))


_flip = define(
    "flip",
    abstract_eval=_abstract_from(lambda s, axis: s),
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
    abstract_eval=_abstract_from(lambda s, shift, axis: s),
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
        axis = tuple(_norm(a, ndim_of(x)) for a in _as_tuple(axis))
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
    from polyad.ops.reductions import sum as _sum

    s = shape_of(x)
    if not hasattr(repeats, "shape"):
        # each input element fills ``repeats`` consecutive slots: sum them back
        grouped = reshape(g, s[:axis] + (s[axis], repeats) + s[axis + 1 :])
        return (_sum(grouped, axis=axis + 1), None)
    from polyad.ops.creation import arange, zeros_like
    from polyad.ops.indexing import scatter_add

    owner = repeat(arange(s[axis], device=_device(g)), repeats)  # which input each output slot copies
    return (scatter_add(zeros_like(x, dtype=g.dtype), owner, g, axis=axis), None)


def _repeat_batch(info, dims, x, repeats, *, axis):
    xd, rd = dims
    if rd is not None:
        # per-example repeats give per-example output lengths: only a loop can tell
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
    return bind(_repeat, x, repeats, axis=_norm(axis, ndim_of(x)))


repeat.op = _repeat


def _tile_layout(s, reps):
    """Input shape and repetitions padded to a common rank (NumPy's and the standard's rule)."""
    n = max(len(s), len(reps))
    return (1,) * (n - len(s)) + tuple(s), (1,) * (n - len(reps)) + tuple(reps)


def _tile_vjp(g, y, x, *, repetitions):
    from polyad.ops.reductions import sum as _sum

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
    abstract_eval=_abstract_from(
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
