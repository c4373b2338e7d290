"""The trigonometric family of the vectorised math library, and erf: sin, cos, tan, arctan, arcsin,
arccos, erf in float64 (``vecmath.py`` says how they are used and how accurate they are).

sin, cos and tan reduce ``x`` by multiples of pi/2 (Cody and Waite's scheme): ``k = rint(2x/pi)`` and
``r = x - k pi/2`` as a double-double, with pi/2 as three doubles (159 bits) and ``fma`` making the first
two products exact; the quadrant ``k mod 4`` then selects ``+-sin(r)``, ``+-cos(r)`` or ``tan(r)``,
``-1/tan(r)``. That reduction is accurate while ``|x| <= TRIG_LIMIT`` (2**30); beyond it the fused loop
counts the arguments (``outside``) and computes the call again with libm (``vecmath.py``).
"""

import numpy as np

from . import vecmath_coefficients as C
from .vecmath_base import clamp, copysign, fast_two_sum, fma, horner, rint, two_prod, two_sum, vector_function
from .vecmath_exp import exp_mantissa, exp_parts, scale

# coefficients: 87d58d76b906dd0e
# (written by scripts/vecmath_fit.py: Numba caches these functions against this file, so new
# coefficients must change it)
INF = np.inf
NAN = np.nan
TRIG_LIMIT = 1073741824.0  # 2**30: sin, cos and tan reduce exactly enough up to here


@vector_function
def outside(x):
    """1 where sin, cos or tan of ``x`` needs libm's reduction (``TRIG_LIMIT < |x| < inf``), else 0."""
    a = abs(x)
    return np.int64((a > TRIG_LIMIT) & (a < INF))


@vector_function
def reduce_pio2(x):
    """``(rh, rl, k)`` with ``x = k pi/2 + rh + rl``, ``|rh| <= pi/4`` (plus rounding), for
    ``|x| <= TRIG_LIMIT``."""
    k = rint(x * C.TWO_OVER_PI)
    r1 = fma(-k, C.PIO2_1, x)  # exact: k PIO2_1 and x agree in their leading bits
    a, ae = two_prod(k, C.PIO2_2)
    s, se = two_sum(r1, -a)
    rh, rl = two_sum(s, se - ae - k * C.PIO2_3)
    return rh, rl, k


@vector_function
def sin_of_reduced(rh, rl):
    """``sin(rh + rl)`` for ``|rh| <= pi/4``: ``r + r**3 S(r**2)`` plus ``rl cos(rh)``."""
    z = rh * rh
    poly = horner(z, C.SIN)
    return rh + (rh * z * poly + rl * (1.0 - 0.5 * z))


@vector_function
def cos_of_reduced(rh, rl):
    """``cos(rh + rl)`` for ``|rh| <= pi/4``: ``1 - r**2/2 + r**4 C(r**2)`` minus ``rl sin(rh)``, with the
    rounding error of ``1 - r**2/2`` added back (as fdlibm does)."""
    z = rh * rh
    poly = horner(z, C.COS)
    half_z = 0.5 * z
    w = 1.0 - half_z
    return w + (((1.0 - w) - half_z) + (z * z * poly - rh * rl))


@vector_function
def sin(x):
    rh, rl, k = reduce_pio2(clamp(x, -TRIG_LIMIT, TRIG_LIMIT))
    n = np.int64(k)
    v = cos_of_reduced(rh, rl) if n & 1 else sin_of_reduced(rh, rl)
    result = -v if n & 2 else v
    result = x if x == 0.0 else result  # keeps -0.0
    return result if abs(x) < INF else x - x  # NaN for inf and NaN


@vector_function
def cos(x):
    rh, rl, k = reduce_pio2(clamp(x, -TRIG_LIMIT, TRIG_LIMIT))
    n = np.int64(k)
    v = sin_of_reduced(rh, rl) if n & 1 else cos_of_reduced(rh, rl)
    result = -v if (n + 1) & 2 else v
    return result if abs(x) < INF else x - x


@vector_function
def tan(x):
    rh, rl, k = reduce_pio2(clamp(x, -TRIG_LIMIT, TRIG_LIMIT))
    z = rh * rh
    poly = horner(z, C.TAN)
    t, dt = fast_two_sum(rh, rh * z * poly + rl * (1.0 + z))  # tan(r) = t + dt
    y = -1.0 / t  # odd quadrants: -1/tan(r), corrected for the rounding of the quotient and of t
    odd = y + y * (fma(y, t, 1.0) + y * dt)
    result = odd if np.int64(k) & 1 else t
    result = x if x == 0.0 else result
    return result if abs(x) < INF else x - x


@vector_function
def arctan(x):
    a = abs(x)
    # atan(a) = base + atan(t), |t| <= tan(pi/8): t = a, (a - 1) / (a + 1) or -1/a
    middle = a > C.TAN_PI_8
    high = a > C.TAN_3PI_8
    n, nl = two_sum(a, -1.0)
    d, dl = two_sum(a, 1.0)
    n, nl = (-1.0, 0.0) if high else ((n, nl) if middle else (a, 0.0))
    d, dl = (a, 0.0) if high else ((d, dl) if middle else (1.0, 0.0))
    base_hi = C.PIO2_HI if high else (C.PIO4_HI if middle else 0.0)
    base_lo = C.PIO2_LO if high else (C.PIO4_LO if middle else 0.0)
    th = n / d
    tl = (fma(-th, d, n) + nl - th * dl) / d
    z = th * th
    poly = horner(z, C.ATAN)
    s, se = fast_two_sum(base_hi, th)
    result = s + (se + (th * z * poly + (tl * (1.0 - z) + base_lo)))
    result = C.PIO2_HI if a == INF else result
    result = copysign(result, x)
    return x + x if x != x else result


@vector_function
def asin_poly(z):
    """``B(z)``, ``asin(x) = x + x**3 B(x**2)`` for ``x**2 <= 1/4``."""
    return horner(z, C.ASIN)


@vector_function
def half_angle(w):
    """``(s, sl, z)``: ``z = w / 2`` and ``sqrt(z) = s + sl`` (``sl`` from the square root's residual),
    the argument of asin in ``asin(1 - w) = pi/2 - 2 asin(sqrt(w/2))``."""
    z = 0.5 * w
    s = np.sqrt(z)
    sl = fma(-s, s, z) / (s + s) if s > 0.0 else 0.0
    return s, sl, z


@vector_function
def arcsin(x):
    a = abs(x)
    z = a * a
    small = a + a * z * asin_poly(z)
    s, sl, w = half_angle(1.0 - a if a > 0.5 else 0.0)  # 1 - a is exact for a >= 1/2
    h, hl = fast_two_sum(C.PIO2_HI, -2.0 * s)
    large = h + (hl + (C.PIO2_LO - 2.0 * (sl + s * w * asin_poly(w))))
    result = copysign(large if a > 0.5 else small, x)
    result = NAN if a > 1.0 else result
    return x + x if x != x else result


@vector_function
def arccos(x):
    a = abs(x)
    z = x * x
    h, hl = fast_two_sum(C.PIO2_HI, -x)  # |x| <= 1/2: pi/2 - asin(x)
    middle = h + (hl + (C.PIO2_LO - x * z * asin_poly(z)))
    s, sl, w = half_angle(1.0 - a if a > 0.5 else 0.0)
    tail = 2.0 * (sl + s * w * asin_poly(w))  # 2 asin(sqrt(w)) = 2 s + tail
    positive = 2.0 * s + tail
    h, hl = fast_two_sum(C.PI_HI, -2.0 * s)
    negative = h + (hl + (C.PI_LO - tail))
    result = middle if a <= 0.5 else (positive if x > 0.0 else negative)
    result = NAN if a > 1.0 else result
    return x + x if x != x else result


@vector_function
def erf(x):
    a = abs(x)
    z = a * a
    series = horner(z, C.ERF)
    small = fma(a, series, a)
    # 1 - erfc(a), erfc(a) = exp(-a**2) / a * G(1/a), with a**2 as a double-double into exp's reduction
    b = clamp(a, C.ERF_SPLIT, C.ERF_ONE)
    bh, bl = two_prod(b, b)
    h, q, k = exp_parts(-bh, -bl)
    u = 1.0 / b
    g = horner(u, C.ERFC)
    large = 1.0 - scale(exp_mantissa(h, q), k) * u * g
    result = small if a <= C.ERF_SPLIT else (large if a < C.ERF_ONE else 1.0)
    result = copysign(result, x)
    return x + x if x != x else result
