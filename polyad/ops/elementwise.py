"""Element-wise functions of the standard: definitions, abstract evaluation and every transform rule.

Complex convention (PyTorch's): a cotangent is conjugate-linear, so for a holomorphic ``f`` the VJP is
``g * conj(f'(x))`` and ``grad`` of a real loss ``L(x + iy)`` is ``dL/dx + i dL/dy``, the direction of
steepest ascent. JVPs are the ordinary complex derivative ``f'(x) * t``.

``conj``, ``real``, ``add`` and ``where``, with the helpers ``unary`` and ``binary`` that define this
family's ops, live in ``ops.base`` (the transforms and the shared rules need them); they are importable
from here.
"""

import cmath
import math
from typing import Any

from polyad.core import bind
from polyad.core.avals import ShapeDtype, dtype_kind, is_complex
from polyad.ops.base import add as add
from polyad.ops.base import (
    broadcast_batch_args,
    broadcast_to_out,
    complex_like,
    conj,
    conj_if_complex,
    real,
    unbroadcast,
    where,
)
from polyad.ops.common import ABSTRACT_BOOL, ABSTRACT_REAL, ABSTRACT_SAME, define, unary_batch
from polyad.ops.families import binary, times_ones, unary
from polyad.ops.fills import zeros_like
from polyad.ops.known_ones import KnownOnes, passes_ones, with_ones_rule
from polyad.ops.zero_safe import zero_safe_divide, zero_safe_multiply

# ------------------------------------------------------------------------------ unary


def nondiff_unary(name, abstract_eval=ABSTRACT_SAME):
    """A one-array element-wise op whose output carries no derivative (rounding, tests, bitwise)."""
    return unary(name, abstract_eval=abstract_eval, nondiff=True)


_LN2, _LN10 = math.log(2.0), math.log(10.0)

sin = unary("sin", lambda x, y: cos(x))
cos = unary("cos", lambda x, y: -sin(x))
tan = unary("tan", lambda x, y: 1 + y * y)
asin = unary("asin", lambda x, y: 1 / sqrt(1 - x * x), singular=True)
acos = unary("acos", lambda x, y: -1 / sqrt(1 - x * x), singular=True)
atan = unary("atan", lambda x, y: 1 / (1 + x * x))
sinh = unary("sinh", lambda x, y: cosh(x), singular=True)
cosh = unary("cosh", lambda x, y: sinh(x), singular=True)
tanh = unary("tanh", lambda x, y: 1 - y * y)
asinh = unary("asinh", lambda x, y: 1 / sqrt(x * x + 1))
acosh = unary("acosh", lambda x, y: 1 / sqrt(x * x - 1), singular=True)
atanh = unary("atanh", lambda x, y: 1 / (1 - x * x), singular=True)
exp = unary("exp", lambda x, y: y, singular=True)
expm1 = unary("expm1", lambda x, y: y + 1, singular=True)
log = unary("log", lambda x, y: 1 / x, singular=True)
log1p = unary("log1p", lambda x, y: 1 / (1 + x), singular=True)
log2 = unary("log2", lambda x, y: 1 / (x * _LN2), singular=True)
log10 = unary("log10", lambda x, y: 1 / (x * _LN10), singular=True)
sqrt = unary("sqrt", lambda x, y: 0.5 / y, singular=True)
square = unary("square", lambda x, y: 2 * x)
reciprocal = unary("reciprocal", lambda x, y: -(y * y), singular=True)

# Linear ops: the JVP is the op itself; the VJP is written once here.
negative = unary("negative", vjp=lambda g, y, x: (-g,), linear=True, deferrable=True)
positive = unary(
    "positive", vjp=with_ones_rule(lambda g, y, x: (g,), lambda g, y, x: (KnownOnes(g),)), linear=True
)


def _imag_vjp(g, y, x):
    # the imaginary part of a real array is 0 whatever x is: its cotangent is 0, not 1j * g
    return (complex_like(g, x) * 1j,) if is_complex(x) else (zeros_like(g),)


imag = unary("imag", vjp=_imag_vjp, linear=True, abstract_eval=ABSTRACT_REAL)


def _abs_vjp(g, y, x):
    if is_complex(x):
        return (g * safe_divide(x, y),)
    return (g * sign(x),)


def _abs_jvp(ts, y, x):
    if is_complex(x):
        return safe_divide(real(conj(x) * ts[0]), y)
    return ts[0] * sign(x)


def safe_divide(a, b):
    # a / b where b != 0, else 0: the subgradient polyad uses at the kink of abs and norms
    nz = b != 0
    return where(nz, a, 0) / where(nz, b, 1)


def _unit_sign(v):
    # +1 or -1 by the sign bit (so -0.0 counts as negative), for arrays and Python scalars alike
    return copysign(1.0, v) if hasattr(v, "shape") else math.copysign(1.0, v)


abs = unary("abs", vjp=_abs_vjp, jvp=_abs_jvp, abstract_eval=ABSTRACT_REAL)

ceil = nondiff_unary("ceil")
floor = nondiff_unary("floor")
round = nondiff_unary("round")
trunc = nondiff_unary("trunc")
sign = nondiff_unary("sign")
signbit = nondiff_unary("signbit", ABSTRACT_BOOL)
isfinite = nondiff_unary("isfinite", ABSTRACT_BOOL)
isinf = nondiff_unary("isinf", ABSTRACT_BOOL)
isnan = nondiff_unary("isnan", ABSTRACT_BOOL)
logical_not = nondiff_unary("logical_not", ABSTRACT_BOOL)
bitwise_invert = nondiff_unary("bitwise_invert")

# ------------------------------------------------------------------------------ binary


def _sub_jvp(ts, y, a, b):
    ta, tb = ts
    if tb is None:
        return broadcast_to_out(ta, y)
    if ta is None:
        return broadcast_to_out(-tb, y)
    return ta - tb


def _div_jvp(ts, y, a, b):
    # zero-safe: a zero tangent stays zero where b is 0 (polyad.ops.zero_safe)
    ta, tb = ts
    out = None if ta is None else zero_safe_divide(ta, b)
    if tb is not None:
        d = zero_safe_multiply(tb, -(y / b))
        out = d if out is None else out + d
    return broadcast_to_out(out, y)


def _pow_da(a, b):
    """d(a**b)/da = b * a**(b-1); for the common Python exponents without a second power. Where b is 0
    the derivative is 0, also at a = 0 (where b * a**(b-1) would be 0 * inf)."""
    if isinstance(b, int | float) and not isinstance(b, bool):
        if b == 2:
            return a * 2.0
        if b == 1:
            return 1.0 + 0.0 * a
        if b == 0.5:
            return 0.5 / sqrt(a)
        if b == 0:
            return zeros_like(a)
        return b * pow(a, b - 1)
    b0 = b == 0
    return where(b0, 0.0, b * pow(where(b0, 1.0, a), b - 1))


def _pow_times_da(g, a, b):
    """``g * d(a**b)/da``, zero-safe: a zero ``g`` stays zero where the derivative is infinite (a = 0 for
    b < 1) or NaN (a NaN base, in a term the code discards)."""
    return zero_safe_multiply(g, conj_if_complex(_pow_da(a, b)))


def _pow_vjp(g, y, a, b):
    return (
        lambda: unbroadcast(_pow_times_da(g, a, b), a),
        lambda: unbroadcast(zero_safe_multiply(g, conj_if_complex(_log_base(a) * y)), b),
    )  # fmt: skip


def _log_base(a):
    # d(a**b)/db = log(a) * a**b; where a == 0 the product is 0 (for b > 0), not nan
    if not hasattr(a, "shape"):  # a Python number as the base (2.0 ** x): its log is a number too
        if a == 0:
            return 0.0
        if isinstance(a, complex):
            return cmath.log(a)
        return math.log(a) if a > 0 else math.nan  # a real negative base has no real log
    return where(a == 0, 0, log(where(a == 0, 1, a)))


def _pow_jvp(ts, y, a, b):
    ta, tb = ts
    out = None if ta is None else zero_safe_multiply(ta, _pow_da(a, b))
    if tb is not None:
        d = zero_safe_multiply(tb, _log_base(a) * y)
        out = d if out is None else out + d
    return broadcast_to_out(out, y)


def _max_min_vjp(first_wins):
    def vjp(g, y, a, b):
        # ties share the cotangent equally (the mean of the one-sided derivatives)
        wa = where(first_wins(a, b), 1.0, where(a == b, 0.5, 0.0))
        return lambda: unbroadcast(g * wa, a), lambda: unbroadcast(g * (1 - wa), b)

    def jvp(ts, y, a, b):
        wa = where(first_wins(a, b), 1.0, where(a == b, 0.5, 0.0))
        ta, tb = ts
        out = None if ta is None else ta * wa
        if tb is not None:
            d = tb * (1 - wa)
            out = d if out is None else out + d
        return broadcast_to_out(out, y)

    return vjp, jvp


def _binary_deriv_rules(da, db, singular=False):
    """VJP and JVP of a real binary op from its partial derivatives ``da(a, b, y)`` and ``db(a, b, y)``;
    ``singular``: they can be infinite or NaN at finite inputs, so the products are zero-safe."""
    times = zero_safe_multiply if singular else _times

    def vjp(g, y, a, b):
        return lambda: unbroadcast(times(g, da(a, b, y)), a), lambda: unbroadcast(times(g, db(a, b, y)), b)

    def jvp(ts, y, a, b):
        ta, tb = ts
        out = None if ta is None else times(ta, da(a, b, y))
        if tb is not None:
            d = times(tb, db(a, b, y))
            out = d if out is None else out + d
        return broadcast_to_out(out, y)

    return {"vjp": vjp, "jvp": jvp}


def _times(g, d):
    return g * d


# each ``ones`` rule: the VJP for an all-ones cotangent g, without the products by g (see ops.base)
subtract = binary(
    "subtract",
    vjp=with_ones_rule(
        lambda g, y, a, b: (lambda: unbroadcast(g, a), lambda: unbroadcast(-g, b)),
        lambda g, y, a, b: (lambda: passes_ones(unbroadcast(g, a), g), lambda: unbroadcast(-g, b)),
    ),
    jvp=_sub_jvp,
    deferrable=True,
)


def _mul_jvp(ts, y, a, b):
    ta, tb = ts
    out = None if ta is None else zero_safe_multiply(ta, b)
    if tb is not None:
        d = zero_safe_multiply(tb, a)
        out = d if out is None else out + d
    return broadcast_to_out(out, y)


# zero-safe: where one factor is infinite or NaN (an unselected x * log(x) at 0), a zero cotangent or
# tangent stays zero (polyad.ops.zero_safe); an all-ones cotangent has no zero to keep
multiply = binary(
    "multiply",
    vjp=with_ones_rule(
        lambda g, y, a, b: (
            lambda: unbroadcast(zero_safe_multiply(g, conj_if_complex(b)), a),
            lambda: unbroadcast(zero_safe_multiply(g, conj_if_complex(a)), b),
        ),
        lambda g, y, a, b: (lambda: times_ones(g, b, a, False), lambda: times_ones(g, a, b, False)),
    ),
    jvp=_mul_jvp,
    bilinear=True,
    deferrable=True,
)


def _div_vjp_ones(g, y, a, b):
    def da():
        # 1 / b is g / b for g all ones, with one array read instead of two
        if (
            hasattr(b, "shape")
            and b.dtype == g.dtype
            and tuple(b.shape) == tuple(g.shape)
            and not is_complex(b)
        ):
            return unbroadcast(1.0 / b, a)
        return unbroadcast(g / conj_if_complex(b), a)

    return da, lambda: times_ones(g, -(y / b), b, True)


divide = binary(
    "divide",
    vjp=with_ones_rule(
        lambda g, y, a, b: (  # zero-safe: a zero cotangent stays zero where b is 0
            lambda: unbroadcast(zero_safe_divide(g, conj_if_complex(b)), a),
            lambda: unbroadcast(zero_safe_multiply(g, conj_if_complex(-(y / b))), b),
        ),
        _div_vjp_ones,
    ),
    jvp=_div_jvp,
)


def _pow_kernel(xp, a, b):
    # small literal exponents of a floating array as products, a reciprocal or a square root (as XLA's
    # integer_pow, and NumPy's own ``x ** 2``, ``x ** -1``, ``x ** 0.5``): one or two passes where libm's
    # pow costs several times more per element; the rewrite is in ``power_as_products``
    how = power_as_products(a, b)
    if how is not None:
        return how(xp, a)
    return xp.pow(a, b)


def power_as_products(a, b):
    """How ``a ** b`` is computed without ``pow`` for a literal ``b`` (a Python int or float) and a
    floating ``a``, or None. Squares and reciprocals are exact (one correctly rounded operation, as pow's
    result); a cube is two products, within 1 ulp of the correctly rounded pow (NumPy's ``x ** 3`` is libm's
    pow, so the two can differ in the last bit); ``0.5`` is ``sqrt`` for real ``a``, as NumPy's ``x **
    0.5`` (``sqrt(-0.0)`` is ``-0.0`` where C's pow gives ``+0.0``). The graph optimiser rewrites the same
    exponents (``polyad.graph.compiler.optimize``)."""
    if type(b) not in (int, float) or not hasattr(a, "dtype"):
        return None
    kind = dtype_kind(a.dtype)
    if kind not in "fc":
        return None
    if b == 2:
        return lambda xp, a: a * a
    if b == 3:
        return lambda xp, a: a * a * a
    if b == -1:
        return lambda xp, a: 1.0 / a
    if b == 0.5 and kind == "f":
        return lambda xp, a: xp.sqrt(a)
    return None


pow = binary("pow", generic=_pow_kernel, vjp=_pow_vjp, jvp=_pow_jvp)
_max_vjp, _max_jvp = _max_min_vjp(lambda a, b: a > b)
_min_vjp, _min_jvp = _max_min_vjp(lambda a, b: a < b)
maximum = binary("maximum", vjp=_max_vjp, jvp=_max_jvp)
minimum = binary("minimum", vjp=_min_vjp, jvp=_min_jvp)
atan2 = binary(
    "atan2",
    **_binary_deriv_rules(
        lambda a, b, y: b / (a * a + b * b), lambda a, b, y: -a / (a * a + b * b), singular=True
    ),
)
hypot = binary(
    "hypot", **_binary_deriv_rules(lambda a, b, y: safe_divide(a, y), lambda a, b, y: safe_divide(b, y))
)
logaddexp = binary("logaddexp", **_binary_deriv_rules(lambda a, b, y: exp(a - y), lambda a, b, y: exp(b - y)))
copysign = binary(
    "copysign",
    **_binary_deriv_rules(lambda a, b, y: _unit_sign(a) * _unit_sign(b), lambda a, b, y: 0.0 * y),
)
remainder = binary(
    "remainder", **_binary_deriv_rules(lambda a, b, y: 1.0 + 0.0 * y, lambda a, b, y: -floor(a / b))
)

floor_divide = binary("floor_divide", nondiff=True)
nextafter = binary("nextafter", nondiff=True)
equal = binary("equal", nondiff=True, abstract_eval=ABSTRACT_BOOL)
not_equal = binary("not_equal", nondiff=True, abstract_eval=ABSTRACT_BOOL)
less = binary("less", nondiff=True, abstract_eval=ABSTRACT_BOOL)
less_equal = binary("less_equal", nondiff=True, abstract_eval=ABSTRACT_BOOL)
greater = binary("greater", nondiff=True, abstract_eval=ABSTRACT_BOOL)
greater_equal = binary("greater_equal", nondiff=True, abstract_eval=ABSTRACT_BOOL)
logical_and = binary("logical_and", nondiff=True, abstract_eval=ABSTRACT_BOOL)
logical_or = binary("logical_or", nondiff=True, abstract_eval=ABSTRACT_BOOL)
logical_xor = binary("logical_xor", nondiff=True, abstract_eval=ABSTRACT_BOOL)
bitwise_and = binary("bitwise_and", nondiff=True)
bitwise_or = binary("bitwise_or", nondiff=True)
bitwise_xor = binary("bitwise_xor", nondiff=True)
bitwise_left_shift = binary("bitwise_left_shift", nondiff=True)
bitwise_right_shift = binary("bitwise_right_shift", nondiff=True)

# ------------------------------------------------------------------------------ ternary


def _clip_kernel(xp, x, lo, hi):
    return xp.clip(x, lo, hi)


def _clip_vjp(g, y, x, lo, hi):
    inside = _inside(x, lo, hi)
    return (
        lambda: where(inside, g, 0.0),
        lambda: unbroadcast(where(x < lo, g, 0.0), lo),
        lambda: unbroadcast(where(_above(x, lo, hi), g, 0.0), hi),
    )


def _inside(x, lo, hi):
    c = True
    if lo is not None:
        c = x >= lo
    if hi is not None:
        c = (x <= hi) if c is True else logical_and(c, x <= hi)
    return c


def _above(x, lo, hi):
    return x > hi


def _clip_jvp(ts, y, x, lo, hi):
    tx, tlo, thi = ts
    out = where(_inside(x, lo, hi), tx if tx is not None else 0.0, 0.0)
    if tlo is not None:
        out = out + where(x < lo, tlo, 0.0)
    if thi is not None:
        out = out + where(_above(x, lo, hi), thi, 0.0)
    return broadcast_to_out(out, y)


def _clip_abstract(xp, x, lo, hi):
    return ShapeDtype(x.shape, x.dtype, x.device)


_clip_op = define("clip", _clip_kernel, abstract_eval=_clip_abstract, vjp=_clip_vjp, jvp=_clip_jvp)


def _clip_batch(info, dims, x, lo, hi):
    # lo and hi may be None, scalars or arrays: broadcast the array ones with x
    vals, ds = [x], [dims[0]]
    for v, d in ((lo, dims[1]), (hi, dims[2])):
        vals.append(v)
        ds.append(d)
    arrays = [i for i, v in enumerate(vals) if v is not None]
    moved = broadcast_batch_args([ds[i] for i in arrays], [vals[i] for i in arrays])
    for i, v in zip(arrays, moved):
        vals[i] = v
    out = bind(_clip_op, *vals)
    # clip's output has x's shape: if only a bound was batched, broadcast x's batch in
    return out, 0


_clip_op.register_rule("batch", _clip_batch)


def clip(x, /, min=None, max=None):
    """Clamp ``x`` to ``[min, max]`` (either bound may be None, a scalar or an array)."""
    return bind(_clip_op, x, min, max)


clip.op = _clip_op


# ------------------------------------------------------------------------------ stop_gradient

_stop_gradient = define("stop_gradient", lambda xp, x: x, abstract_eval=lambda xp, x: x, nondiff=True)
_stop_gradient.register_rule("batch", unary_batch(_stop_gradient))


def stop_gradient(x: Any) -> Any:
    """``x`` as a constant to every grad and jvp level (its derivative is zero).

    Example:
        >>> import numpy as np, polyad as pa
        >>> pa.grad(lambda x: pa.xp.sum(x * pa.stop_gradient(x)))(np.array([3.0]))
        array([3.])
    """
    return bind(_stop_gradient, x)
