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
