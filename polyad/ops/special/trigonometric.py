"""Trigonometric functions of angles in degrees (``sindg``, ``cosdg``, ``tandg``, ``cotdg``), ``radian``
(degrees, minutes, seconds to radians) and ``cosm1`` (``cos(x) - 1`` without cancellation).

Generic kernels: the angle is reduced exactly (``x mod 360``, then to the nearest multiple of 90 degrees:
both exact in floating point), so multiples of 90 degrees give exact zeros and ones as SciPy's do;
``tandg`` and ``cotdg`` are inf at their poles (SciPy's sign: +inf), without a division by zero; beyond
``|x| > 1e14`` degrees (inf included) all four are 0, SciPy's "total loss of precision" value.
Derivatives in closed form within the family (``sindg' = pi/180 cosdg``...), so of every order.
"""

import math

from polyad.ops.elementwise import sin
from polyad.ops.special.shared import (
    ELEMENTWISE,
    REAL,
    docstring,
    kernel_arrays,
    special_function,
    unary_function,
)

_DEG = math.pi / 180.0

# --------------------------------------------------------------------------------------------- kernels


def _quadrant(xp, x):
    """``(quarter, theta)``: ``x`` degrees is ``90 quarter + theta`` (mod 360), ``quarter`` in 0..3 and
    ``theta`` in radians within [-pi/4, pi/4]."""
    r = xp.remainder(x, 360.0)
    k = xp.round(r / 90.0)
    theta = (r - 90.0 * k) * _DEG
    return xp.remainder(k, 4.0), theta


_LOSS = 1e14  # SciPy's total loss of precision: beyond it, every function here is 0 (inf included)


def _sin_cos_degrees(xp, x):
    lost = xp.abs(x) > _LOSS
    k, theta = _quadrant(xp, xp.where(lost, 0.0, x))
    s, c = xp.sin(theta), xp.cos(theta)
    sin_x = xp.where(k == 0, s, xp.where(k == 1, c, xp.where(k == 2, -s, -c)))
    cos_x = xp.where(k == 0, c, xp.where(k == 1, -s, xp.where(k == 2, -c, s)))
    return sin_x, cos_x, lost


def _ratio(xp, num, den, lost):
    """``num / den``, +inf where ``den`` is 0 (SciPy's value at the poles of ``tandg`` and ``cotdg``)."""
    pole = den == 0
    return xp.where(lost, 0.0, xp.where(pole, math.inf, num / xp.where(pole, 1.0, den)))


def _lost(xp, value, lost):
    return xp.where(lost, 0.0, value)


def _cos_sin_degrees(xp, x):
    s, c, lost = _sin_cos_degrees(xp, x)
    return c, s, lost


def _radian_kernel(xp, d, m, s):
    d, m, s = kernel_arrays(xp, (d, m, s))
    return (d + (m + s / 60.0) / 60.0) * _DEG


# --------------------------------------------------------------------------------------------- functions

_ANGLE = (("x", "a real array of angles in degrees"),)

sindg = unary_function(
    "sindg",
    lambda x, y: _DEG * cosdg(x),
    "The sine of an angle in degrees (exactly 0 at multiples of 180, 1 at 90).",
    ("[30.0, 90.0]", "array([0.5, 1. ])"),
    "Derivative: ``pi/180 cosdg(x)``.",
    generic=lambda xp, x: _lost(xp, *_sin_cos_degrees(xp, x)[::2]),
    args=_ANGLE,
)

cosdg = unary_function(
    "cosdg",
    lambda x, y: -_DEG * sindg(x),
    "The cosine of an angle in degrees (exactly 0 at odd multiples of 90).",
    ("[60.0, 180.0]", "array([ 0.5, -1. ])"),
    "Derivative: ``-pi/180 sindg(x)``.",
    generic=lambda xp, x: _lost(xp, *_sin_cos_degrees(xp, x)[1:]),
    args=_ANGLE,
)

tandg = unary_function(
    "tandg",
    lambda x, y: _DEG * (1.0 + y * y),
    "The tangent of an angle in degrees; inf at odd multiples of 90.",
    ("[45.0, 135.0]", "array([ 1., -1.])"),
    "Derivative: ``pi/180 (1 + tandg(x)**2)``.",
    generic=lambda xp, x: _ratio(xp, *_sin_cos_degrees(xp, x)),
    args=_ANGLE,
)

cotdg = unary_function(
    "cotdg",
    lambda x, y: -_DEG * (1.0 + y * y),
    "The cotangent of an angle in degrees; inf at multiples of 180.",
    ("[45.0, 135.0]", "array([ 1., -1.])"),
    "Derivative: ``-pi/180 (1 + cotdg(x)**2)``.",
    generic=lambda xp, x: _ratio(xp, *_cos_sin_degrees(xp, x)),
    args=_ANGLE,
)

radian = special_function(
    "radian",
    ("d", "m", "s"),
    (lambda d, m, s, y: _DEG, lambda d, m, s, y: _DEG / 60.0, lambda d, m, s, y: _DEG / 3600.0),
    generic=_radian_kernel,
    doc=docstring(
        "An angle given in degrees ``d``, minutes ``m`` and seconds ``s``, in radians.",
        (("d", REAL), ("m", REAL), ("s", REAL)),
        ELEMENTWISE,
        ("radian(np.array([90.0, 0.0]), 0.0, np.array([0.0, 3600.0]))", "array([1.57079633, 0.01745329])"),
        "Derivatives: ``pi/180``, ``pi/(180*60)`` and ``pi/(180*3600)``.",
        kernels="both",
    ),
)

cosm1 = unary_function(
    "cosm1",
    lambda x, y: -sin(x),
    "``cos(x) - 1``, accurate for small ``x`` where ``cos(x)`` is close to 1.",
    ("[1e-08, 3.141592653589793]", "array([-5.e-17, -2.e+00])"),
    "Derivative: ``-sin(x)``.",
    generic=lambda xp, x: -2.0 * xp.sin(0.5 * x) ** 2,
)

__all__ = ["cosdg", "cosm1", "cotdg", "radian", "sindg", "tandg"]
