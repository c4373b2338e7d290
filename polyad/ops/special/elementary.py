"""Special functions with an Array API formula, so a generic kernel that runs on every backend and
device (SciPy's ufunc still serves CPU arrays where SciPy is installed: one loop, not a chain of calls):
the logistic functions ``expit``, ``logit``, ``log_expit``, ``softplus``; ``xlogy``, ``xlog1py``;
the entropies ``entr``, ``rel_entr``, ``kl_div``; the losses ``huber``, ``pseudo_huber``; ``sinc``,
``exp2``, ``exp10``, ``cbrt``. The kernels follow SciPy's values at the edges of each domain (``xlogy(0,
0) == 0``, ``entr(-1) == -inf``, ...) without floating-point warnings: branches that are not taken are
computed at a harmless point."""

import math

from polyad.ops.base import where
from polyad.ops.elementwise import abs, cos, log, log1p, sign, sqrt
from polyad.ops.special.shared import (
    ELEMENTWISE,
    REAL,
    docstring,
    kernel_arrays,
    series_or,
    special_function,
    unary_function,
)

_INF, _NAN = math.inf, math.nan

# ------------------------------------------------------------------------------ logistic


def _expit_kernel(xp, x):
    e = xp.exp(-xp.abs(x))  # never overflows
    r = 1.0 / (1.0 + e)
    return xp.where(x >= 0, r, e * r)


def _logit_kernel(xp, x):
    inside = (x > 0) & (x < 1)
    safe = xp.where(inside, x, 0.5)
    edge = xp.where(x == 0, -_INF, xp.where(x == 1, _INF, xp.full_like(x, _NAN)))
    return xp.where(inside, xp.log(safe / (1.0 - safe)), edge)


def _log1p_exp_minus_abs(xp, x):
    return xp.log1p(xp.exp(-xp.abs(x)))


expit = unary_function(
    "expit",
    lambda x, y: y * (1.0 - y),
    "The logistic sigmoid ``1 / (1 + exp(-x))``, without overflow for any ``x``.",
    ("[0.0, 2.0]", "array([0.5       , 0.88079708])"),
    "Derivative: ``expit(x) * (1 - expit(x))``.",
    generic=_expit_kernel,
)

logit = unary_function(
    "logit",
    lambda x, y: 1.0 / (x * (1.0 - x)),
    "The log-odds ``log(x / (1 - x))``, the inverse of ``expit``: -inf at 0, inf at 1, nan outside [0, 1].",
    ("[0.5, 0.9]", "array([0.        , 2.19722458])"),
    "Derivative: ``1 / (x (1 - x))``.",
    generic=_logit_kernel,
    args=(("x", "a real array of probabilities"),),
)

log_expit = unary_function(
    "log_expit",
    lambda x, y: expit(-x),
    "``log(expit(x))``, accurate for large negative ``x`` where ``expit`` underflows.",
    ("[0.0, -50.0]", "array([ -0.69314718, -50.        ])"),
    "Derivative: ``expit(-x)``.",
    generic=lambda xp, x: xp.minimum(x, 0.0) - _log1p_exp_minus_abs(xp, x),
)

softplus = unary_function(
    "softplus",
    lambda x, y: expit(x),
    "``log(1 + exp(x))``, without overflow for large ``x``.",
    ("[0.0, 50.0]", "array([ 0.69314718, 50.        ])"),
    "Derivative: ``expit(x)``.",
    generic=lambda xp, x: xp.maximum(x, 0.0) + _log1p_exp_minus_abs(xp, x),
)

# ------------------------------------------------------------------------------ x log y


def _x_log_kernel(logfn, pole):
    """``x * logfn(y)``, 0 where ``x == 0`` and ``y`` is not nan; ``logfn`` is -inf at ``y == pole`` and
    nan below, as in SciPy, without a floating-point warning."""

    def kernel(xp, x, y):
        x, y = kernel_arrays(xp, (x, y))
        inside = y > pole
        logs = getattr(xp, logfn)(xp.where(inside, y, pole + 1.0))
        logs = xp.where(inside, logs, xp.where(y == pole, -_INF, xp.full_like(y, _NAN)))
        zero = (x == 0) & ~xp.isnan(y)
        return xp.where(zero, 0.0, x * xp.where(zero, 0.0, logs))

    return kernel


_XY = (("x", REAL), ("y", REAL))

xlogy = special_function(
    "xlogy",
    ("x", "y"),
    (lambda x, y, out: log(y), lambda x, y, out: x / where(x == 0, 1.0, y)),
    generic=_x_log_kernel("log", 0.0),
    doc=docstring(
        "``x * log(y)``, defined as 0 where ``x == 0`` (also for ``y == 0``).",
        _XY,
        ELEMENTWISE,
        ("xlogy(np.array([0.0, 2.0]), np.array([0.0, 3.0]))", "array([0.        , 2.19722458])"),
        "Derivatives: ``log(y)`` in ``x``; ``x / y`` in ``y`` (0 where ``x == 0``).",
        kernels="both",
    ),
)

xlog1py = special_function(
    "xlog1py",
    ("x", "y"),
    (lambda x, y, out: log1p(y), lambda x, y, out: x / where(x == 0, 1.0, 1.0 + y)),
    generic=_x_log_kernel("log1p", -1.0),
    doc=docstring(
        "``x * log1p(y)``, defined as 0 where ``x == 0`` (also for ``y == -1``).",
        _XY,
        ELEMENTWISE,
        ("xlog1py(np.array([0.0, 2.0]), np.array([-1.0, 3.0]))", "array([0.        , 2.77258872])"),
        "Derivatives: ``log1p(y)`` in ``x``; ``x / (1 + y)`` in ``y`` (0 where ``x == 0``).",
        kernels="both",
    ),
)

# ------------------------------------------------------------------------------ entropies


def _entr_kernel(xp, x):
    pos = x > 0
    r = -x * xp.log(xp.where(pos, x, 1.0))
    return xp.where(pos, r, xp.where(x < 0, -_INF, x))  # x: 0 at 0, nan for nan


def _relative_kernel(extra):
    """``x log(x/y) + extra(x, y)`` for positive ``x`` and ``y``; ``extra(0, y)`` where ``x == 0`` and
    ``y >= 0``; inf elsewhere; nan for nan (``rel_entr``: no extra; ``kl_div``: ``y - x``)."""

    def kernel(xp, x, y):
        x, y = kernel_arrays(xp, (x, y))
        both = (x > 0) & (y > 0)
        ratio = xp.where(both, x, 1.0) / xp.where(both, y, 1.0)
        r = x * xp.where(ratio > 0, xp.log(xp.where(ratio > 0, ratio, 1.0)), -_INF)  # y = inf: -inf
        at_zero = xp.zeros_like(r)
        if extra:
            r = r - x + y
            at_zero = at_zero + y
        out = xp.where(both, r, xp.where((x == 0) & (y >= 0), at_zero, _INF))
        return xp.where(xp.isnan(x) | xp.isnan(y), _NAN, out)

    return kernel


entr = unary_function(
    "entr",
    lambda x, y: -(log(x) + 1.0),
    "The elementwise entropy ``-x log(x)``: 0 at 0, -inf for negative ``x``.",
    ("[0.0, 0.5]", "array([0.        , 0.34657359])"),
    "Derivative: ``-(log(x) + 1)``.",
    generic=_entr_kernel,
)

rel_entr = special_function(
    "rel_entr",
    ("x", "y"),
    (lambda x, y, out: log(x / y) + 1.0, lambda x, y, out: -x / y),
    generic=_relative_kernel(False),
    doc=docstring(
        "The relative entropy ``x log(x / y)`` for positive arguments; 0 where ``x == 0 <= y``; inf "
        "elsewhere.",
        _XY,
        ELEMENTWISE,
        ("rel_entr(np.array([0.0, 0.5]), np.array([0.5, 0.25]))", "array([0.        , 0.34657359])"),
        "Derivatives: ``log(x / y) + 1`` in ``x``; ``-x / y`` in ``y``.",
        kernels="both",
    ),
)

kl_div = special_function(
    "kl_div",
    ("x", "y"),
    (lambda x, y, out: log(x / y), lambda x, y, out: 1.0 - x / y),
    generic=_relative_kernel(True),
    doc=docstring(
        "The Kullback-Leibler term ``x log(x / y) - x + y`` for positive arguments; ``y`` where "
        "``x == 0 <= y``; inf elsewhere.",
        _XY,
        ELEMENTWISE,
        ("kl_div(np.array([0.0, 0.5]), np.array([0.5, 0.25]))", "array([0.5       , 0.09657359])"),
        "Derivatives: ``log(x / y)`` in ``x``; ``1 - x / y`` in ``y``.",
        kernels="both",
    ),
)

# ------------------------------------------------------------------------------ robust losses


def _huber_kernel(xp, delta, r):
    delta, r = kernel_arrays(xp, (delta, r))
    a = xp.abs(r)
    out = xp.where(a <= delta, 0.5 * r * r, delta * (a - 0.5 * delta))
    return xp.where(delta < 0, _INF, out)


def _pseudo_huber_kernel(xp, delta, r):
    delta, r = kernel_arrays(xp, (delta, r))
    d = xp.where(delta == 0, 1.0, delta)
    v = r / d
    # delta**2 (sqrt(1 + v**2) - 1) without its cancellation for small v
    out = xp.where(delta == 0, 0.0 * r, r * r / (1.0 + xp.sqrt(1.0 + v * v)))
    return xp.where(delta < 0, _INF, out)


def _pseudo_huber_ddelta(delta, r, y):
    # products, not powers: a NumPy ``delta`` (not differentiated) would take NumPy's pow here, a traced one
    # polyad's products (ops.elementwise.power_as_products), and the two differ in the last bit
    v = r / delta
    s = sqrt(1.0 + v * v)
    r2, t = r * r, s + 1.0
    return r2 * r2 / (delta * delta * delta * s * (t * t))


_DELTA_R = (("delta", "a real array, the width of the quadratic region"), ("r", REAL))

huber = special_function(
    "huber",
    ("delta", "r"),
    (
        lambda delta, r, y: where(abs(r) <= delta, 0.0, abs(r) - delta),
        lambda delta, r, y: where(abs(r) <= delta, r, delta * sign(r)),
    ),
    generic=_huber_kernel,
    doc=docstring(
        "The Huber loss: ``r**2 / 2`` where ``|r| <= delta``, else ``delta (|r| - delta/2)``; inf for "
        "negative ``delta``.",
        _DELTA_R,
        ELEMENTWISE,
        ("huber(1.0, np.array([0.5, 3.0]))", "array([0.125, 2.5  ])"),
        "Derivatives: ``r`` inside, ``delta sign(r)`` outside in ``r``; 0 inside, ``|r| - delta`` "
        "outside in ``delta``.",
        kernels="both",
    ),
)

pseudo_huber = special_function(
    "pseudo_huber",
    ("delta", "r"),
    (_pseudo_huber_ddelta, lambda delta, r, y: r / sqrt(1.0 + (r / delta) ** 2)),
    generic=_pseudo_huber_kernel,
    doc=docstring(
        "The pseudo-Huber loss ``delta**2 (sqrt(1 + (r/delta)**2) - 1)``, a smooth Huber loss.",
        _DELTA_R,
        ELEMENTWISE,
        ("pseudo_huber(1.0, np.array([0.5, 3.0]))", "array([0.11803399, 2.16227766])"),
        "Derivatives: ``r / s`` in ``r`` and ``r**4 / (delta**3 s (s + 1)**2)`` in ``delta``, with "
        "``s = sqrt(1 + (r/delta)**2)``.",
        kernels="both",
    ),
)

# ------------------------------------------------------------------------------ sinc, exp2, exp10, cbrt


def _sinc_kernel(xp, x):
    y = math.pi * xp.where(x == 0, 1.0, x)
    return xp.where(x == 0, 1.0, xp.sin(y) / y)


# sinc'(x) = x * sum_j c_j x**(2j), c_j = (-1)**(j+1) 2(j+1) pi**(2j+2) / (2j+3)!, to double precision
# for |x| < 0.5; outside, sinc'(x) = (cos(pi x) - sinc(x)) / x
_SINC_PRIME = [
    (-1) ** (j + 1) * 2 * (j + 1) * math.pi ** (2 * j + 2) / math.factorial(2 * j + 3) for j in range(12)
]


def _sinc_derivative(x, y):
    return x * series_or(x, _SINC_PRIME, lambda v: (cos(math.pi * v) - sinc(v)) / (v * v))


sinc = unary_function(
    "sinc",
    _sinc_derivative,
    "The normalised sinc function ``sin(pi x) / (pi x)``, 1 at 0.",
    ("[0.0, 0.5]", "array([1.        , 0.63661977])"),
    "Derivative: ``(cos(pi x) - sinc(x)) / x``, from its Taylor series near 0 (so that every "
    "higher derivative is right at 0 too).",
    generic=_sinc_kernel,
)

_LN2, _LN10 = math.log(2.0), math.log(10.0)

exp2 = unary_function(
    "exp2",
    lambda x, y: _LN2 * y,
    "``2**x``.",
    ("[0.5, 3.0]", "array([1.41421356, 8.        ])"),
    "Derivative: ``log(2) 2**x``.",
    generic=lambda xp, x: 2.0**x,
)

exp10 = unary_function(
    "exp10",
    lambda x, y: _LN10 * y,
    "``10**x``.",
    ("[0.5, 3.0]", "array([   3.16227766, 1000.        ])"),
    "Derivative: ``log(10) 10**x``.",
    generic=lambda xp, x: 10.0**x,
)

cbrt = unary_function(
    "cbrt",
    lambda x, y: 1.0 / (3.0 * y * y),
    "The real cube root, negative for negative ``x``.",
    ("[-8.0, 2.0]", "array([-2.        ,  1.25992105])"),
    "Derivative: ``1 / (3 cbrt(x)**2)``.",
    generic=lambda xp, x: xp.sign(x) * xp.abs(x) ** (1.0 / 3.0),
)
