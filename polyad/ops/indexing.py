"""Indexing: ``x[key]``, functionalised ``x[key] = v``, ``take`` and ``take_along_axis``.

A key is split into its structure (ints, slices, None, Ellipsis, with ``ARRAY`` where an index array
stood) and the index arrays, which travel positionally so that transforms see them (a batched index
array under vmap is an ordinary batched argument).

NumPy's rules decide the output layout: integer arrays and ints (when an array is present) are advanced
indices; their broadcast shape goes where the first of them stood if they are adjacent in the key (None
breaks adjacency), else first. ``_analyse`` computes that layout once for shapes, batching and updates.
"""

from polyad.core import bind
from polyad.core.avals import (
    ShapeDtype,
    broadcast_shape,
    device_of,
    dtype_kind,
    ndim_of,
    normalize_axis,
    shape_of,
)
from polyad.ops.base import (
    batch_all_front,
    broadcast_to,
    expand_dims,
    inverse_permutation,
    move_to_front,
    moveaxis,
    permute_dims,
    reshape,
    unbroadcast,
    where,
)
from polyad.ops.common import ABSTRACT_BOOL, define
from polyad.ops.fills import arange, zeros, zeros_like


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
        if isinstance(k, bool):
            raise IndexError("polyad does not support Python bools as indices; use a boolean array")
        if isinstance(k, int | slice | type(None) | type(Ellipsis)):
            structure.append(k)
        else:
            if isinstance(k, list | tuple):
                raise IndexError("index with an array, not a Python list (polyad keeps keys explicit)")
            structure.append(ARRAY)
            arrays.append(k)
    if structure.count(Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    return tuple(structure), tuple(arrays)


def join_key(structure, arrays):
    it = iter(arrays)
    return tuple(next(it) if k is ARRAY else k for k in structure)


def _has_arrays(structure):
    return any(k is ARRAY for k in structure)


def _is_bool(a):
    return hasattr(a, "dtype") and dtype_kind(a.dtype) == "b"


def _expand(shape, key, arrays):
    """``key`` with its Ellipsis (or the implicit trailing one) replaced by full slices."""
    it = iter(arrays)
    consumed = 0
    for k in key:
        if k is ARRAY:
            a = next(it)
            consumed += ndim_of(a) if _is_bool(a) else 1
        elif k is not None and k is not Ellipsis:
            consumed += 1
    if consumed > len(shape):
        raise IndexError(f"too many indices: {consumed} for an array of dimension {len(shape)}")
    fill = (slice(None),) * (len(shape) - consumed)
    if Ellipsis in key:
        i = key.index(Ellipsis)
        return key[:i] + fill + key[i + 1 :]
    return key + fill


def _broadcast_dims(shapes):
    """Broadcast shape of index arrays; None marks a length known only from data (a boolean mask)."""
    n = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(-n, 0):
        sizes = [s[i] for s in shapes if len(s) >= -i]
        known = {d for d in sizes if d is not None and d != 1}
        if len(known) > 1:
            raise IndexError(f"shape mismatch: index arrays of shapes {shapes} cannot be broadcast together")
        out.append(known.pop() if known else None if None in sizes else 1)
    return tuple(out)


def _analyse(shape, key, arrays):
    """Layout of ``x[key]`` for ``x`` of ``shape``: ``(out_shape, p, bshape, rest)``.

    ``rest`` are the output dimensions of slices and None in order, ``bshape`` the broadcast shape of the
    advanced indices (ints and arrays; a boolean mask gives one dimension of unknown length), placed at
    ``rest[p]`` (``p`` is 0 where the advanced indices are not adjacent).
    """
    key = _expand(shape, key, arrays)
    it = iter(arrays)
    rest, adv_pos, adv_shapes, first, dim = [], [], [], None, 0
    for pos, k in enumerate(key):
        if k is None:
            rest.append(1)
        elif isinstance(k, slice):
            rest.append(len(range(*k.indices(shape[dim]))))
            dim += 1
        else:
            if k is ARRAY:
                a = next(it)
                if _is_bool(a):
                    adv_shapes.append((None,))
                    dim += ndim_of(a)
                else:
                    adv_shapes.append(shape_of(a))
                    dim += 1
            else:  # an int: a 0-d advanced index
                if not -shape[dim] <= k < shape[dim]:
                    raise IndexError(f"index {k} is out of bounds for axis {dim} with size {shape[dim]}")
                adv_shapes.append(())
                dim += 1
            adv_pos.append(pos)
            if first is None:
                first = len(rest)
    bshape = _broadcast_dims(adv_shapes)
    adjacent = adv_pos == list(range(adv_pos[0], adv_pos[0] + len(adv_pos))) if adv_pos else True
    p = (first or 0) if adjacent else 0
    return tuple(rest[:p]) + bshape + tuple(rest[p:]), p, bshape, tuple(rest)


def indexed_shape(shape, key, arrays):
    """The shape of ``x[key]`` (NumPy's rules); a dimension selected by a boolean mask is None."""
    return _analyse(tuple(shape), key, arrays)[0]


# ------------------------------------------------------------------------------ getitem


def _getitem_kernel(xp, x, *arrays, key):
    return x[join_key(key, arrays)]


def _getitem_abstract(xp, x, *arrays, key):
    return ShapeDtype(indexed_shape(x.shape, key, arrays), x.dtype, x.device)


def _getitem_vjp(g, y, x, *arrays, key):
    z = zeros_like(x, dtype=g.dtype)
    if _has_arrays(key):
        return (index_add(z, g, *arrays, key=key),) + (None,) * len(arrays)
    if None in key:
        g, key = without_new_axes(g, shape_of(x), key)
    return (bind(_index_update, z, g, key=key),)


def without_new_axes(g, shape, key):
    """A basic key's new axes (None) removed, with the matching size-1 axes of ``g`` (assignment through
    a key with None is outside the standard)."""
    key = _expand(shape, key, ())
    out_dims, keep = 0, []
    for k in key:
        if k is None:
            out_dims += 1
        elif isinstance(k, slice):
            keep.append(out_dims)
            out_dims += 1
    gs = shape_of(g)
    return reshape(g, tuple(gs[i] for i in keep)), tuple(k for k in key if k is not None)


def _front_key(key):
    """A basic key for an array with a new leading (batch) axis."""
    return (slice(None),) + key + ((Ellipsis,) if Ellipsis not in key else ())


def _batch_size(dims, values):
    return next(shape_of(v)[d] for v, d in zip(values, dims) if d is not None)


def _advanced_batch(size, x_batched, key, arrays, adims, logical_shape):
    """Key and index arrays for the batched ``x`` (batch axis first, when ``x_batched``): each batched index
    array gets its batch axis first and padded to the advanced rank; a batched ``x`` is indexed by an
    arange over the batch in front. Returns ``(key, arrays, layout)`` where layout is ``_analyse``'s."""
    layout = _analyse(logical_shape, key, _logical(arrays, adims))
    nb = len(layout[2])
    new = []
    for a, d in zip(arrays, adims):
        if d is not None:
            a = move_to_front(a, d)
            s = shape_of(a)
            a = reshape(a, (s[0],) + (1,) * (nb - len(s) + 1) + s[1:])
        new.append(a)
    if x_batched:
        lead = reshape(arange(size, device=device_of(arrays[0])), (size,) + (1,) * nb)
        return (ARRAY,) + key, (lead, *new), layout
    return key, tuple(new), layout


def _logical(arrays, dims):
    """Index arrays as seen by one example: batched ones as abstract values without the batch axis."""
    return [
        a if d is None else ShapeDtype(_drop(shape_of(a), d), a.dtype, None) for a, d in zip(arrays, dims)
    ]


def _block_perm(p, nb, nrest):
    """Permutation taking (batch, advanced block, rest) to (batch, rest[:p], advanced block, rest[p:])."""
    return (0, *range(1 + nb, 1 + nb + p), *range(1, 1 + nb), *range(1 + nb + p, 1 + nb + nrest))


def _getitem_batch(info, dims, x, *arrays, key):
    xd, adims = dims[0], dims[1:]
    if not arrays:
        return bind(getitem_op, move_to_front(x, xd), key=_front_key(key)), 0
    any_bool = any(_is_bool(a) for a in arrays)
    if any_bool:
        if any(d is not None for d in adims):
            # a batched boolean mask selects a data-dependent number of elements per example: vmap loops
            return NotImplemented
        # the batch axis last, past every indexed axis: the key stays as it is (a lone mask stays lone)
        x = moveaxis(x, xd, -1)
        k = key if Ellipsis not in key else _expand(shape_of(x)[:-1], key, arrays)
        out = bind(getitem_op, x, *arrays, key=k)
        return out, ndim_of(out) - 1
    logical = shape_of(x) if xd is None else _drop(shape_of(x), xd)
    if xd is not None:
        x = move_to_front(x, xd)
    size = _batch_size(dims, (x, *arrays)) if xd is None else shape_of(x)[0]
    k, new, (_, p, bshape, rest) = _advanced_batch(size, xd is not None, key, arrays, adims, logical)
    out = bind(getitem_op, x, *new, key=k)
    if xd is None:
        return out, p
    if p:
        out = permute_dims(out, _block_perm(p, len(bshape), len(rest)))
    return out, 0


def _drop(s, d):
    return s[:d] + s[d + 1 :]


getitem_op = define(
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
    return bind(getitem_op, x, *arrays, key=structure)


# ------------------------------------------------------------------------------ functional setitem


def _update_kernel(xp, x, v, *arrays, key):
    out = xp.asarray(x, copy=True)
    k = join_key(key, arrays)
    try:
        # x[(mask,)] as x[mask]: array_api_strict converts a tuple key's arrays to NumPy, which its arrays
        # off the CPU device refuse (SciPy's apply_where and at().set() write by a lone mask)
        out[k[0] if len(k) == 1 else k] = v
    except IndexError:
        if not any(not _is_bool(a) for a in arrays):
            raise
        return _update_by_scatter(xp, x, v, k)  # libraries without integer-array assignment
    return out


def _update_by_scatter(xp, x, v, k):
    """``x`` with ``x[k] = v`` written as scatter-adds of flat positions, for libraries without integer-array
    assignment. A position written more than once takes its last write, as NumPy's assignment does (the
    standard leaves repeated writes unspecified; the VJP of ``index_update`` follows the same rule)."""
    flat = xp.reshape(xp.arange(x.size, device=x.device), x.shape)[k]
    vals = xp.asarray(v, dtype=x.dtype, device=x.device)
    shape = broadcast_shape(tuple(flat.shape), tuple(vals.shape))
    flat = xp.reshape(xp.broadcast_to(flat, shape), (-1,))
    vals = xp.reshape(xp.broadcast_to(vals, shape), (-1,))
    last = _last_occurrence_kernel(xp, flat)
    vals = xp.where(last, vals, xp.zeros_like(vals))
    n = x.size
    hit = xp.scatter_add(xp.zeros((n,), dtype=x.dtype, device=x.device), flat, xp.astype(last, x.dtype), 0)
    added = xp.scatter_add(xp.zeros((n,), dtype=x.dtype, device=x.device), flat, vals, 0)
    out = xp.where(hit > 0, added, xp.reshape(x, (-1,)))
    return xp.reshape(out, x.shape)


# ------------------------------------------------------------------------------ repeated writes
# NumPy buffers an indexed statement: in ``u[idx] = v`` a position named twice takes the last write, and
# ``u[idx] += v`` (Python's get, add, set) adds once. The value follows from the kernel; the derivatives
# must agree with it, so the VJP of ``index_update`` sends the cotangent of a position only to the last
# element of ``v`` written there (its JVP is the kernel on tangents, which agrees by construction).


def _last_occurrence_kernel(xp, p):
    """True where an element of ``p`` (integers, compared along the last axis, leading axes apart) is the
    last of its value: a stable sort puts equal values in order, the last of each run wins."""
    order = xp.argsort(p, axis=-1, stable=True)
    s = xp.take_along_axis(p, order, axis=-1)
    ends = xp.ones(s.shape[:-1] + (1,), dtype=xp.bool, device=s.device)
    last_sorted = xp.concat([s[..., 1:] != s[..., :-1], ends], axis=-1) if s.shape[-1] else s == s
    return xp.take_along_axis(last_sorted, xp.argsort(order, axis=-1, stable=True), axis=-1)


_last_occurrence = define(
    "last_occurrence",
    _last_occurrence_kernel,
    abstract_eval=ABSTRACT_BOOL,
    nondiff=True,
    batch=lambda info, dims, p: (
        NotImplemented if ndim_of(p) == 1 else (bind(_last_occurrence, move_to_front(p, dims[0])), 0)
    ),  # a 0-d example has no last axis: the loop gives eager's error
)


def last_occurrence(p):
    """True where an element of the integer array ``p`` is the last one with its value along the last
    axis (the leading axes are independent rows)."""
    return bind(_last_occurrence, p)


def last_writes(x, arrays, key):
    """For ``x[key] = v`` with integer index arrays: True where an element of the written region is the
    last write to its position of ``x`` (False where a later element of the region overwrites it)."""
    positions = bind(getitem_op, reshape(arange(_size(shape_of(x)), device=device_of(x)), shape_of(x)),
                     *arrays, key=key)  # fmt: skip
    region = shape_of(positions)
    return reshape(last_occurrence(reshape(positions, (-1,))), region)


def _size(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def _repeats_possible(arrays):
    """Whether a key's index arrays may name a position twice (an integer array; a boolean mask cannot)."""
    return any(not _is_bool(a) for a in arrays)


def _update_vjp(g, y, x, v, *arrays, key):
    def value_cotangent():
        gv = bind(getitem_op, g, *arrays, key=key)
        if _repeats_possible(arrays):  # an overwritten write had no effect: its cotangent is zero
            gv = where(last_writes(x, arrays, key), gv, 0.0)
        return unbroadcast(gv, v)

    return (lambda: bind(_index_update, g, 0.0, *arrays, key=key), value_cotangent) + (None,) * len(arrays)


def _update_jvp(ts, y, x, v, *arrays, key):
    tx, tv = ts[0], ts[1]
    tx = zeros_like(y) if tx is None else tx
    return bind(_index_update, tx, 0.0 if tv is None else tv, *arrays, key=key)


def _write_batch(op):
    """Batching rule of a write at ``key`` (``index_update``, ``index_add``): the output is batched whenever
    anything is, so ``x`` gets a batch axis first; the written value is laid out like ``x[batched key]``."""

    def rule(info, dims, x, v, *arrays, key):
        xd, vd, adims = dims[0], dims[1], dims[2:]
        size = _batch_size(dims, (x, v, *arrays))
        logical = shape_of(x) if xd is None else _drop(shape_of(x), xd)
        x = broadcast_to(expand_dims(x, axis=0), (size, *logical)) if xd is None else move_to_front(x, xd)
        region = _analyse(logical, key, _logical(arrays, adims))
        r = len(region[0])
        if hasattr(v, "shape"):
            # v as (batch or 1, *region-rank logical shape): explicit, so no broadcasting can misplace it
            v = move_to_front(v, vd) if vd is not None else expand_dims(v, axis=0)
            s = shape_of(v)
            v = reshape(v, (s[0],) + (1,) * (r - len(s) + 1) + s[1:])
        if not arrays:
            return bind(op, x, v, key=_front_key(key)), 0
        if any(_is_bool(a) for a in arrays):
            if any(d is not None for d in adims):
                return NotImplemented  # a batched boolean mask: vmap loops over the examples
            x = moveaxis(x, 0, -1)
            if hasattr(v, "shape"):
                v = moveaxis(v, 0, -1)
            k = key if Ellipsis not in key else _expand(logical, key, arrays)
            out = bind(op, x, v, *arrays, key=k)
            return out, ndim_of(out) - 1
        k, new, (_, p, bshape, rest) = _advanced_batch(size, True, key, arrays, adims, logical)
        if p and hasattr(v, "shape"):
            v = permute_dims(v, inverse_permutation(_block_perm(p, len(bshape), len(rest))))
        return bind(op, x, v, *new, key=k), 0

    return rule


_index_update = define(
    "index_update",
    _update_kernel,
    abstract_eval=lambda xp, x, v, *arrays, key: ShapeDtype(x.shape, x.dtype, x.device),
    vjp=_update_vjp,
    jvp=_update_jvp,
)
_index_update.register_rule("batch", _write_batch(_index_update))
index_update_op = _index_update


def _update_last_write_kernel(xp, x, v, *arrays, key):
    """``index_update`` on CUDA arrays: CuPy's assignment does not promise which write to a repeated
    position wins (seen on an H100: not the last), while the VJP gives the position to the last write, as
    NumPy's assignment does. The positions are reduced to their last write first, so the assignment has
    no repeats."""
    if all(_is_bool(a) for a in arrays):  # boolean masks and basic indices name each position once
        return _update_kernel(xp, x, v, *arrays, key=key)
    flat = xp.reshape(xp.arange(x.size, device=x.device), x.shape)[join_key(key, arrays)]
    vals = xp.asarray(v, dtype=x.dtype, device=x.device)
    shape = broadcast_shape(tuple(flat.shape), tuple(vals.shape))
    flat = xp.reshape(xp.broadcast_to(flat, shape), (-1,))
    vals = xp.reshape(xp.broadcast_to(vals, shape), (-1,))
    last = _last_occurrence_kernel(xp, flat)
    out = xp.reshape(xp.asarray(x, copy=True), (-1,))
    out[flat[last]] = vals[last]
    return xp.reshape(out, x.shape)


_index_update.kernels["cuda"] = _update_last_write_kernel


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
            lambda: unbroadcast(bind(getitem_op, g, *arrays, key=key), v),
        )
        + (None,) * len(arrays)
    ),
    linear=(0, 1),
)
_index_add.register_rule("batch", _write_batch(_index_add))


def index_add(x, v, *arrays, key):
    """``x`` with ``v`` added at ``key`` (repeated indices accumulate): the transpose of ``getitem``."""
    return bind(_index_add, x, v, *arrays, key=key)


# ------------------------------------------------------------------------------ take / scatter_add


def _arange_like(n, x):
    return arange(n, device=device_of(x))


def _wrap_negative(indices, n):
    """Integer ``indices`` into an axis of length ``n`` with negative ones counted from the end."""
    return where(indices < 0, indices + n, indices)


def _offset_rows(indices, size, n):
    """Batched 1-D ``indices`` (batch first: (size, k)) as indices into the flattened (size * n) axis."""
    rows = reshape(_arange_like(size, indices) * n, (size, 1))
    return reshape(_wrap_negative(indices, n) + rows, (-1,))


def _take_kernel(xp, x, indices, *, axis):
    return xp.take(x, indices, axis=axis)


def _take_abstract(xp, x, indices, *, axis):
    s = tuple(x.shape)
    return ShapeDtype(s[:axis] + tuple(indices.shape) + s[axis + 1 :], x.dtype, x.device)


def _take_vjp(g, y, x, indices, *, axis):
    n = shape_of(x)[axis]
    return (lambda: scatter_add(zeros_like(x, dtype=g.dtype), _wrap_negative(indices, n), g, axis=axis), None)


def _take_batch(info, dims, x, indices, *, axis):
    xd, idim = dims
    if xd is not None and ndim_of(x) == 1:
        return NotImplemented  # a 0-d example: what NumPy's take does with it, the loop does
    if idim is None:
        a = axis + 1 if xd <= axis else axis
        return bind(_take, x, indices, axis=a), xd
    # batched indices: flatten the batch into the taken axis and offset each row's indices
    if xd is None:
        size = shape_of(indices)[idim]
        x, indices = batch_all_front((None, idim), (x, indices))
    else:
        x, indices = batch_all_front((xd, idim), (x, indices))
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
            x = reshape(x, (-1,))
        axis = 0
    return bind(_take, x, indices, axis=normalize_axis(axis, ndim_of(x)))


take.op = _take


def _scatter_add_kernel(xp, target, indices, values, *, axis):
    return xp.scatter_add(target, indices, values, axis)


def _scatter_add_batch(info, dims, target, indices, values, *, axis):
    td, idim, vd = dims
    if idim is None:
        target, values = batch_all_front((td, vd), (target, values))
        return scatter_add(target, indices, values, axis=axis + 1), 0
    target, indices, values = batch_all_front((td, idim, vd), (target, indices, values))
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
    if len(xs) != len(is_):
        raise ValueError(f"take_along_axis: indices must have x's rank {len(xs)}, got {len(is_)}")
    a = broadcast_shape(xs[:axis] + (1,) + xs[axis + 1 :], is_[:axis] + (1,) + is_[axis + 1 :])
    return a[:axis] + (is_[axis],) + a[axis + 1 :]


def _take_along_abstract(xp, x, indices, *, axis):
    return ShapeDtype(_along_shape(tuple(x.shape), tuple(indices.shape), axis), x.dtype, x.device)


def _flat_along_indices(indices, out_shape, x_shape, axis):
    """For ``take_along_axis`` output positions, the flat index into an array of ``x_shape`` broadcast to
    ``out_shape`` except along ``axis`` (as a 1-D array)."""
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
    def ct():
        out_shape = shape_of(g)
        flat, full = _flat_along_indices(indices, out_shape, shape_of(x), axis)
        n = 1
        for d in full:
            n *= d
        z = zeros((n,), dtype=g.dtype, device=device_of(g))
        r = reshape(scatter_add(z, flat, reshape(g, (-1,)), axis=0), full)
        return unbroadcast(r, x)

    return (ct, None)


def _take_along_batch(info, dims, x, indices, *, axis):
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
    return bind(_take_along, x, indices, axis=normalize_axis(axis, ndim_of(x)))


take_along_axis.op = _take_along
