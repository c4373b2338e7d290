"""Reductions, statistical, cumulative and utility functions of the standard, with their rules.

Family rules: ``reduction_abstract`` and ``reduction_batch`` serve every op of the shape
``f(x, /, *, axis=None, keepdims=False, ...)``; ``expand_reduced`` puts the reduced axes back so a
cotangent broadcasts against the input. ``cumulative_batch`` serves the scans
``f(x, /, *, axis=None, ...)``. ``sum`` and the first three rules live in ``ops.base`` (``unbroadcast``
needs ``sum``); they are importable from here.

Derivatives that involve products never divide by the input, so they are exact where the input has
zeros: ``prod`` uses exclusive cumulative products from both sides, and ``cumulative_prod`` solves the
linear recurrences of its JVP and VJP with ``linear_scan`` (a log-depth scan made of polyad ops, hence
itself differentiable and batchable).
"""

import builtins
import math

from polyad.core import bind
from polyad.core.avals import ShapeDtype, device_of, is_complex, ndim_of, shape_of
from polyad.ops.base import (
    astype,
    axis_tuple,
    broadcast_to,
    cast_to,
    conj,
    expand_dims,
    expand_reduced,
    move_to_front,
    permute_dims,
    real,
    reduced_axes,
    reduction_abstract,
    reduction_batch,
    reshape,
    sum_dtype,
    where,
)
from polyad.ops.base import reduction_shape as reduction_shape
from polyad.ops.base import sum as sum
from polyad.ops.common import define, real_dtype_rule
from polyad.ops.creation import full
from polyad.ops.fills import zeros
from polyad.ops.indexing import getitem
from polyad.ops.manipulation import concat

# ------------------------------------------------------------------------------ family rules


def _count(x_shape, axis):
    """How many elements each reduced slice holds."""
    n = 1
    for a in reduced_axes(axis, len(x_shape)):
        n *= x_shape[a]
    return n


def _default_int(xp, x):
    return xp.__array_namespace_info__().default_dtypes()["integral"]


# ------------------------------------------------------------------------------ axis helpers (rules only)


def _slice(x, axis, start=None, stop=None, step=None):
    """``x[..., start:stop:step, ...]`` along the non-negative ``axis``, as a polyad op."""
    return getitem(x, (slice(None),) * axis + (slice(start, stop, step), Ellipsis))


def _flip(x, axis):
    return _slice(x, axis, None, None, -1)


def _with_size(shape, axis, n):
    return tuple(n if i == axis else d for i, d in enumerate(shape))


def _shift(v, d, axis, reverse, fill=0):
    """``v`` moved ``d`` places along ``axis`` (towards higher indices, or lower ones if ``reverse``), the
    vacated places holding ``fill``: ``out[k] = v[k - d]`` (``v[k + d]`` if ``reverse``)."""
    n = shape_of(v)[axis]
    d = builtins.min(d, n)
    pad = _filled(v, axis, d, fill)
    if reverse:
        return concat([_slice(v, axis, d, None), pad], axis=axis)
    return concat([pad, _slice(v, axis, None, n - d)], axis=axis)


def _filled(v, axis, size, fill):
    """An array shaped like ``v`` but of ``size`` along ``axis``, filled with ``fill`` (a constant)."""
    return full(_with_size(shape_of(v), axis, size), fill, dtype=v.dtype, device=device_of(v))


def linear_scan(a, b, axis, reverse=False):
    """The solution ``s`` of ``s[k] = a[k] * s[k-1] + b[k]`` along ``axis`` with ``s[-1] = 0`` (if
    ``reverse``, ``s[k] = a[k] * s[k+1] + b[k]`` with ``s[n] = 0``), by recursive doubling: ceil(log2 n)
    steps of polyad ops, no division, so it is exact with zeros and differentiable and batchable by outer
    levels."""
    n = shape_of(b)[axis]
    d = 1
    while d < n:
        b = b + a * _shift(b, d, axis, reverse)
        if 2 * d < n:
            a = a * _shift(a, d, axis, reverse)
        d *= 2
    return b


def _move_axes_last(x, axes):
    """``x`` with ``axes`` moved to the end and flattened into one, and the permutation that did it."""
    shape = shape_of(x)
    keep = tuple(i for i in range(len(shape)) if i not in axes)
    perm = keep + tuple(axes)
    xt = x if perm == tuple(range(len(shape))) else permute_dims(x, perm)
    n = _count(shape, axes)
    return reshape(xt, tuple(shape[i] for i in keep) + (n,)), perm


def _restore_axes(v, x_shape, perm):
    v = reshape(v, tuple(x_shape[i] for i in perm))
    if perm == tuple(range(len(x_shape))):
        return v
    inverse = [0] * len(perm)
    for i, p in enumerate(perm):
        inverse[p] = i
    return permute_dims(v, tuple(inverse))


# ------------------------------------------------------------------------------ prod


def _prod_deriv(x, axis):
    """d prod / d x: for each element, the product of the other elements of its slice (no division)."""
    axes = reduced_axes(axis, ndim_of(x))
    xr, perm = _move_axes_last(x, axes)
    last = ndim_of(xr) - 1
    left = _slice(cumulative_prod(xr, axis=last, include_initial=True), last, None, -1)
    right = _flip(
        _slice(cumulative_prod(_flip(xr, last), axis=last, include_initial=True), last, None, -1), last
    )
    return _restore_axes(left * right, shape_of(x), perm)


def _conj(v):
    return conj(v) if is_complex(v) else v


def _prod_vjp(g, y, x, *, axis=None, dtype=None, keepdims=False):
    ge = expand_reduced(g, shape_of(x), axis, keepdims)
    return (lambda: cast_to(ge * _conj(_prod_deriv(x, axis)), x),)


def _prod_jvp(ts, y, x, *, axis=None, dtype=None, keepdims=False):
    return cast_to(sum(ts[0] * _prod_deriv(x, axis), axis=axis, keepdims=keepdims), y)


_prod = define("prod", abstract_eval=reduction_abstract(sum_dtype), vjp=_prod_vjp, jvp=_prod_jvp)
_prod.register_rule("batch", reduction_batch(_prod))


def prod(x, /, *, axis=None, dtype=None, keepdims=False):
    """Product of ``x`` over ``axis`` (all axes when None); 1 over an empty axis."""
    return bind(_prod, x, axis=axis_tuple(axis), dtype=dtype, keepdims=keepdims)


prod.op = _prod

# ------------------------------------------------------------------------------ mean


def _mean_vjp(g, y, x, *, axis=None, keepdims=False):
    n = builtins.max(_count(shape_of(x), axis), 1)  # n == 0 only for empty inputs, whose cotangent is empty
    return (broadcast_to(expand_reduced(g, shape_of(x), axis, keepdims), shape_of(x)) / n,)


_mean = define("mean", abstract_eval=reduction_abstract(), vjp=_mean_vjp, linear=True)
_mean.register_rule("batch", reduction_batch(_mean))


def mean(x, /, *, axis=None, keepdims=False):
    """Arithmetic mean of ``x`` over ``axis`` (all axes when None)."""
    return bind(_mean, x, axis=axis_tuple(axis), keepdims=keepdims)


mean.op = _mean

# ------------------------------------------------------------------------------ max / min


def _extremum_weights(y, x, axis, keepdims):
    """Where ``x`` attains its slice's extremum ``y``: 1 / (number of ties), else 0. Ties share equally."""
    w = astype(x == expand_reduced(y, shape_of(x), axis, keepdims), x.dtype)
    return w / sum(w, axis=axis, keepdims=True)


def _extremum_vjp(g, y, x, *, axis=None, keepdims=False):
    return (lambda: expand_reduced(g, shape_of(x), axis, keepdims) * _extremum_weights(y, x, axis, keepdims),)


def _extremum_jvp(ts, y, x, *, axis=None, keepdims=False):
    return sum(ts[0] * _extremum_weights(y, x, axis, keepdims), axis=axis, keepdims=keepdims)


_max = define("max", abstract_eval=reduction_abstract(), vjp=_extremum_vjp, jvp=_extremum_jvp)
_max.register_rule("batch", reduction_batch(_max))
_min = define("min", abstract_eval=reduction_abstract(), vjp=_extremum_vjp, jvp=_extremum_jvp)
_min.register_rule("batch", reduction_batch(_min))


def max(x, /, *, axis=None, keepdims=False):
    """Maximum of ``x`` over ``axis``; the gradient is shared equally among tied maxima."""
    return bind(_max, x, axis=axis_tuple(axis), keepdims=keepdims)


def min(x, /, *, axis=None, keepdims=False):
    """Minimum of ``x`` over ``axis``; the gradient is shared equally among tied minima."""
    return bind(_min, x, axis=axis_tuple(axis), keepdims=keepdims)


max.op = _max
min.op = _min

# ------------------------------------------------------------------------------ var / std


def _centered(x, axis):
    return x - mean(x, axis=axis, keepdims=True)


def _dof(x, axis, correction):
    return _count(shape_of(x), axis) - correction


def _over_dof(c, x, axis, correction):
    """``c / (N - correction)`` as a Python float (inf where N equals the correction, like the backends)."""
    d = _dof(x, axis, correction)
    return c / d if d else math.inf


def _safe_div(a, b):
    # a / b where b != 0, else 0 (std's subgradient where the deviation is zero)
    nz = b != 0
    return where(nz, a, 0.0) / where(nz, b, 1.0)


def _var_vjp(g, y, x, *, axis=None, correction=0.0, keepdims=False):
    ge = expand_reduced(g, shape_of(x), axis, keepdims)
    return (lambda: ge * _centered(x, axis) * _over_dof(2.0, x, axis, correction),)


def _deviation_dot(t, x, axis, keepdims):
    """``sum(Re(conj(x - mean) * t))``: half the tangent of the sum of squared deviations (the deviations
    of a complex ``x`` count by their modulus)."""
    c = _centered(x, axis)
    prod = real(conj(c) * t) if is_complex(x) else t * c
    return sum(prod, axis=axis, keepdims=keepdims)


def _var_jvp(ts, y, x, *, axis=None, correction=0.0, keepdims=False):
    return _deviation_dot(ts[0], x, axis, keepdims) * _over_dof(2.0, x, axis, correction)


def _std_vjp(g, y, x, *, axis=None, correction=0.0, keepdims=False):
    ge = expand_reduced(_safe_div(g, y), shape_of(x), axis, keepdims)
    return (lambda: ge * _centered(x, axis) * _over_dof(1.0, x, axis, correction),)


def _std_jvp(ts, y, x, *, axis=None, correction=0.0, keepdims=False):
    s = _deviation_dot(ts[0], x, axis, keepdims)
    return _safe_div(s, y) * _over_dof(1.0, x, axis, correction)


# var and std of a complex array (where the backend allows one) are real
_var = define("var", abstract_eval=reduction_abstract(real_dtype_rule), vjp=_var_vjp, jvp=_var_jvp)
_var.register_rule("batch", reduction_batch(_var))
_std = define("std", abstract_eval=reduction_abstract(real_dtype_rule), vjp=_std_vjp, jvp=_std_jvp)
_std.register_rule("batch", reduction_batch(_std))


def var(x, /, *, axis=None, correction=0.0, keepdims=False):
    """Variance of ``x`` over ``axis``: sum of squared deviations / (N - ``correction``)."""
    return bind(_var, x, axis=axis_tuple(axis), correction=correction, keepdims=keepdims)


def std(x, /, *, axis=None, correction=0.0, keepdims=False):
    """Standard deviation of ``x`` over ``axis`` (square root of ``var``); its derivative is taken as 0
    where the deviation is 0."""
    return bind(_std, x, axis=axis_tuple(axis), correction=correction, keepdims=keepdims)


var.op = _var
std.op = _std

# ------------------------------------------------------------------------------ all / any / count_nonzero


def _count_nonzero_kernel(xp, x, *, axis=None, keepdims=False):
    return xp.count_nonzero(x, axis=axis, keepdims=keepdims)


_all = define("all", abstract_eval=reduction_abstract(lambda xp, x: xp.bool), nondiff=True)
_all.register_rule("batch", reduction_batch(_all))
_any = define("any", abstract_eval=reduction_abstract(lambda xp, x: xp.bool), nondiff=True)
_any.register_rule("batch", reduction_batch(_any))
_count_nonzero = define(
    "count_nonzero", _count_nonzero_kernel, abstract_eval=reduction_abstract(_default_int), nondiff=True
)
_count_nonzero.register_rule("batch", reduction_batch(_count_nonzero))


def all(x, /, *, axis=None, keepdims=False):
    """Whether every element of ``x`` over ``axis`` is true (nonzero); true over an empty axis."""
    return bind(_all, x, axis=axis_tuple(axis), keepdims=keepdims)


def any(x, /, *, axis=None, keepdims=False):
    """Whether some element of ``x`` over ``axis`` is true (nonzero); false over an empty axis."""
    return bind(_any, x, axis=axis_tuple(axis), keepdims=keepdims)


def count_nonzero(x, /, *, axis=None, keepdims=False):
    """How many elements of ``x`` over ``axis`` are nonzero (default integer dtype)."""
    return bind(_count_nonzero, x, axis=axis_tuple(axis), keepdims=keepdims)


all.op = _all
any.op = _any
count_nonzero.op = _count_nonzero

# ------------------------------------------------------------------------------ cumulative_sum / _prod


def _scan_axis(axis, ndim):
    if axis is None:
        if ndim != 1:
            raise ValueError(f"axis must be given for a cumulative function of a {ndim}-D array")
        return 0
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for an array of dimension {ndim}")
    return axis % ndim


def _cumulative_abstract(xp, x, *, axis=None, dtype=None, include_initial=False):
    a = _scan_axis(axis, len(x.shape))
    shape = _with_size(x.shape, a, x.shape[a] + 1) if include_initial else tuple(x.shape)
    return ShapeDtype(shape, dtype if dtype is not None else sum_dtype(xp, x), x.device)


def cumulative_batch(op):
    """Batching rule of a scan along one axis: batch dimension to the front, the axis shifted past it."""

    def rule(info, dims, x, *, axis=None, **params):
        x = move_to_front(x, dims[0])
        return bind(op, x, axis=_scan_axis(axis, ndim_of(x) - 1) + 1, **params), 0

    return rule


def _cumsum_vjp(g, y, x, *, axis=None, dtype=None, include_initial=False):
    a = _scan_axis(axis, ndim_of(x))
    # the transpose of a cumulative sum is the cumulative sum from the other end
    r = _flip(cumulative_sum(_flip(g, a), axis=a), a)
    if include_initial:  # out[k] = x[0] + ... + x[k-1]: x[j] reaches out[j+1:]
        r = _slice(r, a, 1, None)
    return (cast_to(r, x),)


_cumulative_sum = define("cumulative_sum", abstract_eval=_cumulative_abstract, vjp=_cumsum_vjp, linear=True)
_cumulative_sum.register_rule("batch", cumulative_batch(_cumulative_sum))


def _cumprod_parts(y, a, include_initial):
    """The cumulative products without the initial 1 and the exclusive ones (products before each)."""
    if include_initial:
        n = shape_of(y)[a] - 1
        return _slice(y, a, 1, None), _slice(y, a, None, n)
    return y, _shift(y, 1, a, reverse=False, fill=1)


def _cumprod_vjp(g, y, x, *, axis=None, dtype=None, include_initial=False):
    # dL/dx[i] = conj(P[i]) * s[i], P[i] = x[0]...x[i-1], s[i] = sum_{k>=i} g[k] conj(x[i+1]...x[k]):
    # s[i] = g[i] + conj(x[i+1]) s[i+1], a reverse linear recurrence (no division by x)
    a = _scan_axis(axis, ndim_of(x))

    def grad():
        _, before = _cumprod_parts(y, a, include_initial)
        gk = _slice(g, a, 1, None) if include_initial else g
        s = linear_scan(_shift(_conj(x), 1, a, reverse=True), gk, a, reverse=True)
        return cast_to(_conj(before) * s, x)

    return (grad,)


def _cumprod_jvp(ts, y, x, *, axis=None, dtype=None, include_initial=False):
    # dy[k] = x[k] dy[k-1] + y[k-1] t[k]: a forward linear recurrence
    a = _scan_axis(axis, ndim_of(x))
    _, before = _cumprod_parts(y, a, include_initial)
    u = cast_to(linear_scan(x, before * ts[0], a), y)
    if include_initial:
        u = concat([_filled(u, a, 1, 0), u], axis=a)
    return u


_cumulative_prod = define(
    "cumulative_prod", abstract_eval=_cumulative_abstract, vjp=_cumprod_vjp, jvp=_cumprod_jvp
)
_cumulative_prod.register_rule("batch", cumulative_batch(_cumulative_prod))


def _check_scan_input(x, axis, name):
    if ndim_of(x) == 0:
        raise ValueError(f"{name} needs an array of at least one dimension, got a 0-d array")
    _scan_axis(axis, ndim_of(x))  # raises for a missing or out-of-bounds axis


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
    """Cumulative sum of ``x`` along ``axis`` (optional for 1-d ``x``); ``include_initial`` prepends 0."""
    _check_scan_input(x, axis, "cumulative_sum")
    return bind(_cumulative_sum, x, axis=axis, dtype=dtype, include_initial=include_initial)


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False):
    """Cumulative product of ``x`` along ``axis`` (optional for 1-d ``x``); ``include_initial`` prepends 1.
    Its derivatives are exact where ``x`` has zeros."""
    _check_scan_input(x, axis, "cumulative_prod")
    return bind(_cumulative_prod, x, axis=axis, dtype=dtype, include_initial=include_initial)


cumulative_sum.op = _cumulative_sum
cumulative_prod.op = _cumulative_prod

# ------------------------------------------------------------------------------ diff


def _diff_kernel(xp, x, prepend, append, *, axis=-1, n=1):
    extra = {}
    if prepend is not None:
        extra["prepend"] = prepend
    if append is not None:
        extra["append"] = append
    return xp.diff(x, axis=axis, n=n, **extra)


def _diff_abstract(xp, x, prepend, append, *, axis=-1, n=1):
    a = _scan_axis(axis, len(x.shape))
    arrays = [v for v in (x, prepend, append) if v is not None]
    if n == 0:
        arrays = [x]  # the backends return x itself
    size = 0
    for v in arrays:
        size += v.shape[a]
    dtype = xp.result_type(*[v.dtype for v in arrays])
    return ShapeDtype(_with_size(x.shape, a, size - n if size > n else 0), dtype, x.device)


def _diff_vjp(g, y, x, prepend, append, *, axis=-1, n=1):
    a = _scan_axis(axis, ndim_of(x))
    pieces = {}

    def piece(i):
        if not pieces:
            if n == 0:
                pieces.update({0: None, 1: g, 2: None})
            else:
                # the transpose of n differences: (-1)^n times n differences of g padded with n zeros
                # at each end
                z = zeros(_with_size(shape_of(g), a, n), dtype=g.dtype, device=device_of(g))
                gz = diff(g, axis=a, n=n, prepend=z, append=z)
                gz = -gz if n % 2 else gz
                sizes = [0 if v is None else shape_of(v)[a] for v in (prepend, x, append)]
                start = 0
                for k, s in enumerate(sizes):
                    pieces[k] = _slice(gz, a, start, start + s)
                    start += s
        v = pieces[i]
        return None if v is None else cast_to(v, (prepend, x, append)[i])

    return (
        lambda: piece(1),
        None if prepend is None else (lambda: piece(0)),
        None if append is None else (lambda: piece(2)),
    )


def _diff_batch(info, dims, x, prepend, append, *, axis=-1, n=1):
    size = next(v.shape[d] for v, d in zip((x, prepend, append), dims) if d is not None)
    a = _scan_axis(axis, ndim_of(x) - (dims[0] is not None))
    out = []
    for v, d in zip((x, prepend, append), dims):
        if v is None:
            out.append(None)
        elif d is None:
            out.append(broadcast_to(expand_dims(v, axis=0), (size, *shape_of(v))))
        else:
            out.append(move_to_front(v, d))
    return bind(_diff, *out, axis=a + 1, n=n), 0


_diff = define(
    "diff", _diff_kernel, abstract_eval=_diff_abstract, vjp=_diff_vjp, linear=True, batch=_diff_batch
)


def diff(x, /, *, axis=-1, n=1, prepend=None, append=None):
    """The ``n``-th forward difference of ``x`` along ``axis``, after joining ``prepend`` and ``append``
    (arrays shaped like ``x`` except along ``axis``) at its ends."""
    if n < 0:
        raise ValueError(f"diff needs n >= 0, got {n}")
    return bind(_diff, x, prepend, append, axis=axis, n=n)


diff.op = _diff
