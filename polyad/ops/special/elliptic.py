"""Complete elliptic integrals: ``ellipk`` (first kind, ``K(m)``), ``ellipkm1`` (``K(1 - p)``, accurate near
``m = 1``) and ``ellipe`` (second kind, ``E(m)``, which the derivative of ``K`` needs; SciPy has it
too, but does not look it up on a namespace).

Generic kernels by the arithmetic-geometric mean: ``K(m) = pi / (2 agm(1, sqrt(1 - m)))`` and ``E(m) =
K(m) (1 - sum_n 2**(n-1) c_n**2)`` with ``c_0**2 = m`` and ``c_{n+1} = (a_n - b_n)/2`` (``ellipkm1``
takes ``sqrt(p)`` directly, without forming ``1 - p``). Derivatives: ``K' = (E - (1-m) K) / (2m(1-m))``
and ``E' = (E - K) / (2m)``, each from its Taylor series near ``m = 0`` where the formula is 0/0, so of
every order.
"""

import math

from polyad.ops.base import where
from polyad.ops.elementwise import abs
from polyad.ops.special.numerics import power_series, series_or_exact
from polyad.ops.special.shared import unary_function

_AGM_STEPS = 30  # quadratic convergence: enough from sqrt(1 - m) = 1e-154 to 1e154


def _c(n):
    """``((2n)! / (2**(2n) n!**2))**2``: ``K(m) = pi/2 sum c_n m**n``."""
    return (math.comb(2 * n, n) / 4.0**n) ** 2


_TERMS = 40
_DK = [math.pi / 2 * (j + 1) * _c(j + 1) for j in range(_TERMS)]  # K'(m) = sum _DK[j] m**j
_DE = [math.pi / 2 * (j + 1) * _c(j + 1) / (1 - 2 * (j + 1)) for j in range(_TERMS)]  # E'(m)
_CUTOFF = 0.25

# --------------------------------------------------------------------------------------------- kernels


def _agm_k(xp, b):
    """``pi / (2 agm(1, b))``."""
    a = xp.ones_like(b)
    for _ in range(_AGM_STEPS):
        a, b = 0.5 * (a + b), xp.sqrt(a * b)
    return math.pi / (2.0 * a)


def _ellipk_kernel(xp, m):
    inside = m < 1
    k = _agm_k(xp, xp.sqrt(xp.where(inside, 1.0 - m, 1.0)))
    return xp.where(inside, k, xp.where(m == 1, math.inf, xp.full_like(k, math.nan)))


def _ellipkm1_kernel(xp, p):
    inside = p > 0
    k = _agm_k(xp, xp.sqrt(xp.where(inside, p, 1.0)))
    return xp.where(inside, k, xp.where(p == 0, math.inf, xp.full_like(k, math.nan)))


def _ellipe_kernel(xp, m):
    inside = m < 1
    m_safe = xp.where(inside, m, 0.0)
    a, b = xp.ones_like(m), xp.sqrt(1.0 - m_safe)
    total = 0.5 * m_safe
    weight = 0.5
    for _ in range(_AGM_STEPS):
        c = 0.5 * (a - b)
        a, b = 0.5 * (a + b), xp.sqrt(a * b)
        weight = 2.0 * weight
        total = total + weight * c * c
    e = math.pi / (2.0 * a) * (1.0 - total)
    return xp.where(inside, e, xp.where(m == 1, 1.0, xp.full_like(e, math.nan)))


# --------------------------------------------------------------------------------------------- derivatives


def _dk(m):
    """``K'(m)`` in polyad ops."""
    return series_or_exact(
        m, _DK, lambda v: (ellipe(v) - (1.0 - v) * ellipk(v)) / (2.0 * v * (1.0 - v)), _CUTOFF
    )


def _dk_m1(p):
    """``d K(1 - p) / dp = -K'(1 - p)``, written in ``p`` where ``1 - p`` would round (``m`` near 1)."""
    m = 1.0 - p
    small = abs(m) < _CUTOFF
    p_safe = where(small, 1.0 - _CUTOFF, p)
    m_safe = 1.0 - p_safe
    exact = (ellipe(m_safe) - p_safe * ellipkm1(p_safe)) / (2.0 * m_safe * p_safe)
    return -where(small, power_series(where(small, m, 0.0), _DK), exact)


def _de(m):
    """``E'(m)`` in polyad ops."""
    return series_or_exact(m, _DE, lambda v: (ellipe(v) - ellipk(v)) / (2.0 * v), _CUTOFF)


# --------------------------------------------------------------------------------------------- functions

_M = (("m", "a real array of parameters ``m = k**2``, at most 1"),)

ellipk = unary_function(
    "ellipk",
    lambda m, y: _dk(m),
    "The complete elliptic integral of the first kind ``K(m)``: the integral of ``(1 - m sin(t)**2)**-1/2`` "
    "over ``[0, pi/2]``; inf at ``m = 1``.",
    ("[0.0, 0.5]", "array([1.57079633, 1.85407468])"),
    "Derivative: ``(E(m) - (1 - m) K(m)) / (2 m (1 - m))`` (``pi/8`` at 0, by its series).",
    generic=_ellipk_kernel,
    args=_M,
)

ellipkm1 = unary_function(
    "ellipkm1",
    lambda p, y: _dk_m1(p),
    "``K(1 - p)``, the complete elliptic integral of the first kind near ``m = 1``.",
    ("[1.0, 1e-10]", "array([ 1.57079633, 12.89921983])"),
    "Derivative: ``-K'(1 - p)``.",
    generic=_ellipkm1_kernel,
    args=(("p", "a real array, ``1 - m``, non-negative"),),
)

ellipe = unary_function(
    "ellipe",
    lambda m, y: _de(m),
    "The complete elliptic integral of the second kind ``E(m)``: the integral of ``(1 - m sin(t)**2)**1/2`` "
    "over ``[0, pi/2]``.",
    ("[0.0, 0.5]", "array([1.57079633, 1.35064388])"),
    "Derivative: ``(E(m) - K(m)) / (2 m)`` (``-pi/8`` at 0, by its series).",
    generic=_ellipe_kernel,
    args=_M,
)

__all__ = ["ellipe", "ellipk", "ellipkm1"]
