"""Error functions, the normal distribution and the exponential integrals: ``erf``, ``erfc``, ``erfinv``,
``erfcx``, ``ndtr``, ``ndtri``, ``log_ndtr``, ``expi``, ``exp1``. SciPy kernels on CPU, cupyx on CUDA;
derivatives in closed form, written in polyad ops."""

import math

from polyad.ops.elementwise import exp
from polyad.ops.special.shared import ELEMENTWISE, REAL, docstring, special_function

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_SQRT_PI_OVER_2 = math.sqrt(math.pi) / 2.0
_SQRT_2PI = math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_SQRT_HALF = math.sqrt(0.5)
_X = (("x", REAL),)

erf = special_function(
    "erf",
    ("x",),
    (lambda x, y: _TWO_OVER_SQRT_PI * exp(-(x * x)),),
    doc=docstring(
        "The error function, ``2/sqrt(pi) * integral of exp(-t**2) from 0 to x``.",
        _X,
        ELEMENTWISE,
        ("erf(np.array([0.0, 0.5]))", "array([0.        , 0.52049988])"),
        "Derivative: ``2/sqrt(pi) * exp(-x**2)``.",
    ),
)

erfc = special_function(
    "erfc",
    ("x",),
    (lambda x, y: -_TWO_OVER_SQRT_PI * exp(-(x * x)),),
    doc=docstring(
        "The complementary error function, ``1 - erf(x)``, accurate where ``erf(x)`` is close to 1.",
        _X,
        ELEMENTWISE,
        ("erfc(np.array([0.0, 0.5]))", "array([1.        , 0.47950012])"),
        "Derivative: ``-2/sqrt(pi) * exp(-x**2)``.",
    ),
)

erfinv = special_function(
    "erfinv",
    ("x",),
    (lambda x, y: _SQRT_PI_OVER_2 * exp(y * y),),
    doc=docstring(
        "The inverse of ``erf`` on ``(-1, 1)``.",
        (("x", "a real array with values in [-1, 1]"),),
        ELEMENTWISE,
        ("erfinv(np.array([0.0, 0.5]))", "array([0.        , 0.47693628])"),
        "Derivative: ``sqrt(pi)/2 * exp(erfinv(x)**2)``.",
    ),
)

erfcx = special_function(
    "erfcx",
    ("x",),
    (lambda x, y: 2.0 * x * y - _TWO_OVER_SQRT_PI,),
    doc=docstring(
        "The scaled complementary error function, ``exp(x**2) * erfc(x)``, finite for large ``x``.",
        _X,
        ELEMENTWISE,
        ("erfcx(np.array([0.0, 10.0]))", "array([1.        , 0.05614099])"),
        "Derivative: ``2 x erfcx(x) - 2/sqrt(pi)``.",
    ),
)

ndtr = special_function(
    "ndtr",
    ("x",),
    (lambda x, y: exp(-0.5 * (x * x)) / _SQRT_2PI,),
    doc=docstring(
        "The standard normal cumulative distribution function.",
        _X,
        ELEMENTWISE,
        ("ndtr(np.array([0.0, 1.0]))", "array([0.5       , 0.84134475])"),
        "Derivative: the normal density ``exp(-x**2/2) / sqrt(2 pi)``.",
    ),
)

ndtri = special_function(
    "ndtri",
    ("y",),
    (lambda p, x: _SQRT_2PI * exp(0.5 * (x * x)),),
    doc=docstring(
        "The inverse of ``ndtr``: the standard normal quantile of probability ``y``.",
        (("y", "a real array of probabilities in [0, 1]"),),
        ELEMENTWISE,
        ("ndtri(np.array([0.5, 0.975]))", "array([0.        , 1.95996398])"),
        "Derivative: ``sqrt(2 pi) * exp(ndtri(y)**2 / 2)``.",
    ),
)

log_ndtr = special_function(
    "log_ndtr",
    ("x",),
    # d/dx log(ndtr(x)) = pdf / cdf = sqrt(2/pi) / erfcx(-x/sqrt(2)): no underflow as x -> -inf, where the
    # ratio of two vanishing numbers would be 0/0
    (lambda x, y: _SQRT_2_OVER_PI / erfcx(-_SQRT_HALF * x),),
    doc=docstring(
        "The log of the standard normal cumulative distribution function, accurate far into the left tail.",
        _X,
        ELEMENTWISE,
        ("log_ndtr(np.array([0.0, -40.0]))", "array([-6.93147181e-01, -8.04608442e+02])"),
        "Derivative: ``sqrt(2/pi) / erfcx(-x/sqrt(2))`` (the density over the distribution function, "
        "computed without underflow for very negative ``x``).",
    ),
)

expi = special_function(
    "expi",
    ("x",),
    (lambda x, y: exp(x) / x,),
    doc=docstring(
        "The exponential integral Ei: the principal value of ``integral of exp(t)/t from -inf to x``.",
        _X,
        ELEMENTWISE,
        ("expi(np.array([0.5, 2.0]))", "array([0.4542199 , 4.95423436])"),
        "Derivative: ``exp(x) / x``.",
    ),
)

exp1 = special_function(
    "exp1",
    ("x",),
    (lambda x, y: -exp(-x) / x,),
    doc=docstring(
        "The exponential integral E1: ``integral of exp(-x t)/t from 1 to inf``.",
        _X,
        ELEMENTWISE,
        ("exp1(np.array([0.5, 2.0]))", "array([0.55977359, 0.04890051])"),
        "Derivative: ``-exp(-x) / x``.",
    ),
)
