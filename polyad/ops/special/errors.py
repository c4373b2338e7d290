"""Error functions, the normal distribution and the exponential integrals: ``erf``, ``erfc``, ``erfinv``,
``erfcx``, ``ndtr``, ``ndtri``, ``log_ndtr``, ``expi``, ``exp1``. SciPy kernels on CPU, cupyx on CUDA;
derivatives in closed form, written in polyad ops."""

import math

from polyad.ops.elementwise import exp
from polyad.ops.special.shared import unary_function

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_SQRT_PI_OVER_2 = math.sqrt(math.pi) / 2.0
_SQRT_2PI = math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_SQRT_HALF = math.sqrt(0.5)

erf = unary_function(
    "erf",
    lambda x, y: _TWO_OVER_SQRT_PI * exp(-(x * x)),
    "The error function, ``2/sqrt(pi) * integral of exp(-t**2) from 0 to x``.",
    ("[0.0, 0.5]", "array([0.        , 0.52049988])"),
    "Derivative: ``2/sqrt(pi) * exp(-x**2)``.",
)
erfc = unary_function(
    "erfc",
    lambda x, y: -_TWO_OVER_SQRT_PI * exp(-(x * x)),
    "The complementary error function, ``1 - erf(x)``, accurate where ``erf(x)`` is close to 1.",
    ("[0.0, 0.5]", "array([1.        , 0.47950012])"),
    "Derivative: ``-2/sqrt(pi) * exp(-x**2)``.",
)
erfinv = unary_function(
    "erfinv",
    lambda x, y: _SQRT_PI_OVER_2 * exp(y * y),
    "The inverse of ``erf`` on ``(-1, 1)``.",
    ("[0.0, 0.5]", "array([0.        , 0.47693628])"),
    "Derivative: ``sqrt(pi)/2 * exp(erfinv(x)**2)``.",
    args=(("x", "a real array with values in [-1, 1]"),),
)
erfcx = unary_function(
    "erfcx",
    lambda x, y: 2.0 * x * y - _TWO_OVER_SQRT_PI,
    "The scaled complementary error function, ``exp(x**2) * erfc(x)``, finite for large ``x``.",
    ("[0.0, 10.0]", "array([1.        , 0.05614099])"),
    "Derivative: ``2 x erfcx(x) - 2/sqrt(pi)``.",
)
ndtr = unary_function(
    "ndtr",
    lambda x, y: exp(-0.5 * (x * x)) / _SQRT_2PI,
    "The standard normal cumulative distribution function.",
    ("[0.0, 1.0]", "array([0.5       , 0.84134475])"),
    "Derivative: the normal density ``exp(-x**2/2) / sqrt(2 pi)``.",
)
ndtri = unary_function(
    "ndtri",
    lambda p, x: _SQRT_2PI * exp(0.5 * (x * x)),
    "The inverse of ``ndtr``: the standard normal quantile of probability ``y``.",
    ("[0.5, 0.975]", "array([0.        , 1.95996398])"),
    "Derivative: ``sqrt(2 pi) * exp(ndtri(y)**2 / 2)``.",
    args=(("y", "a real array of probabilities in [0, 1]"),),
)
log_ndtr = unary_function(
    "log_ndtr",
    # d/dx log(ndtr(x)) = pdf / cdf = sqrt(2/pi) / erfcx(-x/sqrt(2)): no underflow as x -> -inf, where the
    # ratio of two vanishing numbers would be 0/0
    lambda x, y: _SQRT_2_OVER_PI / erfcx(-_SQRT_HALF * x),
    "The log of the standard normal cumulative distribution function, accurate far into the left tail.",
    ("[0.0, -40.0]", "array([-6.93147181e-01, -8.04608442e+02])"),
    "Derivative: ``sqrt(2/pi) / erfcx(-x/sqrt(2))`` (the density over the distribution function, "
    "computed without underflow for very negative ``x``).",
)
expi = unary_function(
    "expi",
    lambda x, y: exp(x) / x,
    "The exponential integral Ei: the principal value of ``integral of exp(t)/t from -inf to x``.",
    ("[0.5, 2.0]", "array([0.4542199 , 4.95423436])"),
    "Derivative: ``exp(x) / x``.",
)
exp1 = unary_function(
    "exp1",
    lambda x, y: -exp(-x) / x,
    "The exponential integral E1: ``integral of exp(-x t)/t from 1 to inf``.",
    ("[0.5, 2.0]", "array([0.55977359, 0.04890051])"),
    "Derivative: ``-exp(-x) / x``.",
)
