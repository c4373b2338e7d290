"""Indexing: ``x[key]``, functionalised ``x[key] = v``, ``take`` and ``take_along_axis``.

A key is split into its structure (ints, slices, None, Ellipsis, with ``ARRAY`` where an index array
stood) and the index arrays, which travel positionally so that transforms see them (a batched index
array under vmap is an ordinary batched argument).
"""

from polyad.core import Tensor, bind
from polyad.ops.common import (
    ShapeDtype,
    define,
    move_to_front,
    ndim_of,
    shape_of,
    unbroadcast,
)


class _ArrayMarker:
    def __repr__(self):
        return "ARRAY"


ARRAY = _ArrayMarker()  # where an index array stood in a key


def split_key(key):
    """``(structure, arrays)`` of an indexing key; the structure is hashable metadata."""
    if not isinstance(key, tuple):
        key = (key,)
    structure, arrays = [], []
    for k in key:
        if isinstance(k, int | slice | type(None) | type(Ellipsis)):
            structure.append(k)
        elif isinstance(k, bool):
            structure.append(k)
        else:
            structure.append(ARRAY)
            arrays.append(k)
    return tuple(structure), tuple(arrays)


def join_key(structure, arrays):
    it = iter(arrays)
    return tuple(next(it) if k is ARRAY else k for k in structure)


def _has_arrays(structure):
    return any(k is ARRAY for k in structure)


# ------------------------------------------------------------------------------ getitem


def _getitem_kernel(xp, x, *arrays, key):
    return x[join_key(key, arrays)]


def _getitem_abstract(xp, x, *arrays, key):
    return ShapeDtype(indexed_shape(x.shape, key, [a.shape for a in arrays]), x.dtype, x.device)


def indexed_shape(shape, key, array_shapes):
    """The shape of ``x[key]`` (NumPy's rules; integer index arrays only, booleans are data-dependent)."""
    from polyad.ops.elementwise import _broadcast

    n_consumed = sum(1 for k in key if k is not None and k is not Ellipsis)
    if Ellipsis in key:
        i = key.index(Ellipsis)
        key = key[:i] + (slice(None),) * (len(shape) - n_consumed) + key[i + 1 :]
    else:
        key = key + (slice(None),) * (len(shape) - n_consumed)
    out, adv_pos, dim = [], [], 0
    shapes = iter(array_shapes)
    for k in key:
        if k is None:
            out.append(1)
        elif isinstance(k, slice):
            out.append(len(range(*k.indices(shape[dim]))))
            dim += 1
        elif k is ARRAY:
            adv_pos.append(len(out))
            out.append(next(shapes))
            dim += 1
        else:  # an int
            dim += 1
    if not adv_pos:
        return tuple(out)
    b = _broadcast(*[out[i] for i in adv_pos])
    adjacent = adv_pos == list(range(adv_pos[0], adv_pos[0] + len(adv_pos)))
    rest = [d for i, d in enumerate(out) if i not in adv_pos]
    if adjacent:
        return tuple(rest[: adv_pos[0]]) + b + tuple(rest[adv_pos[0] :])
    return b + tuple(rest)


def _getitem_vjp(g, y, x, *arrays, key):
    from polyad.ops.creation import zeros_like

    z = zeros_like(x, dtype=g.dtype)
    if _has_arrays(key):
        return (index_add(z, g, *arrays, key=key),) + (None,) * len(arrays)
    return (bind(_index_update, z, g, key=key),)


def _basic_batch_key(key):
    return (slice(None),) + key


def _getitem_batch(dims, x, *arrays, key):
    if all(d is None for d in dims[1:]) and not _has_arrays(key):
        x = move_to_front(x, dims[0])
        return bind(_getitem, x, key=_basic_batch_key(key)), 0
    from polyad.batching import loop_fallback

    return loop_fallback(_getitem, dims, (x, *arrays), {"key": key})


_getitem = define(
    "getitem",
    _getitem_kernel,
    abstract_eval=_getitem_abstract,
    vjp=_getitem_vjp,
    linear=(0,),
    batch=_getitem_batch,
)


def getitem(x, key):
    """``x[key]`` for a tensor or array ``x`` (ints, slices, None, Ellipsis, integer or boolean arrays)."""
    structure, arrays = split_key(key)
    return bind(_getitem, x, *arrays, key=structure)


# ------------------------------------------------------------------------------ functional setitem


def _update_kernel(xp, x, v, *arrays, key):
    out = xp.asarray(x, copy=True)
    out[join_key(key, arrays)] = v
    return out


def _update_vjp(g, y, x, v, *arrays, key):
    return (
        lambda: bind(_index_update, g, 0.0, *arrays, key=key),
        lambda: unbroadcast(bind(_getitem, g, *arrays, key=key), v),
    ) + (None,) * len(arrays)


def _update_jvp(ts, y, x, v, *arrays, key):
    from polyad.ops.creation import zeros_like

    tx, tv = ts[0], ts[1]
    tx = zeros_like(y) if tx is None else tx
    return bind(_index_update, tx, 0.0 if tv is None else tv, *arrays, key=key)


def _update_batch(dims, x, v, *arrays, key):
    if all(d is None for d in dims[2:]) and not _has_arrays(key):
        from polyad.ops.manipulation import _batch_all_front, reshape

        xd, vd = dims[0], dims[1]
        if xd is None:
            (x,) = _batch_all_front((None, vd), (x, v))[:1]
        else:
            x = move_to_front(x, xd)
        if vd is not None:
            v = move_to_front(v, vd)
            region = ndim_of(bind(_getitem, x, key=_basic_batch_key(key))) - 1
            r = ndim_of(v) - 1
            if r < region:
                s = shape_of(v)
                v = reshape(v, (s[0],) + (1,) * (region - r) + s[1:])
        return bind(_index_update, x, v, key=_basic_batch_key(key)), 0
    from polyad.batching import loop_fallback

    return loop_fallback(_index_update, dims, (x, v, *arrays), {"key": key})


_index_update = define(
    "index_update",
    _update_kernel,
    abstract_eval=lambda xp, x, v, *arrays, key: ShapeDtype(x.shape, x.dtype, x.device),
    vjp=_update_vjp,
    jvp=_update_jvp,
    batch=_update_batch,
)


def index_update(x, key, value):
    """``x`` with ``x[key]`` replaced by ``value``, out of place (what ``x[key] = value`` records)."""
    structure, arrays = split_key(key)
    return bind(_index_update, x, value, *arrays, key=structure)


# ------------------------------------------------------------------------------ index_add (scatter-add)


def _index_add_kernel(xp, x, v, *arrays, key):
    return xp.index_add(x, join_key(key, arrays), v)


_index_add = define(
    "index_add",
    _index_add_kernel,
    abstract_eval=lambda xp, x, v, *arrays, key: ShapeDtype(x.shape, x.dtype, x.device),
    vjp=lambda g, y, x, v, *arrays, key: (
        (
            lambda: g,
            lambda: unbroadcast(bind(_getitem, g, *arrays, key=key), v),
        )
        + (None,) * len(arrays)
    ),
    linear=(0, 1),
)


def index_add(x, v, *arrays, key):
    """``x`` with ``v`` added at ``key`` (repeated indices accumulate): the transpose of ``getitem``."""
    return bind(_index_add, x, v, *arrays, key=key)


def _is_tensor(x):
    return isinstance(x, Tensor)


# ------------------------------------------------------------------------------ take / scatter_add


def _norm_axis(axis, ndim):
    if not -ndim <= axis < max(ndim, 1):
        raise ValueError(f"axis {axis} is out of bounds for an array of dimension {ndim}")
    return axis % ndim if ndim else 0


def _arange_like(n, x):
    from polyad.ops.creation import arange
    from polyad.ops.manipulation import _device

    return arange(n, device=_device(x))


def _wrap_negative(indices, n):
    """Integer ``indices`` into an axis of length ``n`` with negative ones counted from the end."""
    from polyad.ops.elementwise import where

    return where(indices < 0, indices + n, indices)


def _offset_rows(indices, size, n):
    """Batched 1-D ``indices`` (batch first: (size, k)) as indices into the flattened (size * n) axis."""
    from polyad.ops.manipulation import reshape

    rows = reshape(_arange_like(size, indices) * n, (size, 1))
    return reshape(_wrap_negative(indices, n) + rows, (-1,))


def _take_kernel(xp, x, indices, *, axis):
    return xp.take(x, indices, axis=axis)


def _take_abstract(xp, x, indices, *, axis):
    s = tuple(x.shape)
    return ShapeDtype(s[:axis] + tuple(indices.shape) + s[axis + 1 :], x.dtype, x.device)


def _take_vjp(g, y, x, indices, *, axis):
    from polyad.ops.creation import zeros_like

    n = shape_of(x)[axis]
    return (lambda: scatter_add(zeros_like(x, dtype=g.dtype), _wrap_negative(indices, n), g, axis=axis), None)


def _take_batch(dims, x, indices, *, axis):
    from polyad.ops.manipulation import _batch_all_front, moveaxis, reshape

    xd, idim = dims
    if idim is None:
        a = axis + 1 if xd <= axis else axis
        return bind(_take, x, indices, axis=a), xd
    # batched indices: flatten the batch into the taken axis and offset each row's indices
    if xd is None:
        size = shape_of(indices)[idim]
        x, indices = _batch_all_front((None, idim), (x, indices))
    else:
        x, indices = _batch_all_front((xd, idim), (x, indices))
        size = shape_of(x)[0]
    x = moveaxis(x, axis + 1, 1)
    s = shape_of(x)
    n, k = s[1], shape_of(indices)[1]
    flat = reshape(x, (size * n,) + s[2:])
    out = bind(_take, flat, _offset_rows(indices, size, n), axis=0)
    out = reshape(out, (size, k) + s[2:])
    return moveaxis(out, 1, axis + 1), 0


_take = define(
    "take",
    _take_kernel,
    abstract_eval=_take_abstract,
    vjp=_take_vjp,
    linear=(0,),
    batch=_take_batch,
)


def take(x, indices, /, *, axis=None):
    """Elements of ``x`` at integer ``indices`` (1-D) along ``axis`` (optional for a 1-D ``x``)."""
    if axis is None:
        if ndim_of(x) != 1:
            from polyad.ops.manipulation import reshape

            x = reshape(x, (-1,))
        axis = 0
    return bind(_take, x, indices, axis=_norm_axis(axis, ndim_of(x)))


take.op = _take


def _scatter_add_kernel(xp, target, indices, values, *, axis):
    return xp.scatter_add(target, indices, values, axis)


def _scatter_add_batch(dims, target, indices, values, *, axis):
    from polyad.ops.manipulation import _batch_all_front, moveaxis, reshape

    td, idim, vd = dims
    if idim is None:
        target, values = _batch_all_front((td, vd), (target, values))
        return scatter_add(target, indices, values, axis=axis + 1), 0
    target, indices, values = _batch_all_front((td, idim, vd), (target, indices, values))
    size = shape_of(indices)[0]
    target = moveaxis(target, axis + 1, 1)
    values = moveaxis(values, axis + 1, 1)
    s, k = shape_of(target), shape_of(indices)[1]
    n = s[1]
    flat_t = reshape(target, (size * n,) + s[2:])
    flat_v = reshape(values, (size * k,) + s[2:])
    out = scatter_add(flat_t, _offset_rows(indices, size, n), flat_v, axis=0)
    return moveaxis(reshape(out, s), 1, axis + 1), 0


_scatter_add = define(
    "scatter_add",
    _scatter_add_kernel,
    abstract_eval=lambda xp, t, i, v, *, axis: ShapeDtype(t.shape, t.dtype, t.device),
    vjp=lambda g, y, t, i, v, *, axis: (lambda: g, None, lambda: bind(_take, g, i, axis=axis)),
    linear=(0, 2),
    batch=_scatter_add_batch,
)


def scatter_add(target, indices, values, *, axis):
    """``target`` with ``values`` added at 1-D non-negative ``indices`` along ``axis`` (repeats accumulate):
    the transpose of ``take``."""
    return bind(_scatter_add, target, indices, values, axis=axis)


# ------------------------------------------------------------------------------ take_along_axis


def _take_along_kernel(xp, x, indices, *, axis):
    return xp.take_along_axis(x, indices, axis=axis)


def _along_shape(xs, is_, axis):
    from polyad.ops.elementwise import _broadcast

    if len(xs) != len(is_):
        raise ValueError(f"take_along_axis: indices must have x's rank {len(xs)}, got {len(is_)}")
    a = _broadcast(xs[:axis] + (1,) + xs[axis + 1 :], is_[:axis] + (1,) + is_[axis + 1 :])
    return a[:axis] + (is_[axis],) + a[axis + 1 :]


def _take_along_abstract(xp, x, indices, *, axis):
    return ShapeDtype(_along_shape(tuple(x.shape), tuple(indices.shape), axis), x.dtype, x.device)


def _flat_along_indices(indices, out_shape, x_shape, axis):
    """For ``take_along_axis`` output positions, the flat index into an array of ``x_shape`` broadcast to
    ``out_shape`` except along ``axis`` (as a 1-D array)."""
    from polyad.ops.manipulation import broadcast_to, reshape

    full = out_shape[:axis] + (x_shape[axis],) + out_shape[axis + 1 :]
    strides, acc = [0] * len(full), 1
    for d in range(len(full) - 1, -1, -1):
        strides[d] = acc
        acc *= full[d]
    flat = broadcast_to(_wrap_negative(indices, x_shape[axis]), out_shape) * strides[axis]
    for d, size in enumerate(out_shape):
        if d == axis or size == 1:
            continue
        shape = (1,) * d + (size,) + (1,) * (len(out_shape) - d - 1)
        flat = flat + reshape(_arange_like(size, indices) * strides[d], shape)
    return reshape(flat, (-1,)), full


def _take_along_vjp(g, y, x, indices, *, axis):
    from polyad.ops.creation import zeros
    from polyad.ops.manipulation import _device, reshape

    def ct():
        out_shape = shape_of(g)
        flat, full = _flat_along_indices(indices, out_shape, shape_of(x), axis)
        n = 1
        for d in full:
            n *= d
        z = zeros((n,), dtype=g.dtype, device=_device(g))
        r = reshape(scatter_add(z, flat, reshape(g, (-1,)), axis=0), full)
        return unbroadcast(r, x)

    return (ct, None)


def _take_along_batch(dims, x, indices, *, axis):
    from polyad.ops.manipulation import expand_dims

    xd, idim = dims
    x = expand_dims(x, axis=0) if xd is None else move_to_front(x, xd)
    indices = expand_dims(indices, axis=0) if idim is None else move_to_front(indices, idim)
    return bind(_take_along, x, indices, axis=axis + 1), 0


_take_along = define(
    "take_along_axis",
    _take_along_kernel,
    abstract_eval=_take_along_abstract,
    vjp=_take_along_vjp,
    linear=(0,),
    batch=_take_along_batch,
)


def take_along_axis(x, indices, /, *, axis=-1):
    """Elements of ``x`` at ``indices`` along ``axis``; ``indices`` has ``x``'s rank and broadcasts with it
    in the other axes."""
    return bind(_take_along, x, indices, axis=_norm_axis(axis, ndim_of(x)))


take_along_axis.op = _take_along
