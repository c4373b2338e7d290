"""The exponential family of the vectorised math library: exp, expm1, log, log1p, pow, logaddexp, sinh,
cosh and tanh in float64 (``vecmath.py`` says how they are used and how accurate they are).

Shared reductions:
- ``exp_parts(xh, xl)``: ``exp(xh + xl) = 2**k * (1 + h + q)``: ``k = rint(x / log 2)``, ``r = x - k log 2``
  computed exactly (``fma`` with log 2 as two doubles) and ``h + q = expm1(r)`` as an unevaluated sum, from
  a minimax polynomial on ``|r| <= log(2)/2``. exp, expm1, pow, the hyperbolic functions and erf's
  ``exp(-x**2)`` are all built on it; the low part ``xl`` carries what a double cannot (pow's ``y log x``).
- ``log_parts(m)``: ``x = 2**e * m`` with ``m`` in [sqrt(1/2), sqrt(2)) from the exponent bits, then
  ``log(m) = 2 atanh(s)``, ``s = (m - 1) / (m + 1)``, a polynomial in ``s**2``.
Special values (NaN, infinities, signed zeros, overflow, subnormals) are chosen by selects at the end, as
NumPy's functions give them.
"""

import numpy as np

from . import vecmath_coefficients as C
from .vecmath_base import (
    as_bits,
    clamp,
    copysign,
    fast_two_sum,
    fma,
    from_bits,
    horner,
    pow2,
    rint,
    scale,
    two_prod,
    two_sum,
    vector_function,
)

# coefficients: 87d58d76b906dd0e
# (written by scripts/vecmath_fit.py: Numba caches these functions against this file, so new
# coefficients must change it)
INF = np.inf
NAN = np.nan
MIN_NORMAL = 2.2250738585072014e-308
TWO_54 = 18014398509481984.0
SQRT_HALF_BITS = 0x3FE6A09E667F3BCD  # the bits of sqrt(1/2), rounded down
ONE_BITS = 0x3FF0000000000000
MANTISSA = 0x000FFFFFFFFFFFFF


@vector_function
def expm1_poly(r):
    """``(expm1(r) - r) / r**2`` for ``|r| <= log(2)/2``."""
    return horner(r, C.EXPM1)


@vector_function
def exp_parts(xh, xl):
    """``(h, q, k)`` with ``exp(xh + xl) = 2**k * (1 + h + q)``, ``|h| <= 0.35``, ``|q| < h**2``, for
    ``xh`` in [-1100, 1100] (callers clamp) and ``|xl| <= 2**-40 |xh|``."""
    k = rint(xh * C.INV_LN2)
    high = fma(-k, C.LN2_A, xh)  # exact: the difference has fewer than 53 significant bits
    r, dr = two_sum(high, fma(-k, C.LN2_B, xl))
    q = r * r * expm1_poly(r) + dr * (1.0 + r)  # expm1(r + dr) = expm1(r) + dr * exp(r)
    return r, q, k


@vector_function
def exp_mantissa(h, q):
    """``1 + h + q`` rounded once (``|h| <= 0.35``)."""
    s, e = fast_two_sum(1.0, h)
    return s + (e + q)


@vector_function
def exp(x):
    h, q, k = exp_parts(clamp(x, -1100.0, 1100.0), 0.0)
    result = scale(exp_mantissa(h, q), k)
    return x + x if x != x else result


@vector_function
def expm1_parts(x):
    """``(sh, sl, k)`` with ``expm1(x) = 2**k * (sh + sl)``, ``sh`` rounded, for ``x`` in [-60, 1100]."""
    h, q, k = exp_parts(x, 0.0)
    # 2**k * (1 + h + q) - 1 = 2**k * ((1 - 2**-k) + h + q); 1 - 2**-k is exact for |k| <= 53 and its
    # rounding beyond falls below the result's last bit
    s, e = two_sum(1.0 - pow2(-clamp(k, -1000.0, 60.0)), h)
    return fast_two_sum(s, e + q) + (k,)


@vector_function
def expm1(x):
    sh, sl, k = expm1_parts(clamp(x, -60.0, 1100.0))
    result = scale(sh, k)
    result = x if x == 0.0 else result  # keeps -0.0
    return x + x if x != x else result


@vector_function
def log_poly(z):
    """``R(z)``, ``2 atanh(s) = 2 s + s R(s**2)``, for ``s**2 <= 0.0295``."""
    return z * (horner(z, C.LOG))


@vector_function
def log_split(x):
    """``(m, e)`` with ``x = m * 2**e``, ``m`` in [sqrt(1/2), sqrt(2)), for finite ``x > 0`` (subnormals
    included)."""
    tiny = x < MIN_NORMAL
    bits = as_bits(x * TWO_54 if tiny else x) + (ONE_BITS - SQRT_HALF_BITS)
    e = np.float64((bits >> 52) - 1023) - (54.0 if tiny else 0.0)
    m = from_bits((bits & MANTISSA) + SQRT_HALF_BITS)
    return m, e


@vector_function
def log_of_parts(m, e, tail):
    """``log(m * 2**e) + tail`` for ``m`` in [sqrt(1/2), sqrt(2)) and a small ``tail`` (log1p's
    correction): ``f - (f**2/2 - s (f**2/2 + R))`` is ``log(m)`` with ``f = m - 1`` exact (as in fdlibm)."""
    f = m - 1.0
    s = f / (2.0 + f)
    half_f2 = 0.5 * f * f
    return e * C.LN2_HI42 + (f - (half_f2 - (s * (half_f2 + log_poly(s * s)) + (e * C.LN2_LO42 + tail))))


@vector_function
def log(x):
    m, e = log_split(x if x > 0.0 else 1.0)
    result = log_of_parts(m, e, 0.0)
    result = -INF if x == 0.0 else result
    result = NAN if x < 0.0 else result
    return result if x < INF else x + x  # +inf and NaN


@vector_function
def log1p(x):
    u, c = two_sum(1.0, x)  # 1 + x = u + c exactly
    ok = u > 0.0
    m, e = log_split(u if ok else 1.0)
    result = log_of_parts(m, e, c / u if ok else 0.0)
    result = x if abs(x) < 1e-300 else result  # keeps -0.0; log1p(x) = x for |x| < 2**-54 anyway
    result = -INF if x == -1.0 else result
    result = NAN if x < -1.0 else result
    return result if x < INF else x + x


@vector_function
def log_dd(x):
    """``(lh, ll)``: ``log(x)`` as a double-double, relative error near 2**-68, for finite ``x > 0``.
    ``log(m) = 2 s + 2 s**3 / 3 + s**5 R5(s**2)`` with ``s`` and ``s**3`` carried as double-doubles."""
    m, e = log_split(x)
    f = m - 1.0  # exact
    dh, dl = two_sum(1.0, m)
    sh = f / dh
    sl = (fma(-sh, dh, f) - sh * dl) / dh
    z = sh * sh
    s2h, s2l = two_prod(sh, sh)
    s2l += 2.0 * sh * sl
    s3h, s3l = two_prod(s2h, sh)
    s3l += s2l * sh + s2h * sl
    th, tl = two_prod(C.TWO_THIRDS_HI, s3h)
    tl += C.TWO_THIRDS_LO * s3h + C.TWO_THIRDS_HI * s3l
    r5 = horner(z, C.LOG5)
    ah, al = fast_two_sum(2.0 * sh, th)
    al += 2.0 * sl + tl + s3h * z * r5
    lh, ll = fast_two_sum(e * C.LN2_HI42, ah)
    return fast_two_sum(lh, ll + (al + e * C.LN2_LO42))


@vector_function
def power(x, y):
    """``x ** y`` as NumPy's ``power`` (C99 ``pow``): ``exp(y log|x|)`` with the log as a double-double and
    the product ``y log|x|`` carried exactly into ``exp``'s reduction, then the sign and special cases."""
    ax = abs(x)
    finite = (ax < INF) & (ax > 0.0)
    lh, ll = log_dd(ax if finite else 1.0)
    zh, zl = two_prod(y, lh)
    zl += y * ll
    inside = abs(zh) < 1100.0
    h, q, k = exp_parts(zh if inside else clamp(zh, -1100.0, 1100.0), zl if inside else 0.0)
    result = scale(exp_mantissa(h, q), k)
    # zero and infinite x: 0 ** y and inf ** y, the sign below
    result = (INF if y < 0.0 else 0.0) if ax == 0.0 else result
    result = (0.0 if y < 0.0 else INF) if ax == INF else result
    integer = np.floor(y) == y
    odd = integer & (abs(y) < 9007199254740992.0) & (np.floor(0.5 * y) != 0.5 * y)
    result = -result if odd & (as_bits(x) < 0) else result
    result = NAN if (x < 0.0) & (ax < INF) & (not integer) & (abs(y) < INF) else result
    result = NAN if (x != x) | (y != y) else result
    result = 1.0 if (x == 1.0) | ((ax == 1.0) & (abs(y) == INF)) else result  # 1 ** y, (-1) ** inf
    return 1.0 if y == 0.0 else result


@vector_function
def logaddexp(a, b):
    """``log(exp(a) + exp(b))`` as NumPy computes it: ``max + log1p(exp(-|a - b|))``; equal arguments
    (infinities of one sign among them) give ``a + log(2)``."""
    big = a if a > b else b
    result = big + log1p(exp(-abs(a - b)))
    result = a + C.LN2_A if a == b else result
    return a + b if a != a or b != b else result


@vector_function
def cosh(x):
    a = clamp(abs(x), 0.0, 711.0)
    h, q, k = exp_parts(a, 0.0)
    p = exp_mantissa(h, q)  # exp(a) = p 2**k
    result = scale(p, k - 1.0) + (0.5 / p) * pow2(-clamp(k, 0.0, 1000.0))
    return x * x if x != x else result


@vector_function
def sinh(x):
    a = clamp(abs(x), 0.0, 711.0)
    sh, sl, k = expm1_parts(a)
    # a <= 40: (em + em / (em + 1)) / 2 with em = expm1(a) and the quotient as double-doubles (no
    # cancellation); beyond, exp(a) / 2, scaled in two steps so that it overflows where sinh does
    eh, el = scale(sh, k), scale(sl, k)
    ph, pl = two_sum(1.0, eh)
    pl += el
    rh = eh / ph
    rl = (fma(-rh, ph, eh) + el - rh * pl) / ph
    small = 0.5 * (eh + (rh + (el + rl)))
    result = small if a <= 40.0 else scale(sh, k - 1.0)
    result = copysign(result, x)
    return x + x if x != x else result


@vector_function
def tanh(x):
    a = clamp(abs(x), 0.0, 20.0)  # tanh(20) rounds to 1
    sh, sl, k = expm1_parts(2.0 * a)
    # em / (em + 2), em = expm1(2a), with em and the quotient as double-doubles
    eh, el = scale(sh, k), scale(sl, k)
    dh, dl = two_sum(2.0, eh)
    dl += el
    th = eh / dh
    tl = (fma(-th, dh, eh) + el - th * dl) / dh
    result = copysign(th + tl, x)
    return x + x if x != x else result


@vector_function
def log_with_tail(y, tail):
    """``log(y) + tail`` for finite ``y > 0`` and a small ``tail`` (one evaluation of the log core)."""
    m, e = log_split(y)
    return log_of_parts(m, e, tail)


@vector_function
def arcsinh(x):
    a = abs(x)
    huge = a > 268435456.0  # 2**28: asinh(a) = log(2a) to the last bit
    big = a > 2.0
    root = np.sqrt(a * a + 1.0) if not huge else a
    # a <= 2: log1p(a + a**2 / (1 + sqrt(1 + a**2))), with 1 + t = u + c exactly; a > 2:
    # log(2a + 1 / (sqrt(a**2 + 1) + a)); beyond 2**28: log(a) + log(2)
    sh, sl = two_sum(a, a * a / (1.0 + root))  # the sum as a double-double: its rounding would count
    u, c = two_sum(1.0, sh)
    c += sl
    y = a if huge else ((a + a + 1.0 / (root + a)) if big else u)
    tail = C.LN2_A if huge else (0.0 if big else c / u)
    result = log_with_tail(y if a < INF else 1.0, tail)
    result = INF if a == INF else result
    result = copysign(result, x)
    return x + x if x != x else result


@vector_function
def arccosh(x):
    huge = x > 268435456.0
    big = x > 2.0
    # x <= 2: log1p(t + sqrt(2t + t**2)), t = x - 1 exact, with 2t + t**2, its root and the sum carried as
    # double-doubles (near 1 the result is about sqrt(2t) and every rounding would count); x > 2:
    # log(2x - 1 / (x + sqrt(x**2 - 1))); beyond 2**28: log(x) + log(2)
    t = x - 1.0 if (x > 1.0) & (x <= 2.0) else 0.0
    a, ae = two_sum(2.0, t)
    wh, wl = two_prod(t, a)
    wl += t * ae
    r = np.sqrt(wh)
    rl = (fma(-r, r, wh) + wl) / (r + r) if r > 0.0 else 0.0
    sh, sl = two_sum(t, r)
    u, c = two_sum(1.0, sh)
    c += sl + rl
    w = np.sqrt(x * x - 1.0) if big and not huge else 1.0
    y = x if huge else ((x + x - 1.0 / (x + w)) if big else u)
    tail = C.LN2_A if huge else (0.0 if big else c / u)
    result = log_with_tail(y if (x < INF) & (x >= 1.0) else 1.0, tail)
    result = INF if x == INF else result
    result = NAN if x < 1.0 else result
    return x + x if x != x else result


@vector_function
def arctanh(x):
    a = abs(x)
    # 0.5 log1p(2a + 2a**2 / (1 - a)) below 1/2 and 0.5 log1p(2a / (1 - a)) above (1 - a exact there)
    d = 1.0 - a
    q = (a + a) / d
    # the sum, and above 1/2 the quotient, as double-doubles: their roundings would count
    th, tl = two_sum(a + a, q * a) if a < 0.5 else (q, fma(-q, d, a + a) / d)
    u, c = two_sum(1.0, th)
    c += tl
    result = 0.5 * log_with_tail(u if a < 1.0 else 1.0, c / u if a < 1.0 else 0.0)
    result = a if a < 3.7252902984e-09 else result  # 2**-28: atanh(a) rounds to a (and keeps -0.0)
    result = INF if a == 1.0 else result
    result = NAN if a > 1.0 else result
    result = copysign(result, x)
    return x + x if x != x else result
