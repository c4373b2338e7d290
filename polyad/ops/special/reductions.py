"""Reductions of exponentials: ``logsumexp``, ``softmax``, ``log_softmax``, with SciPy's signatures. Each
is one op with a generic Array API kernel (stable: the maximum is shifted out) and its own rules, so that
the tape holds one entry, not the half-dozen of the formula: ``logsumexp``'s VJP is ``g * softmax``.
"""

import math

from polyad.core import Op, bind
from polyad.core.avals import ShapeDtype, broadcast_shape, ndim_of, shape_of
from polyad.ops.base import (
    broadcast_batch_args,
    expand_reduced,
    move_to_front,
    reduced_axes,
    reduction_batch,
    reduction_shape,
    reshape,
    sum,
    unbroadcast,
    where,
)
from polyad.ops.creation import asarray, full_like
from polyad.ops.elementwise import exp
from polyad.ops.special.shared import docstring, float_arg, public

_INF = math.inf

# ------------------------------------------------------------------------------ logsumexp


def _shift(xp, a, axes):
    """The maximum over ``axes`` (kept), 0 where it is not finite or the reduction is empty: subtracted
    before ``exp`` so that nothing overflows."""
    if 0 in a.shape:
        return xp.zeros(reduction_shape(a.shape, axes, True), dtype=a.dtype, device=a.device)
    m = xp.max(a, axis=axes, keepdims=True)
    return xp.where(xp.isfinite(m), m, 0.0)


def _lse_kernel(xp, a, b, *, axis, keepdims):
    if b is not None:
        a, b = xp.broadcast_arrays(a, b)
        a = xp.where(b == 0, -_INF, a)  # a zero weight drops its term, even next to an infinite a
    m = _shift(xp, a, axis)
    e = xp.exp(a - m)
    s = xp.sum(e if b is None else b * e, axis=axis, keepdims=True)
    mag = xp.abs(s)
    pos = mag > 0
    out = xp.where(pos, xp.log(xp.where(pos, mag, 1.0)), xp.where(mag == 0, -_INF, mag)) + m
    sgn = xp.sign(s)
    if not keepdims:
        out, sgn = xp.squeeze(out, axis=axis), xp.squeeze(sgn, axis=axis)
    return out, sgn


def _lse_abstract(xp, a, b, *, axis, keepdims):
    shapes = [a.shape] if b is None else [a.shape, b.shape]
    dtype = a.dtype if b is None else xp.result_type(a.dtype, b.dtype)
    aval = ShapeDtype(reduction_shape(broadcast_shape(*shapes), axis, keepdims), dtype, a.device)
    return aval, aval


def _lse_weights(outs, a, b, axis, keepdims):
    """``d out / d a`` and ``d out / d b`` on the broadcast shape: ``sign b exp(a - out)`` and
    ``sign exp(a - out)`` (``b`` None: ``exp(a - out)``, the softmax)."""
    out, sgn = outs
    shape = shape_of(a) if b is None else broadcast_shape(shape_of(a), shape_of(b))
    w = exp(a - expand_reduced(out, shape, axis, keepdims))
    if b is None:
        return w, None
    w = expand_reduced(sgn, shape, axis, keepdims) * w
    return where(b == 0, 0.0, b * w), w


def _lse_vjp(g, outs, a, b, *, axis, keepdims):
    g, _ = g  # the sign carries no derivative
    shape = shape_of(a) if b is None else broadcast_shape(shape_of(a), shape_of(b))
    g = expand_reduced(g, shape, axis, keepdims)
    wa, wb = _lse_weights(outs, a, b, axis, keepdims)
    return (
        lambda: unbroadcast(g * wa, a),
        None if b is None else (lambda: unbroadcast(g * wb, b)),
    )


def _lse_jvp(ts, outs, a, b, *, axis, keepdims):
    ta, tb = ts
    wa, wb = _lse_weights(outs, a, b, axis, keepdims)
    t = 0.0
    if ta is not None:
        t = t + ta * wa
    if tb is not None:
        t = t + tb * wb
    return sum(t, axis=axis, keepdims=keepdims), None


def _lse_batch(info, dims, a, b, *, axis, keepdims):
    if b is None:
        a = move_to_front(a, dims[0])
    else:
        a, b = broadcast_batch_args(dims, (a, b))
    return bind(_logsumexp, a, b, axis=tuple(i + 1 for i in axis), keepdims=keepdims), (0, 0)


_logsumexp = Op(
    "special.logsumexp",
    _lse_kernel,
    abstract_eval=_lse_abstract,
    vjp=_lse_vjp,
    jvp=_lse_jvp,
    batch=_lse_batch,
    multiple_results=True,
)


def _at_least_1d(x):
    # SciPy computes on at least 1-d arrays: a 0-d input with keepdims=True gives shape (1,)
    return reshape(x, (1,)) if ndim_of(x) == 0 else x


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False):
    a = _at_least_1d(asarray(float_arg("logsumexp", "a", a)))
    if b is not None:
        b = float_arg("logsumexp", "b", b)
        b = full_like(a, b) if not hasattr(b, "shape") else _at_least_1d(b)
    ndim = len(shape_of(a)) if b is None else len(broadcast_shape(shape_of(a), shape_of(b)))
    out, sgn = bind(_logsumexp, a, b, axis=reduced_axes(axis, ndim), keepdims=bool(keepdims))
    if return_sign:
        return out, sgn
    if b is not None:
        out = where(sgn < 0, math.nan, out)  # the log of a negative sum
    return out


public(
    "logsumexp",
    logsumexp,
    docstring(
        "``log(sum(b * exp(a)))`` over ``axis``, without overflow (SciPy's signature).",
        (
            ("a", "a real array"),
            ("axis", "an int, a tuple of ints, or None (every axis)"),
            (
                "b",
                "weights broadcastable against ``a`` (zeros drop their terms, negatives subtract), or None",
            ),
            ("keepdims", "keep the reduced axes, with length 1"),
            ("return_sign", "also return the sign of the sum (then the result is the log of its magnitude)"),
        ),
        "The reduced array (nan where the weighted sum is negative, unless ``return_sign``), or the "
        "pair ``(log|sum|, sign)``.",
        ("logsumexp(np.array([0.0, 1.0, 2.0])).item()", "2.4076059644443806"),
        "Derivatives: ``softmax``-like weights ``sign b exp(a - out)`` in ``a``, ``sign exp(a - out)`` "
        "in ``b``; the sign has none.",
        kernels="generic",
    ),
)

# ------------------------------------------------------------------------------ softmax, log_softmax


def _softmax_kernel(xp, x, *, axis):
    if 0 in x.shape:
        return xp.zeros_like(x)
    e = xp.exp(x - _shift(xp, x, axis))
    return e / xp.sum(e, axis=axis, keepdims=True)


def _log_softmax_kernel(xp, x, *, axis):
    if 0 in x.shape:
        return xp.zeros_like(x)
    shifted = x - _shift(xp, x, axis)
    return shifted - xp.log(xp.sum(xp.exp(shifted), axis=axis, keepdims=True))


def _same_shape(xp, x, *, axis):
    return ShapeDtype(x.shape, x.dtype, x.device)


def _axis_op(name, kernel, vjp, jvp):
    op = Op(name, kernel, abstract_eval=_same_shape, vjp=vjp, jvp=jvp)
    op.register_rule("batch", reduction_batch(op))
    return op


def _softmax_vjp(g, y, x, *, axis):
    return (lambda: y * (g - sum(g * y, axis=axis, keepdims=True)),)


def _softmax_jvp(ts, y, x, *, axis):
    t = ts[0]
    return y * (t - sum(t * y, axis=axis, keepdims=True))


def _log_softmax_vjp(g, y, x, *, axis):
    return (lambda: g - exp(y) * sum(g, axis=axis, keepdims=True),)


def _log_softmax_jvp(ts, y, x, *, axis):
    t = ts[0]
    return t - sum(exp(y) * t, axis=axis, keepdims=True)


_softmax = _axis_op("special.softmax", _softmax_kernel, _softmax_vjp, _softmax_jvp)
_log_softmax = _axis_op("special.log_softmax", _log_softmax_kernel, _log_softmax_vjp, _log_softmax_jvp)


def softmax(x, axis=None):
    x = asarray(float_arg("softmax", "x", x))
    return bind(_softmax, x, axis=reduced_axes(axis, ndim_of(x)))


def log_softmax(x, axis=None):
    x = asarray(float_arg("log_softmax", "x", x))
    return bind(_log_softmax, x, axis=reduced_axes(axis, ndim_of(x)))


_X_AXIS = (("x", "a real array"), ("axis", "an int, a tuple of ints, or None (every axis)"))
public(
    "softmax",
    softmax,
    docstring(
        "``exp(x) / sum(exp(x))`` over ``axis``, shifted by the maximum so that nothing overflows.",
        _X_AXIS,
        "An array of ``x``'s shape whose slices along ``axis`` sum to 1.",
        ("softmax(np.array([0.0, 1.0, 2.0]))", "array([0.09003057, 0.24472847, 0.66524096])"),
        "Derivative: the VJP of ``y = softmax(x)`` is ``y (g - sum(g y))``.",
        kernels="generic",
    ),
)
public(
    "log_softmax",
    log_softmax,
    docstring(
        "``x - logsumexp(x)`` over ``axis``: the log of ``softmax``, accurate where ``softmax`` underflows.",
        _X_AXIS,
        "An array of ``x``'s shape.",
        ("log_softmax(np.array([0.0, 1.0, 2.0]))", "array([-2.40760596, -1.40760596, -0.40760596])"),
        "Derivative: the VJP of ``y = log_softmax(x)`` is ``g - exp(y) sum(g)``.",
        kernels="generic",
    ),
)
softmax.op, log_softmax.op, logsumexp.op = _softmax, _log_softmax, _logsumexp
