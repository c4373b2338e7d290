"""Bessel functions of orders 0 and 1: modified (``i0``, ``i1``, ``k0``, ``k1`` and their exponentially
scaled ``i0e``, ``i1e``, ``k0e``, ``k1e``) and of the first and second kind (``j0``, ``j1``, ``y0``,
``y1``). SciPy kernels on CPU, cupyx on CUDA.

Derivatives close over the family: ``i0' = i1``, ``i1' = i0 - i1/x``, ``j0' = -j1``, ``k0' = -k1``...
``i1(x)/x`` and ``j1(x)/x`` are taken from their Taylor series near 0, so every derivative order is right
at 0 as well (the first and second kind of order 1 are regular there; ``y`` and ``k`` are not).
"""

from polyad.ops.elementwise import abs, exp, sign
from polyad.ops.special.shared import bessel_ratio_coeffs, series_or, unary_function

_I_RATIO = bessel_ratio_coeffs(1)  # i1(x) / x
_J_RATIO = bessel_ratio_coeffs(-1)  # j1(x) / x
_POSITIVE = (("x", "a real array, positive"),)


def _bessel(name, partial, summary, example, derivative, args=None):
    return unary_function(name, partial, summary, ("[0.5, 2.0]", example), derivative, args=args)


def _i1_over_x(x):
    return series_or(x, _I_RATIO, lambda v: i1(v) / v)


def _i1e_over_x(x):
    return series_or(x, _I_RATIO, lambda v: i1e(v) / v, scale=lambda v: exp(-abs(v)))


i0 = _bessel(
    "i0",
    lambda x, y: i1(x),
    "The modified Bessel function of the first kind of order 0.",
    "array([1.06348337, 2.2795853 ])",
    "Derivative: ``i1(x)``.",
)
i0e = _bessel(
    "i0e",
    lambda x, y: i1e(x) - sign(x) * y,
    "The exponentially scaled modified Bessel function of order 0, ``exp(-|x|) i0(x)``.",
    "array([0.64503527, 0.30850832])",
    "Derivative: ``i1e(x) - sign(x) i0e(x)``.",
)
i1 = _bessel(
    "i1",
    lambda x, y: i0(x) - _i1_over_x(x),
    "The modified Bessel function of the first kind of order 1.",
    "array([0.25789431, 1.59063685])",
    "Derivative: ``i0(x) - i1(x)/x`` (1/2 at 0).",
)
i1e = _bessel(
    "i1e",
    lambda x, y: i0e(x) - sign(x) * y - _i1e_over_x(x),
    "The exponentially scaled modified Bessel function of order 1, ``exp(-|x|) i1(x)``.",
    "array([0.1564208 , 0.21526929])",
    "Derivative: ``i0e(x) - sign(x) i1e(x) - i1e(x)/x``.",
)
j0 = _bessel(
    "j0",
    lambda x, y: -j1(x),
    "The Bessel function of the first kind of order 0.",
    "array([0.93846981, 0.22389078])",
    "Derivative: ``-j1(x)``.",
)
j1 = _bessel(
    "j1",
    lambda x, y: j0(x) - series_or(x, _J_RATIO, lambda v: j1(v) / v),
    "The Bessel function of the first kind of order 1.",
    "array([0.24226846, 0.57672481])",
    "Derivative: ``j0(x) - j1(x)/x`` (1/2 at 0).",
)
y0 = _bessel(
    "y0",
    lambda x, y: -y1(x),
    "The Bessel function of the second kind of order 0.",
    "array([-0.44451873,  0.51037567])",
    "Derivative: ``-y1(x)``.",
    _POSITIVE,
)
y1 = _bessel(
    "y1",
    lambda x, y: y0(x) - y / x,
    "The Bessel function of the second kind of order 1.",
    "array([-1.47147239, -0.10703243])",
    "Derivative: ``y0(x) - y1(x)/x``.",
    _POSITIVE,
)
k0 = _bessel(
    "k0",
    lambda x, y: -k1(x),
    "The modified Bessel function of the second kind of order 0.",
    "array([0.92441907, 0.11389387])",
    "Derivative: ``-k1(x)``.",
    _POSITIVE,
)
k0e = _bessel(
    "k0e",
    lambda x, y: y - k1e(x),
    "The exponentially scaled modified Bessel function of the second kind of order 0, ``exp(x) k0(x)``.",
    "array([1.52410939, 0.84156822])",
    "Derivative: ``k0e(x) - k1e(x)``.",
    _POSITIVE,
)
k1 = _bessel(
    "k1",
    lambda x, y: -k0(x) - y / x,
    "The modified Bessel function of the second kind of order 1.",
    "array([1.65644112, 0.13986588])",
    "Derivative: ``-k0(x) - k1(x)/x``.",
    _POSITIVE,
)
k1e = _bessel(
    "k1e",
    lambda x, y: y - k0e(x) - y / x,
    "The exponentially scaled modified Bessel function of the second kind of order 1, ``exp(x) k1(x)``.",
    "array([2.73100971, 1.03347685])",
    "Derivative: ``k1e(x) - k0e(x) - k1e(x)/x``.",
    _POSITIVE,
)
