"""NumPy's indexing functions (``np.take``, ``np.where``, ``np.nonzero``, ``np.select``...) and its
in-place writers (``np.put_along_axis``, ``np.copyto``, ``np.putmask``, ``np.place``,
``np.fill_diagonal``), with NumPy's signatures. The writers take a polyad tensor as their target and write
through its functionalised ``__setitem__``, the path every in-place write takes; a NumPy array as the
target of a traced value is refused (it could not hold the derivative or batch).
"""

import polyad.xp as pxp
from polyad.core import Tensor
from polyad.interop.numpy.common import NONE_DISCRETE, arr, implements, is_array, write_out, xp_of
from polyad.interop.numpy.shapes import resize

# ------------------------------------------------------------------------------ indexing


def _int_index(indices, like):
    index = arr(indices)
    if not pxp.isdtype(index.dtype, "integral"):
        raise IndexError(f"indices must be integers, got dtype {index.dtype}")
    return index


@implements("take", how="xp.take")
def take(a, indices, axis=None, out=None, mode="raise"):
    a = arr(a)
    if axis is None:
        a, axis = pxp.reshape(a, (-1,)), 0
    axis %= a.ndim
    index = _int_index(indices, a)
    n = a.shape[axis]
    if mode == "wrap":
        index = pxp.remainder(index, n)
    elif mode == "clip":
        index = pxp.clip(index, 0, n - 1)
    flat = pxp.reshape(index, (-1,))
    result = pxp.take(a, flat, axis=axis)
    shape = tuple(a.shape[:axis]) + tuple(index.shape) + tuple(a.shape[axis + 1 :])
    return write_out(out, pxp.reshape(result, shape))


@implements("take_along_axis", how="xp.take_along_axis")
def take_along_axis(arr_, indices, axis=-1):
    a = arr(arr_)
    if axis is None:
        a, axis = pxp.reshape(a, (-1,)), 0
    return pxp.take_along_axis(a, _int_index(indices, a), axis=axis)


def _along_key(a, indices, axis):
    """The advanced-indexing key NumPy's ``put_along_axis`` writes through: open ranges on every axis but
    ``axis``, which takes ``indices``."""
    key = []
    for d in range(a.ndim):
        if d == axis:
            key.append(indices)
        else:
            shape = [1] * a.ndim
            shape[d] = a.shape[d]
            key.append(pxp.reshape(xp_of(a).arange(a.shape[d], device=a.device), tuple(shape)))
    return tuple(key)


def _target(a, name):
    if not isinstance(a, Tensor):
        raise TypeError(
            f"np.{name} writes into a {type(a).__name__}, which cannot hold a value computed from a polyad "
            "tensor (its derivative or batch would be lost): make the target a polyad tensor "
            "(np.zeros_like(x), pa.xp.zeros(...), x.copy()), or compute the result out of place"
        )
    return a


@implements("put_along_axis", how="a functionalised write (x[key] = values)")
def put_along_axis(arr_, indices, values, axis):
    a = _target(arr_, "put_along_axis")
    if axis is None:
        raise TypeError("np.put_along_axis(axis=None) on a polyad tensor: give the axis")
    axis %= a.ndim
    index = pxp.broadcast_to(_int_index(indices, a), tuple(arr(indices).shape))
    a[_along_key(a, index, axis)] = values


@implements("copyto", how="a functionalised write (dst[...] = src)")
def copyto(dst, src, casting="same_kind", where=True):
    # np.full(shape, traced) lands here too: NumPy copies the fill value into a NumPy array it made
    d = _target(dst, "copyto (np.full with a traced fill value: use np.full_like(x, value) or pa.xp.full)")
    s = arr(src, like=d)
    d[...] = s if where is True else pxp.where(arr(where), s, d)


@implements("putmask", how="a functionalised write with xp.where")
def putmask(a, mask, values):
    t = _target(a, "putmask")
    v = arr(values, like=t)
    if v.shape != t.shape:
        v = resize(v, t.shape)
    t[...] = pxp.where(arr(mask), v, t)


@implements("place", how="a functionalised write at the mask")
def place(arr_, mask, vals):
    t = _target(arr_, "place")
    m = arr(mask)
    count = int(pxp.count_nonzero(m))
    t[m] = resize(arr(vals, like=t), (count,))


@implements("put", how="a functionalised write at the flat indices")
def put(a, ind, v, mode="raise"):
    _target(a, "put").put(ind, v, mode)


@implements("fill_diagonal", how="a functionalised write on the diagonal")
def fill_diagonal(a, val, wrap=False):
    t = _target(a, "fill_diagonal")
    n = min(t.shape)
    if wrap and t.ndim == 2 and t.shape[0] > t.shape[1] + 1:
        raise TypeError("np.fill_diagonal(wrap=True) of a tall matrix on a polyad tensor is not supported")
    i = xp_of(t).arange(n, device=t.device)
    v = arr(val, like=t)
    t[(i,) * t.ndim] = v if v.ndim == 0 else resize(v, (n,))


@implements("where", how="xp.where; with the condition alone, xp.nonzero")
def where(condition, x=None, y=None):
    if x is None and y is None:
        return pxp.nonzero(arr(condition))
    if x is None or y is None:
        raise ValueError("either both or neither of x and y should be given")
    xs = [v if isinstance(v, int | float | complex) and not isinstance(v, bool) else arr(v) for v in (x, y)]
    return pxp.where(arr(condition), *xs)


@implements("nonzero", derivative=NONE_DISCRETE, how="xp.nonzero")
def nonzero(a):
    return pxp.nonzero(arr(a))


@implements("flatnonzero", derivative=NONE_DISCRETE, how="xp.nonzero of the flattened array")
def flatnonzero(a):
    return pxp.nonzero(pxp.reshape(arr(a), (-1,)))[0]


@implements("argwhere", derivative=NONE_DISCRETE, how="xp.stack of xp.nonzero")
def argwhere(a):
    a = arr(a)
    if a.ndim == 0:
        a = pxp.reshape(a, (1,))
        return pxp.reshape(pxp.nonzero(a)[0], (-1, 0))
    return pxp.stack(pxp.nonzero(a), axis=-1)


@implements("select", how="xp.where, the first true condition winning")
def select(condlist, choicelist, default=0):
    if len(condlist) != len(choicelist):
        raise ValueError("list of cases must be same length as list of conditions")
    like = next((c for c in (*condlist, *choicelist) if is_array(c)), None)
    result = arr(default, like=like)
    for cond, choice in reversed(list(zip(condlist, choicelist))):
        result = pxp.where(arr(cond, like=like), arr(choice, like=like), result)
    return result


@implements("compress", how="xp.take of xp.nonzero")
def compress(condition, a, axis=None, out=None):
    a = arr(a)
    if axis is None:
        a, axis = pxp.reshape(a, (-1,)), 0
    index = pxp.nonzero(arr(condition))[0]
    return write_out(out, pxp.take(a, index, axis=axis))


@implements("extract", how="xp.take of xp.nonzero")
def extract(condition, arr_):
    a = pxp.reshape(arr(arr_), (-1,))
    return pxp.take(a, pxp.nonzero(pxp.reshape(arr(condition), (-1,)))[0])


@implements("ravel_multi_index", derivative=NONE_DISCRETE, how="sums of index * stride")
def ravel_multi_index(multi_index, dims, mode="raise", order="C"):
    if mode != "raise":
        raise TypeError("np.ravel_multi_index(mode=...) on polyad tensors: mode='raise' only")
    dims = tuple(dims)
    indices = [arr(i) for i in multi_index]
    flat, stride = 0, 1
    for d in range(len(dims))[:: -1 if order == "C" else 1]:
        flat = flat + indices[d] * stride
        stride *= dims[d]
    return flat


@implements("unravel_index", derivative=NONE_DISCRETE, how="xp.floor_divide, xp.remainder")
def unravel_index(indices, shape, order="C"):
    index = arr(indices)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    out = []
    dims = shape[::-1] if order == "C" else shape
    for s in dims:
        out.append(pxp.remainder(index, s))
        index = pxp.floor_divide(index, s)
    return tuple(out[::-1] if order == "C" else out)
