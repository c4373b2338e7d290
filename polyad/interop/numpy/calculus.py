"""NumPy's differences, integrals, statistics of several variables, interpolation and polynomials, with
NumPy's signatures, as compositions of polyad ops: ``np.diff``, ``np.gradient``, ``np.trapezoid``,
``np.cov``, ``np.corrcoef``, ``np.interp``, ``np.polyval``, ``np.vander``, ``np.polyfit``.
"""

import polyad.xp as pxp
from polyad.interop.numpy.common import arr, as_int, floating, implements, is_array, is_complex, xp_of

_NO_VALUE = None


# ------------------------------------------------------------------------------ differences and integrals


def _edge(x, like, axis):
    """A ``prepend``/``append`` value as NumPy broadcasts it: ``like``'s shape with 1 along ``axis``."""
    v = arr(x)
    shape = list(like.shape)
    shape[axis] = 1
    if v.ndim < len(shape):
        v = pxp.reshape(v, (1,) * (len(shape) - v.ndim) + tuple(v.shape))
    return pxp.broadcast_to(v, tuple(shape))


@implements("diff", how="xp.diff")
def diff(a, n=1, axis=-1, prepend=_NO_VALUE, append=_NO_VALUE):
    a = arr(a)
    axis %= a.ndim
    extra = {}
    if prepend is not _NO_VALUE:
        extra["prepend"] = _edge(prepend, a, axis) if arr(prepend).ndim < a.ndim else arr(prepend)
    if append is not _NO_VALUE:
        extra["append"] = _edge(append, a, axis) if arr(append).ndim < a.ndim else arr(append)
    if n == 0:
        return a
    return pxp.diff(a, axis=axis, n=n, **extra)


@implements("ediff1d", how="xp.diff of the flattened array, xp.concat")
def ediff1d(ary, to_end=None, to_begin=None):
    d = pxp.diff(pxp.reshape(arr(ary), (-1,)))
    parts = [pxp.reshape(arr(to_begin), (-1,))] if to_begin is not None else []
    parts.append(d)
    if to_end is not None:
        parts.append(pxp.reshape(arr(to_end), (-1,)))
    return pxp.concat(parts) if len(parts) > 1 else d


def _along(v, axis, ndim):
    shape = [1] * ndim
    shape[axis] = -1
    return pxp.reshape(v, tuple(shape))


def _gradient_axis(f, spacing, axis, edge_order):
    def s(a, b):
        key = [slice(None)] * f.ndim
        key[axis] = slice(a, b)
        return f[tuple(key)]

    n = f.shape[axis]
    if n < edge_order + 1:
        raise ValueError("Shape of array too small to calculate a numerical gradient, at least (edge_order + 1) "  # noqa: E501
                         "elements are required.")  # fmt: skip
    if not is_array(spacing) or arr(spacing).ndim == 0:  # uniform spacing h
        h = spacing
        interior = (s(2, None) - s(None, -2)) / (2.0 * h)
        if edge_order == 1:
            first, last = (s(1, 2) - s(0, 1)) / h, (s(-1, None) - s(-2, -1)) / h
        else:
            first = (-1.5 * s(0, 1) + 2.0 * s(1, 2) - 0.5 * s(2, 3)) / h
            last = (0.5 * s(-3, -2) - 2.0 * s(-2, -1) + 1.5 * s(-1, None)) / h
        return pxp.concat([first, interior, last], axis=axis)
    if edge_order != 1:
        raise TypeError("np.gradient with coordinate arrays on polyad tensors: edge_order=1 only")
    x = floating(spacing)
    dx = pxp.diff(x)
    hd, hs = _along(dx[:-1], axis, f.ndim), _along(dx[1:], axis, f.ndim)
    a, b, c = -hs / (hd * (hd + hs)), (hs - hd) / (hd * hs), hd / (hs * (hd + hs))
    interior = a * s(None, -2) + b * s(1, -1) + c * s(2, None)
    first = (s(1, 2) - s(0, 1)) / _along(dx[:1], axis, f.ndim)
    last = (s(-1, None) - s(-2, -1)) / _along(dx[-1:], axis, f.ndim)
    return pxp.concat([first, interior, last], axis=axis)


@implements("gradient", how="central differences (xp slices), one-sided at the edges")
def gradient(f, *varargs, axis=None, edge_order=1):
    f = floating(f)
    axes = (
        list(range(f.ndim))
        if axis is None
        else [a % f.ndim for a in (axis if isinstance(axis, tuple | list) else (axis,))]
    )
    spacings = list(varargs) if len(varargs) != 1 else list(varargs) * len(axes)
    spacings = spacings or [1.0] * len(axes)
    out = tuple(_gradient_axis(f, h, ax, edge_order) for h, ax in zip(spacings, axes))
    return out[0] if len(out) == 1 else out


@implements("trapezoid", "trapz", how="sums of xp slices")
def trapezoid(y, x=None, dx=1.0, axis=-1):
    y = floating(y)
    axis %= y.ndim
    lo = y[(slice(None),) * axis + (slice(None, -1), ...)]
    hi = y[(slice(None),) * axis + (slice(1, None), ...)]
    if x is None:
        d = dx
    else:
        x = floating(x)
        d = _along(pxp.diff(x), axis, y.ndim) if x.ndim == 1 else pxp.diff(x, axis=axis)
    return pxp.sum(d * (lo + hi) / 2.0, axis=axis)


@implements("cov", how="centred xp.matmul / (N - ddof)")
def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *, dtype=None):
    x = floating(m if dtype is None else arr(m, dtype))
    x = pxp.reshape(x, (1, -1)) if x.ndim < 2 else x
    if not rowvar and x.shape[0] != 1:
        x = pxp.matrix_transpose(x)
    if y is not None:
        yv = floating(y)
        yv = pxp.reshape(yv, (1, -1)) if yv.ndim < 2 else yv
        if not rowvar and yv.shape[0] != 1:
            yv = pxp.matrix_transpose(yv)
        x = pxp.concat([x, yv], axis=0)
    ddof = (0 if bias else 1) if ddof is None else ddof
    w = None
    if fweights is not None:
        w = floating(fweights)
    if aweights is not None:
        w = floating(aweights) if w is None else w * floating(aweights)
    if w is None:
        average_ = pxp.mean(x, axis=1, keepdims=True)
        fact = x.shape[1] - ddof
        xw = x
    else:
        v1 = pxp.sum(w)
        average_ = pxp.sum(x * w, axis=1, keepdims=True) / v1
        if ddof == 0:
            fact = v1
        elif aweights is None:
            fact = v1 - ddof
        else:
            fact = v1 - ddof * pxp.sum(w * floating(aweights)) / v1
        xw = (x - average_) * w
    centred = x - average_
    if w is None:
        xw = centred
    c = pxp.matmul(centred, pxp.conj(pxp.matrix_transpose(xw))) / fact
    return pxp.reshape(c, ()) if c.shape == (1, 1) else c


@implements("corrcoef", how="np.cov divided by the outer product of the standard deviations")
def corrcoef(x, y=None, rowvar=True, *, dtype=None):
    c = cov(x, y, rowvar, dtype=dtype)
    if c.ndim == 0:
        return c / c
    d = pxp.real(pxp.linalg.diagonal(c))
    stddev = pxp.sqrt(d)
    c = c / stddev[:, None] / stddev[None, :]
    if is_complex(c):
        return pxp.clip(pxp.real(c), -1.0, 1.0) + 1j * pxp.clip(pxp.imag(c), -1.0, 1.0)
    return pxp.clip(c, -1.0, 1.0)


@implements("interp", how="xp.searchsorted, xp.take, linear interpolation (differentiable in x, xp, fp)")
def interp(x, xp, fp, left=None, right=None, period=None):
    if period is not None:
        raise TypeError("np.interp(period=...) on polyad tensors is not supported")
    x, xs, fs = floating(x), floating(xp), arr(fp)
    fs = floating(fs) if not is_complex(fs) else fs
    n = xs.shape[0]
    if n == 1:
        return pxp.broadcast_to(fs[0], x.shape) + 0 * x
    j = pxp.clip(pxp.searchsorted(xs, x, side="right") - 1, 0, n - 2)
    flat = pxp.reshape(j, (-1,))
    x0 = pxp.reshape(pxp.take(xs, flat), x.shape)
    x1 = pxp.reshape(pxp.take(xs, flat + 1), x.shape)
    f0 = pxp.reshape(pxp.take(fs, flat), x.shape)
    f1 = pxp.reshape(pxp.take(fs, flat + 1), x.shape)
    y = f0 + (f1 - f0) * ((x - x0) / (x1 - x0))
    y = pxp.where(x < xs[0], fs[0] if left is None else left, y)
    return pxp.where(x > xs[-1], fs[-1] if right is None else right, y)


@implements("polyval", how="Horner's scheme in xp arithmetic")
def polyval(p, x):
    coefficients, x = arr(p), arr(x)
    y = pxp.zeros_like(x) if is_array(x) else 0.0
    for i in range(coefficients.shape[0]):
        y = y * x + coefficients[i]
    return y


def _padded_coefficients(a1, a2):
    a1, a2 = arr(a1), arr(a2)
    n = max(a1.shape[0], a2.shape[0])
    pad = [xp_of(a).zeros((n - a.shape[0],), dtype=a.dtype, device=a.device) for a in (a1, a2)]
    return pxp.concat([pad[0], a1]), pxp.concat([pad[1], a2])


@implements("polyadd", how="xp.concat (zeros in front), addition")
def polyadd(a1, a2):
    p, q = _padded_coefficients(a1, a2)
    return p + q


@implements("polysub", how="xp.concat (zeros in front), subtraction")
def polysub(a1, a2):
    p, q = _padded_coefficients(a1, a2)
    return p - q


@implements("unwrap", how="xp.diff, xp.remainder, xp.cumulative_sum")
def unwrap(p, discont=None, axis=-1, *, period=6.283185307179586):
    p = floating(p)
    axis %= p.ndim
    half = period / 2
    discont = half if discont is None else max(discont, half)
    d = pxp.diff(p, axis=axis)
    wrapped = pxp.remainder(d + half, period) - half
    wrapped = pxp.where((wrapped == -half) & (d > 0), half, wrapped)
    correction = pxp.where(pxp.abs(d) < discont, 0.0, wrapped - d)
    head = p[(slice(None),) * axis + (slice(0, 1), ...)]
    rest = p[(slice(None),) * axis + (slice(1, None), ...)]
    return pxp.concat([head, rest + pxp.cumulative_sum(correction, axis=axis)], axis=axis)


@implements("vander", how="products of x, stacked")
def vander(x, N=None, increasing=False):
    x = arr(x)
    n = x.shape[0] if N is None else as_int(N, "N")
    columns, power = [], pxp.ones_like(x)
    for _ in range(n):
        columns.append(power)
        power = power * x
    if not columns:
        return xp_of(x).zeros((x.shape[0], 0), dtype=x.dtype, device=x.device)
    out = pxp.stack(columns, axis=1)
    return out if increasing else pxp.flip(out, axis=1)


@implements("polyfit", how="xp.linalg.pinv of the scaled Vandermonde matrix")
def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    if full or cov:
        raise TypeError("np.polyfit(full=True or cov=True) on polyad tensors is not supported")
    x, y = floating(x), floating(y)
    a = vander(x, as_int(deg, "deg") + 1)
    if w is not None:
        w = floating(w)
        a, y = a * w[:, None], (y * w if y.ndim == 1 else y * w[:, None])
    scale = pxp.sqrt(pxp.sum(a * a, axis=0))
    coefficients = pxp.linalg.pinv(a / scale) @ y
    return coefficients / (scale if y.ndim == 1 else scale[:, None])


@implements("apply_along_axis", how="func1d on each 1-D slice (a Python loop), xp.stack")
def apply_along_axis(func1d, axis, arr_, *args, **kwargs):
    a = arr(arr_)
    axis %= a.ndim
    moved = pxp.moveaxis(a, axis, -1)
    outer_shape = tuple(moved.shape[:-1])
    rows = pxp.reshape(moved, (-1, moved.shape[-1]))
    results = [arr(func1d(rows[i, ...], *args, **kwargs)) for i in range(rows.shape[0])]
    stacked = pxp.stack(results, axis=0)
    result_ndim = stacked.ndim - 1
    out = pxp.reshape(stacked, outer_shape + tuple(stacked.shape[1:]))
    # NumPy puts the function's axes where ``axis`` was
    order = list(range(axis)) + [len(outer_shape) + k for k in range(result_ndim)]
    order += list(range(axis, len(outer_shape)))
    return pxp.permute_dims(out, tuple(order))


@implements("piecewise", how="each function on the elements its condition selects, written into zeros")
def piecewise(x, condlist, funclist, *args, **kw):
    x = arr(x)
    if isinstance(condlist, list | tuple):
        conditions = [arr(c) for c in condlist]
    else:
        conditions = [arr(condlist)]
    if len(funclist) == len(conditions) + 1:  # the last function applies where no condition holds
        rest = pxp.logical_not(pxp.any(pxp.stack([pxp.broadcast_to(c, x.shape) for c in conditions]), axis=0))
        conditions.append(rest)
    out = pxp.zeros_like(x)
    for condition, f in zip(conditions, funclist):
        mask = pxp.broadcast_to(condition, x.shape)
        # as NumPy: each function sees only the elements it is for (no nan from the others' domain)
        out[mask] = f(x[mask], *args, **kw) if callable(f) else f
    return out
