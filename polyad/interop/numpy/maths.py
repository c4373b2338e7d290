"""NumPy's reductions, statistics, sorting and searching, element-wise helpers (``np.clip``, ``np.round``,
``np.nan_to_num``...), comparisons of whole arrays (``np.allclose``) and interpolation, each with NumPy's
signature, as compositions of polyad ops.

NumPy's defaults are kept where they differ from the standard's: ``axis=None`` flattens for ``cumsum``,
``sort(axis=None)`` sorts the flattened array, ``ddof`` counts ``var``'s degrees of freedom.
"""

import math

import polyad.xp as pxp
from polyad.interop.numpy.common import (
    NONE_DISCRETE,
    arr,
    as_dtype,
    axis_arg,
    floating,
    implements,
    is_array,
    is_complex,
    write_out,
    xp_of,
)
from polyad.ops.indexing import scatter_add

_NO_VALUE = None  # NumPy's ``initial``/``where`` defaults: the user did not give them


def _masked(a, where, fill):
    return a if where is True else pxp.where(arr(where), a, fill)


def _with_initial(result, initial, combine):
    return result if initial is _NO_VALUE else combine(result, initial)


@implements("sum", how="xp.sum")
def sum_(a, axis=None, dtype=None, out=None, keepdims=False, initial=_NO_VALUE, where=True):
    a = _masked(arr(a), where, 0)
    result = pxp.sum(a, axis=axis_arg(axis), dtype=as_dtype(dtype, a), keepdims=keepdims)
    return write_out(out, _with_initial(result, initial, pxp.add))


@implements("prod", how="xp.prod")
def prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=_NO_VALUE, where=True):
    a = _masked(arr(a), where, 1)
    result = pxp.prod(a, axis=axis_arg(axis), dtype=as_dtype(dtype, a), keepdims=keepdims)
    return write_out(out, _with_initial(result, initial, pxp.multiply))


def _count(a, axis, where):
    if where is True:
        shape = a.shape
        axes = range(a.ndim) if axis is None else (axis if isinstance(axis, tuple | list) else (axis,))
        return math.prod(shape[ax] for ax in axes)
    return pxp.sum(
        pxp.astype(pxp.broadcast_to(arr(where), a.shape), a.dtype), axis=axis_arg(axis), keepdims=True
    )


@implements("mean", how="xp.mean, or xp.sum / count with where=")
def mean_(a, axis=None, dtype=None, out=None, keepdims=False, *, where=True):
    a = floating(arr(a) if dtype is None else pxp.astype(arr(a), as_dtype(dtype, a)))
    if where is True:
        return write_out(out, pxp.mean(a, axis=axis_arg(axis), keepdims=keepdims))
    total = pxp.sum(_masked(a, where, 0), axis=axis_arg(axis), keepdims=True)
    result = total / _count(a, axis, where)
    return write_out(out, result if keepdims else pxp.squeeze(result, axis=_reduced(a, axis)))


def _reduced(a, axis):
    if axis is None:
        return tuple(range(a.ndim))
    return tuple(ax % a.ndim for ax in (axis if isinstance(axis, tuple | list) else (axis,)))


@implements("var", how="xp.var (ddof: correction), or sums with where= or mean=")
def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=True, mean=_NO_VALUE,
        correction=_NO_VALUE):  # fmt: skip
    a = floating(arr(a) if dtype is None else pxp.astype(arr(a), as_dtype(dtype, a)))
    ddof = ddof if correction is _NO_VALUE else correction
    if where is True and mean is _NO_VALUE and not is_complex(a):
        return write_out(out, pxp.var(a, axis=axis_arg(axis), correction=ddof, keepdims=keepdims))
    center = mean if mean is not _NO_VALUE else mean_(a, axis, keepdims=True, where=where)
    deviation = a - center
    squares = pxp.real(deviation * pxp.conj(deviation)) if is_complex(deviation) else deviation * deviation
    total = pxp.sum(_masked(squares, where, 0), axis=axis_arg(axis), keepdims=True)
    result = total / (_count(a, axis, where) - ddof)
    return write_out(out, result if keepdims else pxp.squeeze(result, axis=_reduced(a, axis)))


@implements("std", how="xp.std, or the square root of np.var")
def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=True, mean=_NO_VALUE,
        correction=_NO_VALUE):  # fmt: skip
    if where is True and mean is _NO_VALUE and not is_complex(arr(a)):
        a = floating(arr(a) if dtype is None else pxp.astype(arr(a), as_dtype(dtype, a)))
        ddof = ddof if correction is _NO_VALUE else correction
        return write_out(out, pxp.std(a, axis=axis_arg(axis), correction=ddof, keepdims=keepdims))
    v = var(a, axis, dtype, None, ddof, keepdims, where=where, mean=mean, correction=correction)
    return write_out(out, pxp.sqrt(v))


def _extreme(name, combine):
    f = getattr(pxp, name)

    def extreme(a, axis=None, out=None, keepdims=False, initial=_NO_VALUE, where=True):
        a = arr(a)
        if where is not True:
            if initial is _NO_VALUE:
                raise ValueError(
                    f"reduction operation {name} does not have an identity: give initial= with where="
                )
            a = pxp.where(arr(where), a, initial)
        return write_out(out, _with_initial(f(a, axis=axis_arg(axis), keepdims=keepdims), initial, combine))

    return extreme


np_max = implements("max", "amax", how="xp.max")(_extreme("max", pxp.maximum))
np_min = implements("min", "amin", how="xp.min")(_extreme("min", pxp.minimum))


@implements("ptp", how="xp.max - xp.min")
def ptp(a, axis=None, out=None, keepdims=False):
    a = arr(a)
    result = pxp.max(a, axis=axis_arg(axis), keepdims=keepdims) - pxp.min(
        a, axis=axis_arg(axis), keepdims=keepdims
    )
    return write_out(out, result)


def _arg(name):
    f = getattr(pxp, name)

    def arg(a, axis=None, out=None, *, keepdims=False):
        return write_out(out, f(arr(a), axis=axis, keepdims=keepdims))

    return arg


implements("argmax", derivative=NONE_DISCRETE, how="xp.argmax")(_arg("argmax"))
implements("argmin", derivative=NONE_DISCRETE, how="xp.argmin")(_arg("argmin"))


def _logical(name):
    f = getattr(pxp, name)

    def logical(a, axis=None, out=None, keepdims=False, *, where=True):
        a = _masked(arr(a), where, name == "all")
        return write_out(out, f(a, axis=axis_arg(axis), keepdims=keepdims))

    return logical


implements("any", derivative=NONE_DISCRETE, how="xp.any")(_logical("any"))
implements("all", derivative=NONE_DISCRETE, how="xp.all")(_logical("all"))


@implements("count_nonzero", derivative=NONE_DISCRETE, how="xp.count_nonzero")
def count_nonzero(a, axis=None, *, keepdims=False):
    return pxp.count_nonzero(arr(a), axis=axis_arg(axis), keepdims=keepdims)


def _cumulative(name):
    f = getattr(pxp, name)

    def cumulative(a, axis=None, dtype=None, out=None):
        a = arr(a)
        if axis is None:
            a, axis = pxp.reshape(a, (-1,)), 0
        return write_out(out, f(a, axis=axis, dtype=as_dtype(dtype, a)))

    return cumulative


implements("cumsum", how="xp.cumulative_sum")(_cumulative("cumulative_sum"))
implements("cumprod", how="xp.cumulative_prod")(_cumulative("cumulative_prod"))


def _cumulative_standard(name):
    f = getattr(pxp, name)

    def cumulative(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
        return write_out(out, f(arr(x), axis=axis, dtype=as_dtype(dtype, x), include_initial=include_initial))

    return cumulative


implements("cumulative_sum", how="xp.cumulative_sum")(_cumulative_standard("cumulative_sum"))
implements("cumulative_prod", how="xp.cumulative_prod")(_cumulative_standard("cumulative_prod"))

# ------------------------------------------------------------------------------ nan-ignoring reductions


def _nan_filled(a, fill):
    a = arr(a)
    return pxp.where(pxp.isnan(a), fill, a) if not pxp.isdtype(a.dtype, ("bool", "integral")) else a


@implements("nansum", how="xp.sum of xp.where(isnan, 0, x)")
def nansum(a, axis=None, dtype=None, out=None, keepdims=False, initial=_NO_VALUE, where=True):
    return sum_(_nan_filled(a, 0.0), axis, dtype, out, keepdims, initial, where)


@implements("nanprod", how="xp.prod of xp.where(isnan, 1, x)")
def nanprod(a, axis=None, dtype=None, out=None, keepdims=False, initial=_NO_VALUE, where=True):
    return prod(_nan_filled(a, 1.0), axis, dtype, out, keepdims, initial, where)


def _not_nan(a, where):
    valid = pxp.logical_not(pxp.isnan(a))
    return valid if where is True else pxp.logical_and(valid, arr(where))


@implements("nanmean", how="np.mean with where=~isnan")
def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=True):
    a = floating(a)
    return mean_(_nan_filled(a, 0.0), axis, dtype, out, keepdims, where=_not_nan(a, where))


@implements("nanvar", how="np.var with where=~isnan")
def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=True, mean=_NO_VALUE,
           correction=_NO_VALUE):  # fmt: skip
    a = floating(a)
    return var(_nan_filled(a, 0.0), axis, dtype, out, ddof, keepdims, where=_not_nan(a, where), mean=mean,
               correction=correction)  # fmt: skip


@implements("nanstd", how="the square root of np.nanvar")
def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=True, mean=_NO_VALUE,
           correction=_NO_VALUE):  # fmt: skip
    return write_out(out, pxp.sqrt(nanvar(a, axis, dtype, None, ddof, keepdims, where=where, mean=mean,
                                          correction=correction)))  # fmt: skip


def _nan_extreme(name, fill):
    f = getattr(pxp, name)

    def extreme(a, axis=None, out=None, keepdims=False, initial=_NO_VALUE, where=True):
        a = floating(a)
        nan = pxp.isnan(a)
        result = f(pxp.where(nan, fill, a), axis=axis_arg(axis), keepdims=keepdims)
        result = pxp.where(pxp.all(nan, axis=axis_arg(axis), keepdims=keepdims), math.nan, result)  # all nan
        return write_out(out, result)

    return extreme


implements("nanmax", how="xp.max of xp.where(isnan, -inf, x)")(_nan_extreme("max", -math.inf))
implements("nanmin", how="xp.min of xp.where(isnan, inf, x)")(_nan_extreme("min", math.inf))


def _nan_arg(name, fill):
    f = getattr(pxp, name)

    def arg(a, axis=None, out=None, *, keepdims=False):
        a = floating(a)
        return write_out(out, f(pxp.where(pxp.isnan(a), fill, a), axis=axis, keepdims=keepdims))

    return arg


implements("nanargmax", derivative=NONE_DISCRETE, how="xp.argmax")(_nan_arg("argmax", -math.inf))
implements("nanargmin", derivative=NONE_DISCRETE, how="xp.argmin")(_nan_arg("argmin", math.inf))


@implements("nancumsum", how="xp.cumulative_sum of xp.where(isnan, 0, x)")
def nancumsum(a, axis=None, dtype=None, out=None):
    return _cumulative("cumulative_sum")(_nan_filled(a, 0.0), axis, dtype, out)


@implements("nancumprod", how="xp.cumulative_prod of xp.where(isnan, 1, x)")
def nancumprod(a, axis=None, dtype=None, out=None):
    return _cumulative("cumulative_prod")(_nan_filled(a, 1.0), axis, dtype, out)


# ------------------------------------------------------------------------------ quantiles


def _quantile(a, q, axis, keepdims, method, ignore_nan):
    if method != "linear":
        raise TypeError(f"np.quantile/percentile/median(method={method!r}) on polyad tensors: only 'linear'")
    a = floating(a)
    q = floating(q)
    if axis is None:
        moved, axes = pxp.reshape(a, (-1,)), tuple(range(a.ndim))
    else:
        axes = _reduced(a, axis)
        rest = [d for d in range(a.ndim) if d not in axes]
        moved = pxp.permute_dims(a, tuple(rest) + axes)
        moved = pxp.reshape(moved, tuple(a.shape[d] for d in rest) + (-1,))
    values = pxp.sort(moved, axis=-1)  # nan sort last
    n = values.shape[-1]
    nan = pxp.isnan(values)
    int64 = xp_of(a).int64
    count = pxp.sum(pxp.astype(pxp.logical_not(nan), int64), axis=-1, keepdims=True) if ignore_nan else n
    flat_q = pxp.reshape(q, (-1,))
    position = flat_q * (pxp.astype(count, q.dtype) - 1 if ignore_nan else float(n - 1))  # (..., k)
    position = pxp.clip(position, 0.0, None)
    low = pxp.astype(pxp.floor(position), int64)
    high = pxp.minimum(low + 1, pxp.maximum(count - 1, 0) if ignore_nan else n - 1)
    frac = position - pxp.astype(low, position.dtype)
    lower = pxp.take_along_axis(values, pxp.broadcast_to(low, values.shape[:-1] + low.shape[-1:]), axis=-1)
    upper = pxp.take_along_axis(values, pxp.broadcast_to(high, values.shape[:-1] + high.shape[-1:]), axis=-1)
    result = lower + frac * (upper - lower)
    if ignore_nan:
        result = pxp.where(count == 0, math.nan, result)
    else:
        result = pxp.where(pxp.any(nan, axis=-1, keepdims=True), math.nan, result)
    result = pxp.moveaxis(result, -1, 0)  # NumPy puts q's axes first
    if keepdims:
        kept = [1 if (axis is None or d in axes) else a.shape[d] for d in range(a.ndim)]
        result = pxp.reshape(result, (result.shape[0],) + tuple(kept))
    return pxp.reshape(result, tuple(q.shape) + tuple(result.shape[1:]))


def _quantile_function(scale, ignore_nan):
    def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *,
                 weights=None, interpolation=None):  # fmt: skip
        if weights is not None:
            raise TypeError("np.quantile/percentile(weights=...) on polyad tensors is not supported")
        q = floating(q)
        return write_out(
            out, _quantile(a, q / scale if scale != 1 else q, axis, keepdims, method, ignore_nan)
        )

    return quantile


implements("quantile", how="xp.sort, xp.take_along_axis, linear interpolation")(_quantile_function(1, False))
implements("percentile", how="np.quantile of q / 100")(_quantile_function(100, False))
implements("nanquantile", how="np.quantile over the non-nan elements")(_quantile_function(1, True))
implements("nanpercentile", how="np.nanquantile of q / 100")(_quantile_function(100, True))


@implements("median", how="np.quantile(0.5)")
def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    return write_out(out, _quantile(a, floating(0.5), axis, keepdims, "linear", False))


@implements("nanmedian", how="np.nanquantile(0.5)")
def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    return write_out(out, _quantile(a, floating(0.5), axis, keepdims, "linear", True))


@implements("average", how="xp.sum(a * w) / xp.sum(w)")
def average(a, axis=None, weights=None, returned=False, *, keepdims=False):
    a = floating(a)
    if weights is None:
        avg = pxp.mean(a, axis=axis_arg(axis), keepdims=keepdims)
        total = pxp.astype(pxp.full_like(avg, math.prod(a.shape) / max(math.prod(avg.shape), 1)), avg.dtype)
        return (avg, total) if returned else avg
    w = floating(weights)
    if w.shape != a.shape:
        if axis is None or w.ndim != 1:
            raise TypeError("axis must be specified when shapes of a and weights differ")
        shape = [1] * a.ndim
        shape[axis % a.ndim] = w.shape[0]
        w = pxp.reshape(w, tuple(shape))
    total = pxp.sum(pxp.broadcast_to(w, a.shape), axis=axis_arg(axis), keepdims=keepdims)
    avg = pxp.sum(a * w, axis=axis_arg(axis), keepdims=keepdims) / total
    return (avg, pxp.broadcast_to(total, avg.shape)) if returned else avg


# ------------------------------------------------------------------------------ sorting and searching


@implements("sort", how="xp.sort (stable)")
def sort(a, axis=-1, kind=None, order=None, *, stable=None):
    a = arr(a)
    if axis is None:
        a, axis = pxp.reshape(a, (-1,)), 0
    return pxp.sort(a, axis=axis, stable=True)


@implements("argsort", derivative=NONE_DISCRETE, how="xp.argsort (stable)")
def argsort(a, axis=-1, kind=None, order=None, *, stable=None):
    a = arr(a)
    if axis is None:
        a, axis = pxp.reshape(a, (-1,)), 0
    return pxp.argsort(a, axis=axis, stable=True)


@implements("partition", how="xp.sort (a sorted array is a valid partition)")
def partition(a, kth, axis=-1, kind="introselect", order=None):
    return sort(a, axis)


@implements("argpartition", derivative=NONE_DISCRETE, how="xp.argsort (a valid partition)")
def argpartition(a, kth, axis=-1, kind="introselect", order=None):
    return argsort(a, axis)


@implements("searchsorted", derivative=NONE_DISCRETE, how="xp.searchsorted")
def searchsorted(a, v, side="left", sorter=None):
    return pxp.searchsorted(arr(a), arr(v), side=side, sorter=None if sorter is None else arr(sorter))


@implements("digitize", derivative=NONE_DISCRETE, how="xp.searchsorted")
def digitize(x, bins, right=False):
    bins = arr(bins)
    side = "left" if right else "right"
    if bins.shape[0] > 1 and bool(bins[0] > bins[-1]):  # decreasing bins
        return bins.shape[0] - pxp.searchsorted(pxp.flip(bins), arr(x), side=side)
    return pxp.searchsorted(bins, arr(x), side=side)


@implements("unique", how="xp.unique_values / unique_counts / unique_inverse / unique_all")
def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *, equal_nan=True,
           sorted=True):  # fmt: skip
    if axis is not None:
        raise TypeError(
            "np.unique(axis=...) on polyad tensors is not supported: unique of the flattened array"
        )
    a = arr(ar)
    if not (return_index or return_inverse or return_counts):
        return pxp.unique_values(a)
    found = pxp.unique_all(a)
    result = [found.values]
    if return_index:
        result.append(found.indices)
    if return_inverse:
        result.append(pxp.reshape(found.inverse_indices, a.shape))
    if return_counts:
        result.append(found.counts)
    return tuple(result)


for _name in ("unique_values", "unique_counts", "unique_inverse", "unique_all"):
    implements(_name, how=f"xp.{_name}")(getattr(pxp, _name))


@implements("isin", "in1d", derivative=NONE_DISCRETE, how="xp.any(x[..., None] == test)")
def isin(element, test_elements, assume_unique=False, invert=False, *, kind=None):
    e, t = arr(element), pxp.reshape(arr(test_elements), (-1,))
    found = pxp.any(e[..., None] == t, axis=-1)
    return pxp.logical_not(found) if invert else found


@implements("intersect1d", how="np.unique, np.isin")
def intersect1d(ar1, ar2, assume_unique=False, return_indices=False):
    if return_indices:
        raise TypeError("np.intersect1d(return_indices=True) on polyad tensors is not supported")
    u = pxp.unique_values(arr(ar1))
    return pxp.take(u, pxp.nonzero(isin(u, ar2))[0])


@implements("setdiff1d", how="np.unique, np.isin")
def setdiff1d(ar1, ar2, assume_unique=False):
    u = pxp.unique_values(arr(ar1))
    return pxp.take(u, pxp.nonzero(isin(u, ar2, invert=True))[0])


@implements("union1d", how="xp.unique_values of the concatenation")
def union1d(ar1, ar2):
    return pxp.unique_values(pxp.concat([pxp.reshape(arr(ar1), (-1,)), pxp.reshape(arr(ar2), (-1,))]))


@implements("bincount", how="scatter_add of the weights (differentiable in them)")
def bincount(x, weights=None, minlength=0):
    index = pxp.reshape(arr(x), (-1,))
    n = max(int(pxp.max(index)) + 1 if index.shape[0] else 0, minlength)
    if weights is None:
        values = xp_of(index).ones(index.shape, dtype=xp_of(index).int64, device=index.device)
    else:
        values = pxp.reshape(floating(weights), (-1,))
    target = xp_of(index).zeros((n,), dtype=values.dtype, device=index.device)
    return scatter_add(target, index, values, axis=0)


# ------------------------------------------------------------------------------ element-wise helpers


@implements("clip", how="xp.clip")
def clip(a, a_min=None, a_max=None, out=None, *, min=None, max=None, **kwargs):
    low = a_min if min is None else min
    high = a_max if max is None else max
    return write_out(out, pxp.clip(arr(a), _bound(low), _bound(high)))


def _bound(v):
    return v if v is None or isinstance(v, int | float) or is_array(v) else arr(v)


@implements("round", "around", how="xp.round, scaled by 10**decimals")
def round_(a, decimals=0, out=None):
    a = arr(a)
    if decimals == 0:
        return write_out(out, pxp.round(a))
    if pxp.isdtype(a.dtype, "integral") and decimals > 0:
        return write_out(out, a)
    scale = 10.0**decimals
    return write_out(
        out,
        pxp.round(a * scale) / scale if decimals > 0 else pxp.round(a / 10.0**-decimals) * 10.0**-decimals,
    )


@implements("fix", how="xp.trunc")
def fix(x, out=None):
    return write_out(out, pxp.trunc(floating(x)))


@implements("real", how="xp.real (a real array itself)")
def real(val):
    v = arr(val)
    return pxp.real(v) if is_complex(v) else v


@implements("imag", how="xp.imag (zeros for a real array)")
def imag(val):
    v = arr(val)
    return pxp.imag(v) if is_complex(v) else pxp.zeros_like(v)


@implements("angle", how="xp.atan2(imag, real)")
def angle(z, deg=False):
    z = floating(z)
    out = pxp.atan2(pxp.imag(z), pxp.real(z)) if is_complex(z) else pxp.atan2(pxp.zeros_like(z), z)
    return out * (180.0 / math.pi) if deg else out


@implements("sinc", how="xp.special.sinc")
def sinc(x):
    return pxp.special.sinc(floating(x))


@implements("i0", how="xp.special.i0")
def i0(x):
    return pxp.special.i0(floating(x))


@implements("nan_to_num", how="xp.where")
def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    x = arr(x)
    if not pxp.isdtype(x.dtype, ("real floating", "complex floating")):
        return x
    if is_complex(x):
        parts = [nan_to_num(p, copy, nan, posinf, neginf) for p in (pxp.real(x), pxp.imag(x))]
        return parts[0] + 1j * parts[1]
    big = pxp.finfo(x.dtype).max
    x = pxp.where(pxp.isnan(x), nan, x)
    x = pxp.where(x == math.inf, big if posinf is None else posinf, x)
    return pxp.where(x == -math.inf, -big if neginf is None else neginf, x)


@implements("isposinf", derivative=NONE_DISCRETE, how="xp.isinf and x > 0")
def isposinf(x, out=None):
    x = arr(x)
    return write_out(out, pxp.logical_and(pxp.isinf(x), x > 0))


@implements("isneginf", derivative=NONE_DISCRETE, how="xp.isinf and x < 0")
def isneginf(x, out=None):
    x = arr(x)
    return write_out(out, pxp.logical_and(pxp.isinf(x), x < 0))


@implements("iscomplex", derivative=NONE_DISCRETE, how="xp.imag != 0")
def iscomplex(x):
    x = arr(x)
    return pxp.imag(x) != 0 if is_complex(x) else pxp.zeros_like(x, dtype=xp_of(x).bool)


@implements("isreal", derivative=NONE_DISCRETE, how="xp.imag == 0")
def isreal(x):
    x = arr(x)
    return pxp.imag(x) == 0 if is_complex(x) else pxp.ones_like(x, dtype=xp_of(x).bool)


@implements("real_if_close", how="xp.real where the imaginary parts are negligible")
def real_if_close(a, tol=100):
    a = arr(a)
    if not is_complex(a):
        return a
    eps = pxp.finfo(pxp.real(a).dtype).eps
    return pxp.real(a) if bool(pxp.all(pxp.abs(pxp.imag(a)) < tol * eps)) else a


@implements("isclose", derivative=NONE_DISCRETE, how="|a - b| <= atol + rtol |b|, infinities equal")
def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    a, b = floating(a), floating(b)
    finite = pxp.logical_and(pxp.isfinite(a), pxp.isfinite(b))
    close = pxp.abs(a - b) <= atol + rtol * pxp.abs(b)
    result = pxp.where(finite, close, a == b)
    if equal_nan:
        result = pxp.logical_or(result, pxp.logical_and(pxp.isnan(a), pxp.isnan(b)))
    return result


@implements("allclose", derivative=NONE_DISCRETE, how="bool(xp.all(np.isclose))")
def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    return bool(pxp.all(isclose(a, b, rtol, atol, equal_nan)))


@implements("array_equal", derivative=NONE_DISCRETE, how="shapes, then bool(xp.all(a == b))")
def array_equal(a1, a2, equal_nan=False):
    a, b = arr(a1), arr(a2)
    if tuple(a.shape) != tuple(b.shape):
        return False
    same = a == b
    if equal_nan:
        same = pxp.logical_or(same, pxp.logical_and(pxp.isnan(floating(a)), pxp.isnan(floating(b))))
    return bool(pxp.all(same))


@implements("array_equiv", derivative=NONE_DISCRETE, how="bool(xp.all(a == b)) broadcast")
def array_equiv(a1, a2):
    a, b = arr(a1), arr(a2)
    try:
        a, b = pxp.broadcast_arrays(a, b)
    except ValueError:
        return False
    return bool(pxp.all(a == b))


@implements("lexsort", derivative=NONE_DISCRETE, how="stable xp.argsort, key by key")
def lexsort(keys, axis=-1):
    keys = (
        [arr(k) for k in keys]
        if isinstance(keys, list | tuple)
        else [arr(keys)[i, ...] for i in range(arr(keys).shape[0])]
    )
    order = pxp.argsort(keys[0], axis=axis, stable=True)
    for key in keys[1:]:
        order = pxp.take_along_axis(order, pxp.argsort(pxp.take_along_axis(key, order, axis=axis), axis=axis,
                                                       stable=True), axis=axis)  # fmt: skip
    return order


@implements("trim_zeros", how="a slice between the first and last non-zero")
def trim_zeros(filt, trim="fb", axis=None):
    a = arr(filt)
    found = pxp.nonzero(pxp.reshape(a != 0, (-1,)))[0]
    if found.shape[0] == 0:
        return a[0:0]
    first = int(found[0]) if "f" in trim.lower() else 0
    last = int(found[-1]) + 1 if "b" in trim.lower() else a.shape[0]
    return a[first:last]
