"""NumPy's functions that read metadata, create arrays like others, and reshape, join, split, pad and
index them, each with NumPy's signature, as compositions of polyad ops.

Index bookkeeping NumPy does on Python values (which elements ``np.delete`` keeps, where ``np.pad``'s
reflected elements come from) is done here on the host, once per call; the data moves through polyad's
``take``, ``concat`` and writes, so every transform follows it.
"""

import math

import polyad.core.dispatch as dispatch
import polyad.xp as pxp
from polyad.backends.host import np as host_np
from polyad.core import Tensor, fresh
from polyad.interop.numpy.common import (
    NONE_DISCRETE,
    NONE_METADATA,
    arr,
    arrays,
    as_dtype,
    as_int,
    axis_arg,
    floating,
    implements,
    is_array,
    is_complex,
    sequence,
    write_out,
    xp_of,
)
from polyad.ops.linalg.diagonals import diag_embed

CONSTANT = "zero: a constant (values from no argument)"

# ------------------------------------------------------------------------------ metadata


@implements("shape", derivative=NONE_METADATA, how="x.shape")
def shape(a):
    return tuple(arr(a).shape)


@implements("ndim", derivative=NONE_METADATA, how="x.ndim")
def ndim(a):
    return arr(a).ndim


@implements("size", derivative=NONE_METADATA, how="x.size or x.shape[axis]")
def size(a, axis=None):
    a = arr(a)
    return math.prod(a.shape) if axis is None else a.shape[axis]


@implements("result_type", derivative=NONE_METADATA, how="xp.result_type")
def result_type(*arrays_and_dtypes):
    return pxp.result_type(*(x if is_array(x) or isinstance(x, int | float | complex) else as_dtype(x)
                             for x in arrays_and_dtypes))  # fmt: skip


@implements("iscomplexobj", derivative=NONE_METADATA, how="dtype kind")
def iscomplexobj(x):
    return is_complex(arr(x))


@implements("isrealobj", derivative=NONE_METADATA, how="dtype kind")
def isrealobj(x):
    return not is_complex(arr(x))


@implements("can_cast", derivative=NONE_METADATA, how="xp.can_cast of the dtypes")
def can_cast(from_, to, casting="safe"):
    if casting != "safe":
        raise TypeError(f"np.can_cast(casting={casting!r}) on polyad tensors: 'safe' only, as the standard's")
    return pxp.can_cast(from_.dtype if is_array(from_) else as_dtype(from_), as_dtype(to))


@implements("may_share_memory", "shares_memory", derivative=NONE_METADATA, how="identity")
def may_share_memory(a, b, max_work=None):
    # polyad's writes are out of place: two different tensors never share what a write changes
    return a is b


# ------------------------------------------------------------------------------ like, copy, linspace


def _like(fill):
    def like(a, dtype=None, order="K", subok=True, shape=None, *, device=None):
        a = arr(a)
        dtype = as_dtype(dtype, a) or a.dtype
        if shape is None and device is None:
            return (pxp.zeros_like if fill == 0 else pxp.ones_like)(a, dtype=dtype)
        shape = a.shape if shape is None else ((shape,) if isinstance(shape, int) else tuple(shape))
        ns = xp_of(a)
        made = (ns.zeros if fill == 0 else ns.ones)(shape, dtype=dtype, device=device or a.device)
        return fresh(made)  # writable inside a transform, as what polyad.xp creates

    return like


implements("zeros_like", "empty_like", derivative=CONSTANT, how="xp.zeros")(_like(0))
implements("ones_like", derivative=CONSTANT, how="xp.ones")(_like(1))


@implements("full_like", how="xp.full_like, or the broadcast fill value")
def full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, *, device=None):
    a = arr(a)
    dtype = as_dtype(dtype, a) or a.dtype
    shape = tuple(a.shape) if shape is None else ((shape,) if isinstance(shape, int) else tuple(shape))
    if is_array(fill_value):  # a traced fill value: its derivative flows to every element
        return pxp.astype(pxp.broadcast_to(fill_value, shape), dtype)
    return fresh(xp_of(a).full(shape, fill_value, dtype=dtype, device=device or a.device))


@implements("copy", how="xp.asarray(copy=True)")
def copy(a, order="K", subok=False, *args, **kwargs):
    return pxp.asarray(arr(a), copy=True)


@implements("linspace", how="xp.linspace (differentiable in start and stop)")
def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *, device=None):
    num = as_int(num, "num")
    out = pxp.linspace(start, stop, num, endpoint=endpoint, device=device)
    if out.ndim > 1 and axis != 0:
        out = pxp.moveaxis(out, 0, axis)
    if dtype is not None:
        dtype = as_dtype(dtype, out)
        out = pxp.astype(pxp.floor(out) if pxp.isdtype(dtype, "integral") else out, dtype)
    if retstep:
        div = (num - 1) if endpoint else num
        step = (arr(stop) - arr(start)) / div if div > 0 else math.nan
        return out, step
    return out


@implements("logspace", how="base ** xp.linspace")
def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    out = pxp.pow(base, linspace(start, stop, num, endpoint=endpoint, axis=axis))
    return out if dtype is None else pxp.astype(out, as_dtype(dtype, out))


@implements("geomspace", how="exp of xp.linspace of the logs, ends exact")
def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    start, stop = floating(start), floating(stop)
    sign = pxp.where(start < 0, -pxp.ones_like(start), pxp.ones_like(start))
    first, last = pxp.abs(start), pxp.abs(stop)
    out = pxp.exp(pxp.linspace(pxp.log(first), pxp.log(last), num, endpoint=endpoint))
    i = pxp.reshape(xp_of(out).arange(num, device=out.device), (num,) + (1,) * (out.ndim - 1))
    out = pxp.where(i == 0, first + 0 * out, out)  # the ends exactly, as NumPy's
    if endpoint and num > 1:
        out = pxp.where(i == num - 1, last + 0 * out, out)
    out = sign * out
    if out.ndim > 1 and axis != 0:
        out = pxp.moveaxis(out, 0, axis)
    return out if dtype is None else pxp.astype(out, as_dtype(dtype, out))


@implements("meshgrid", how="xp.meshgrid, or reshapes (sparse=True)")
def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    xs = [pxp.reshape(x, (-1,)) for x in arrays(xi)]
    if not sparse:
        return tuple(pxp.meshgrid(*xs, indexing=indexing))
    n, out = len(xs), []
    for i, x in enumerate(xs):
        shape = [1] * n
        shape[i] = -1
        if indexing == "xy" and n > 1 and i < 2:
            shape[0], shape[1] = shape[1], shape[0]
        out.append(pxp.reshape(x, tuple(shape)))
    return tuple(out)


# ------------------------------------------------------------------------------ reshaping


def reversed_axes(a):
    return a if a.ndim < 2 else pxp.permute_dims(a, tuple(range(a.ndim - 1, -1, -1)))


@implements("reshape", how="xp.reshape (order='F' through transposes)")
def reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    a = arr(a)
    shape = newshape if shape is None else shape
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if order == "F":  # column-major: the reversed axes of the row-major reshape of the reversed axes
        return reversed_axes(pxp.reshape(reversed_axes(a), shape[::-1]))
    return pxp.reshape(a, shape)


@implements("ravel", how="xp.reshape")
def ravel(a, order="C"):
    return reshape(a, (-1,), order="F" if order == "F" else "C")


@implements("transpose", how="xp.permute_dims")  # np.permute_dims is np.transpose
def transpose(a, axes=None):
    a = arr(a)
    return reversed_axes(a) if axes is None else pxp.permute_dims(a, tuple(axes))


@implements("matrix_transpose", how="xp.matrix_transpose")
def matrix_transpose(x):
    return pxp.matrix_transpose(arr(x))


@implements("swapaxes", how="xp.permute_dims")
def swapaxes(a, axis1, axis2):
    a = arr(a)
    axes = list(range(a.ndim))
    axes[axis1], axes[axis2] = axes[axis2], axes[axis1]
    return pxp.permute_dims(a, tuple(axes))


@implements("moveaxis", how="xp.moveaxis")
def moveaxis(a, source, destination):
    return pxp.moveaxis(arr(a), axis_arg(source), axis_arg(destination))


@implements("rollaxis", how="xp.permute_dims")
def rollaxis(a, axis, start=0):
    a = arr(a)
    n = a.ndim
    axis %= n
    start = start + n if start < 0 else start
    if axis < start:
        start -= 1
    if axis == start:
        return a
    axes = [i for i in range(n) if i != axis]
    axes.insert(start, axis)
    return pxp.permute_dims(a, tuple(axes))


@implements("expand_dims", how="xp.reshape")
def expand_dims(a, axis):
    a = arr(a)
    axes = axis if isinstance(axis, tuple | list) else (axis,)
    out_ndim = a.ndim + len(axes)
    axes = {ax % out_ndim for ax in axes}
    it = iter(a.shape)
    return pxp.reshape(a, tuple(1 if i in axes else next(it) for i in range(out_ndim)))


@implements("squeeze", how="xp.squeeze")
def squeeze(a, axis=None):
    a = arr(a)
    if axis is None:
        axis = tuple(i for i, s in enumerate(a.shape) if s == 1)
    return pxp.squeeze(a, axis=axis_arg(axis))


def _atleast_shape(shape, n):
    """NumPy's ``atleast_{n}d`` shape: 0-d and 1-d arrays get leading axes, except that ``atleast_3d``
    puts a 1-d array (N,) at (1, N, 1) and a 2-d one (M, N) at (M, N, 1)."""
    if n == 3 and len(shape) in (1, 2):
        return (1,) + shape + (1,) if len(shape) == 1 else shape + (1,)
    return (1,) * (n - len(shape)) + shape


def _atleast(n):
    def atleast(*arys):
        out = [a if a.ndim >= n else pxp.reshape(a, _atleast_shape(tuple(a.shape), n)) for a in arrays(arys)]
        return out[0] if len(out) == 1 else tuple(out)

    return atleast


for _n in (1, 2, 3):
    implements(f"atleast_{_n}d", how="xp.reshape")(_atleast(_n))
atleast_1d, atleast_2d, atleast_3d = _atleast(1), _atleast(2), _atleast(3)


@implements("broadcast_to", how="xp.broadcast_to")
def broadcast_to(array, shape, subok=False):
    return pxp.broadcast_to(arr(array), (shape,) if isinstance(shape, int) else tuple(shape))


@implements("broadcast_arrays", how="xp.broadcast_arrays")
def broadcast_arrays(*args, subok=False):
    return tuple(pxp.broadcast_arrays(*arrays(args)))


@implements("flip", how="xp.flip")
def flip(m, axis=None):
    return pxp.flip(arr(m), axis=axis_arg(axis))


@implements("fliplr", how="xp.flip")
def fliplr(m):
    return pxp.flip(arr(m), axis=1)


@implements("flipud", how="xp.flip")
def flipud(m):
    return pxp.flip(arr(m), axis=0)


@implements("rot90", how="xp.flip, xp.permute_dims")
def rot90(m, k=1, axes=(0, 1)):
    m = arr(m)
    k %= 4
    if k == 0:
        return m
    if k == 2:
        return pxp.flip(pxp.flip(m, axis=axes[0]), axis=axes[1])
    perm = list(range(m.ndim))
    perm[axes[0]], perm[axes[1]] = perm[axes[1]], perm[axes[0]]
    if k == 1:
        return pxp.permute_dims(pxp.flip(m, axis=axes[1]), tuple(perm))
    return pxp.flip(pxp.permute_dims(m, tuple(perm)), axis=axes[1])


@implements("roll", how="xp.roll")
def roll(a, shift, axis=None):
    return pxp.roll(arr(a), shift=tuple(shift) if isinstance(shift, list) else shift, axis=axis_arg(axis))


@implements("tile", how="xp.tile")
def tile(A, reps):
    return pxp.tile(arr(A), (reps,) if isinstance(reps, int) else tuple(reps))


@implements("repeat", how="xp.repeat")
def repeat(a, repeats, axis=None):
    a = arr(a)
    if not isinstance(repeats, int):
        repeats = arr(repeats)
        repeats = int(repeats) if repeats.ndim == 0 else repeats
    return pxp.repeat(a, repeats, axis=axis)


@implements("resize", how="xp.take of the flattened array, cycled")
def resize(a, new_shape):
    a = arr(a)
    new_shape = (new_shape,) if isinstance(new_shape, int) else tuple(new_shape)
    n, flat = math.prod(new_shape), pxp.reshape(a, (-1,))
    if flat.shape[0] == 0 or n == 0:
        return fresh(xp_of(a).zeros(new_shape, dtype=a.dtype, device=a.device))
    index = xp_of(a).arange(n, device=a.device) % flat.shape[0]
    return pxp.reshape(pxp.take(flat, index), new_shape)


# ------------------------------------------------------------------------------ joining and splitting


def _cast(x, dtype):
    return x if dtype is None else pxp.astype(x, as_dtype(dtype, x))


@implements("concatenate", how="xp.concat")  # np.concat is np.concatenate
def concatenate(arrays_, axis=0, out=None, *, dtype=None, casting="same_kind"):
    return write_out(out, _cast(pxp.concat(sequence(arrays_, "concatenate"), axis=axis), dtype))


@implements("stack", how="xp.stack")
def stack(arrays_, axis=0, out=None, *, dtype=None, casting="same_kind"):
    return write_out(out, _cast(pxp.stack(sequence(arrays_, "stack"), axis=axis), dtype))


@implements("vstack", how="xp.concat")
def vstack(tup, *, dtype=None, casting="same_kind"):
    parts = [atleast_2d(a) for a in sequence(tup, "vstack")]
    return _cast(pxp.concat(parts, axis=0), dtype)


@implements("hstack", how="xp.concat")
def hstack(tup, *, dtype=None, casting="same_kind"):
    parts = [atleast_1d(a) for a in sequence(tup, "hstack")]
    return _cast(pxp.concat(parts, axis=0 if parts and parts[0].ndim == 1 else 1), dtype)


@implements("dstack", how="xp.concat")
def dstack(tup):
    return pxp.concat([atleast_3d(a) for a in sequence(tup, "dstack")], axis=2)


@implements("column_stack", how="xp.concat")
def column_stack(tup):
    parts = []
    for a in sequence(tup, "column_stack"):
        parts.append(pxp.reshape(a, (-1, 1)) if a.ndim < 2 else a)
    return pxp.concat(parts, axis=1)


def _depth(x):
    return 1 + max((_depth(v) for v in x), default=0) if isinstance(x, list) else 0


def _leaves(x):
    return [leaf for v in x for leaf in _leaves(v)] if isinstance(x, list) else [arr(x)]


@implements("block", how="xp.concat, innermost lists along the last axis")
def block(arrays_):
    depth = _depth(arrays_)
    ndim = max([depth] + [a.ndim for a in _leaves(arrays_)])

    def build(x, level):
        if isinstance(x, list):
            return pxp.concat([build(v, level + 1) for v in x], axis=-(depth - level))
        a = arr(x)
        return pxp.reshape(a, (1,) * (ndim - a.ndim) + tuple(a.shape))

    return build(arrays_, 0)


def _split_points(n, indices_or_sections, even):
    if isinstance(indices_or_sections, int):
        sections = indices_or_sections
        if even and n % sections:
            raise ValueError("array split does not result in an equal division")
        each, extra = divmod(n, sections)
        sizes = [each + 1] * extra + [each] * (sections - extra)
        points = [0]
        for s in sizes:
            points.append(points[-1] + s)
        return points
    return [0] + [min(int(i), n) for i in indices_or_sections] + [n]


def _split(ary, indices_or_sections, axis, even):
    ary = arr(ary)
    axis %= ary.ndim
    points = _split_points(ary.shape[axis], indices_or_sections, even)
    head = (slice(None),) * axis
    return [ary[head + (slice(a, max(a, b)), ...)] for a, b in zip(points[:-1], points[1:])]


@implements("split", how="slices")
def split(ary, indices_or_sections, axis=0):
    return _split(ary, indices_or_sections, axis, even=True)


@implements("array_split", how="slices")
def array_split(ary, indices_or_sections, axis=0):
    return _split(ary, indices_or_sections, axis, even=False)


@implements("hsplit", how="slices")
def hsplit(ary, indices_or_sections):
    ary = arr(ary)
    return _split(ary, indices_or_sections, 1 if ary.ndim > 1 else 0, even=True)


@implements("vsplit", how="slices")
def vsplit(ary, indices_or_sections):
    return _split(ary, indices_or_sections, 0, even=True)


@implements("dsplit", how="slices")
def dsplit(ary, indices_or_sections):
    return _split(ary, indices_or_sections, 2, even=True)


@implements("unstack", how="xp.unstack")
def unstack(x, /, *, axis=0):
    return tuple(pxp.unstack(arr(x), axis=axis))


@implements("append", how="xp.concat")
def append(arr_, values, axis=None):
    a, v = arr(arr_), arr(values)
    if axis is None:
        return pxp.concat([pxp.reshape(a, (-1,)), pxp.reshape(v, (-1,))])
    return pxp.concat([a, v], axis=axis)


def _host_indices(obj, n):
    """The positions ``obj`` (an int, slice, list, boolean mask or integer array) names along an axis of
    length ``n``, on the host."""
    if isinstance(obj, slice):
        return host_np.arange(n)[obj]
    if isinstance(obj, Tensor):
        obj = obj.tolist()  # index bookkeeping: integers carry no derivative
    else:
        owner = dispatch.backend_of_array(obj)
        if owner is not None:  # a device's array (CuPy's refuse NumPy): its positions copied here on purpose
            obj = owner.to_numpy(obj)
    index = host_np.asarray(obj)
    if index.dtype == bool:
        return host_np.flatnonzero(index)
    return host_np.where(index < 0, index + n, index).astype(host_np.int64)


def _take_host(a, index, axis):
    ns = xp_of(a)
    return pxp.take(a, ns.asarray(index.tolist(), dtype=ns.int64, device=a.device), axis=axis)


@implements("delete", how="xp.take of the kept positions")
def delete(arr_, obj, axis=None):
    a = arr(arr_)
    if axis is None:
        a, axis = pxp.reshape(a, (-1,)), 0
    axis %= a.ndim
    n = a.shape[axis]
    keep = host_np.ones(n, dtype=bool)
    keep[_host_indices(obj, n)] = False
    return _take_host(a, host_np.flatnonzero(keep), axis)


@implements("insert", how="xp.concat, then xp.take of the new order")
def insert(arr_, obj, values, axis=None):
    a = arr(arr_)
    if axis is None:
        a, axis = pxp.reshape(a, (-1,)), 0
    axis %= a.ndim
    n = a.shape[axis]
    v = arr(values)
    if isinstance(obj, int) or (is_array(obj) and arr(obj).ndim == 0):
        index = int(obj)
        index = index + n if index < 0 else index
        v = pxp.reshape(v, (1,) * (a.ndim - v.ndim) + tuple(v.shape))  # NumPy's ndmin, then
        v = pxp.moveaxis(v, 0, axis) if a.ndim > 1 else v  # the values' first axis runs along ``axis``
        count = v.shape[axis]
        shape = list(a.shape)
        shape[axis] = count
        v = pxp.broadcast_to(v, tuple(shape))
        head = (slice(None),) * axis
        return pxp.concat(
            [a[head + (slice(0, index), ...)], v, a[head + (slice(index, None), ...)]], axis=axis
        )
    positions = _host_indices(obj, n)
    count = len(positions)
    shape = list(a.shape)
    shape[axis] = count
    v = pxp.broadcast_to(pxp.moveaxis(v, 0, axis) if v.ndim == a.ndim and a.ndim > 1 else v, tuple(shape))
    order = host_np.argsort(positions, kind="stable")
    new_positions = host_np.empty(count, dtype=host_np.int64)
    new_positions[order] = positions[order] + host_np.arange(count)
    source = host_np.empty(n + count, dtype=host_np.int64)
    taken = host_np.zeros(n + count, dtype=bool)
    taken[new_positions] = True
    source[new_positions] = n + host_np.arange(count)
    source[~taken] = host_np.arange(n)
    return _take_host(pxp.concat([a, v], axis=axis), source, axis)


# ------------------------------------------------------------------------------ padding


def _pad_pairs(pad_width, ndim, dtype=None):
    """``pad_width`` (or ``constant_values``) as NumPy reads it: one (before, after) pair per axis."""
    w = host_np.asarray(pad_width.tolist() if isinstance(pad_width, Tensor) else pad_width, dtype=dtype)
    return host_np.broadcast_to(w.reshape(-1, 2) if w.size == 2 * ndim else w, (ndim, 2)).tolist()


def _pad_source(n, before, after, mode):
    """For each position of the padded axis, the position of the original axis it copies (host)."""
    j = host_np.arange(-before, n + after)
    if mode == "edge":
        return host_np.clip(j, 0, n - 1)
    if mode == "wrap":
        return host_np.mod(j, n)
    if mode == "reflect":
        if n == 1:
            return host_np.zeros_like(j)
        m = host_np.mod(j, 2 * (n - 1))
        return host_np.where(m < n, m, 2 * (n - 1) - m)
    m = host_np.mod(j, 2 * n)  # symmetric: the edge repeated
    return host_np.where(m < n, m, 2 * n - 1 - m)


@implements("pad", how="xp.concat (constant) or xp.take (edge, wrap, reflect, symmetric)")
def pad(array, pad_width, mode="constant", **kwargs):
    a = arr(array)
    pairs = _pad_pairs(pad_width, a.ndim, host_np.int64)
    if mode == "constant":
        values = kwargs.pop("constant_values", 0)
        values = _pad_pairs(values, a.ndim) if not is_array(values) else [(values, values)] * a.ndim
        for axis, ((before, after), (v_before, v_after)) in enumerate(zip(pairs, values)):
            parts = []
            for width, v in ((before, v_before), (after, v_after)):
                shape = list(a.shape)
                shape[axis] = width
                parts.append(pxp.astype(pxp.broadcast_to(arr(v), tuple(shape)), a.dtype) if is_array(v)
                             else xp_of(a).full(tuple(shape), v, dtype=a.dtype, device=a.device))  # fmt: skip
            a = pxp.concat([parts[0], a, parts[1]], axis=axis)
        return a
    if mode not in ("edge", "wrap", "reflect", "symmetric") or kwargs.get("reflect_type", "even") != "even":
        raise TypeError(
            f"np.pad(mode={mode!r}) on a polyad tensor: supported modes are constant, edge, wrap, reflect "
            "and symmetric (reflect_type='even')"
        )
    for axis, (before, after) in enumerate(pairs):
        if before or after:
            a = _take_host(a, _pad_source(a.shape[axis], before, after, mode), axis)
    return a


# ------------------------------------------------------------------------------ diagonals


@implements("diag", how="linalg.diagonal, or its transpose diag_embed")
def diag(v, k=0):
    v = arr(v)
    if v.ndim == 1:
        n = v.shape[0] + abs(k)
        return diag_embed(v, offset=k, n=n, m=n)
    if v.ndim != 2:
        raise ValueError("np.diag takes a 1-D or 2-D array")
    return pxp.linalg.diagonal(v, offset=k)


@implements("diagflat", how="diag_embed")
def diagflat(v, k=0):
    return diag(pxp.reshape(arr(v), (-1,)), k)


@implements("diagonal", how="xp.linalg.diagonal")
def diagonal(a, offset=0, axis1=0, axis2=1):
    a = pxp.moveaxis(arr(a), (axis1, axis2), (-2, -1))
    return pxp.linalg.diagonal(a, offset=offset)


@implements("trace", how="xp.sum of the diagonal")
def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    d = diagonal(a, offset, axis1, axis2)
    return write_out(out, pxp.sum(d, axis=-1, dtype=as_dtype(dtype, d)))


def _tri(name):
    f = getattr(pxp, name)

    def tri(m, k=0):
        m = arr(m)
        if m.ndim == 1:  # NumPy's mask broadcasts a vector to a square
            m = pxp.broadcast_to(m, (m.shape[0], m.shape[0]))
        return f(m, k=k)

    return tri


implements("tril", how="xp.tril")(_tri("tril"))
implements("triu", how="xp.triu")(_tri("triu"))


def _tri_indices(name):
    def indices(arr_, k=0):
        a = arr(arr_)
        ns = xp_of(a)
        mask = getattr(ns, name)(ns.ones(a.shape[-2:], dtype=ns.int64, device=a.device), k=k)
        return pxp.nonzero(mask)

    return indices


implements("triu_indices_from", derivative=NONE_DISCRETE, how="xp.nonzero of xp.triu")(_tri_indices("triu"))
implements("tril_indices_from", derivative=NONE_DISCRETE, how="xp.nonzero of xp.tril")(_tri_indices("tril"))


@implements("diag_indices_from", derivative=NONE_DISCRETE, how="xp.arange")
def diag_indices_from(arr_):
    a = arr(arr_)
    i = xp_of(a).arange(a.shape[0], device=a.device)
    return (i,) * a.ndim
