"""``gammasgn`` and ``zetac``, and the derivatives of ``zeta`` in its exponent.

``Z_m(x, q) = d^m/dx^m zeta(x, q) = sum((-log(k + q))**m (k + q)**-x for k >= 0)`` is summed directly
for ``k < N`` and by Euler-Maclaurin from ``A = N + q`` on: the integral of ``g(t) = (-log t)**m t**-x``
from ``A`` to infinity (``(-1)**m A**-s sum_j m!/j! log(A)**j / s**(m-j+1)``, ``s = x - 1``), ``g(A)/2``,
and the Bernoulli corrections ``-sum_j B_2j/(2j)! g^(2j-1)(A)``, whose ``t``-derivatives are ``t**(-x-r)``
times a polynomial in ``log t`` that a recurrence gives. An Array API kernel (every device type), of
every order ``m``: ``Z_m``'s derivative in ``x`` is ``Z_{m+1}``, in ``q`` ``-m Z_{m-1}(x+1, q) - x Z_m(x+1,
q)``. Defined for ``q > 0`` and ``x > 0`` (``x != 1``); nan elsewhere (Riemann's zeta below 0 would need
its functional equation).
"""

import math

from polyad.core import bind
from polyad.ops.fills import zeros_like
from polyad.ops.special.gammas import hurwitz_zeta_op
from polyad.ops.special.numerics import bernoulli_numbers, derivative_op
from polyad.ops.special.shared import LATER, kernel_arrays, unary_function

# --------------------------------------------------------------------------------------------- gammasgn


def _gammasgn_kernel(xp, x):
    # gamma > 0 on (0, inf) and on (-2k-2, -2k-1), < 0 on (-2k-1, -2k); SciPy: +-1 at +-0, nan at the
    # poles, at -inf and for nan
    ones = xp.ones_like(x)
    below = xp.where(xp.remainder(xp.floor(xp.where(xp.isfinite(x), x, 0.5)), 2.0) == 0, ones, -ones)
    pole = (x < 0) & (x == xp.floor(x))
    out = xp.where(x > 0, ones, xp.where(x == 0, xp.copysign(ones, x), below))
    return xp.where(pole | xp.isnan(x), math.nan, out)


gammasgn = unary_function(
    "gammasgn",
    lambda x, y: zeros_like(x),
    "The sign of the gamma function: 1 or -1 (nan at its poles, the non-positive integers but -0 and +0).",
    ("[0.5, -0.5]", "array([ 1., -1.])"),
    "Derivative: 0 (piecewise constant).",
    generic=_gammasgn_kernel,
)

# --------------------------------------------------------------------------------------------- Z_m

_DIRECT = 20  # N: terms summed directly
_CORRECTIONS = 12  # Bernoulli corrections B_2 .. B_24
_B = bernoulli_numbers(2 * _CORRECTIONS)
_EM = [float(_B[2 * j]) / math.factorial(2 * j) for j in range(1, _CORRECTIONS + 1)]


def _horner(xp, coeffs, t):
    out = coeffs[-1]
    for c in reversed(coeffs[:-1]):
        out = out * t + c
    return out


def _zeta_exponent_kernel(xp, x, q, *, order):
    """``Z_order(x, q)``, the ``order``-th derivative of Hurwitz's zeta in ``x``."""
    x, q = xp.broadcast_arrays(*kernel_arrays(xp, (x, q)))
    m = order
    valid = (q > 0) & (x > 0) & (x != 1) & xp.isfinite(x) & xp.isfinite(q)
    x, q = xp.where(valid, x, 2.0), xp.where(valid, q, 1.0)
    sign = float((-1) ** m)
    total = xp.zeros_like(x)
    for k in range(_DIRECT):
        lt = xp.log(q + float(k))
        total = total + sign * lt**m * xp.exp(-x * lt)
    la = xp.log(q + float(_DIRECT))
    s = x - 1.0
    tail = sum(math.factorial(m) / math.factorial(j) * la**j / s ** (m - j + 1) for j in range(m + 1))
    total = total + sign * xp.exp(-s * la) * tail
    # g^(r)(A) = A**(-x-r) P_r(log A); P_0(L) = (-L)**m, P_{r+1} = (-x-r) P_r + P_r'
    poly = [xp.zeros_like(x)] * m + [sign * xp.ones_like(x)]
    total = total + 0.5 * xp.exp(-x * la) * _horner(xp, poly, la)
    for r in range(2 * _CORRECTIONS - 1):
        poly = [
            (-x - float(r)) * poly[i] + (float(i + 1) * poly[i + 1] if i < m else 0.0) for i in range(m + 1)
        ]
        if r % 2 == 0:  # poly is P_{r+1}, r + 1 odd
            j = r // 2
            total = total - _EM[j] * xp.exp(-(x + float(r + 1)) * la) * _horner(xp, poly, la)
    return xp.where(valid, total, math.nan)


def _zeta_exponent_partials(order):
    def in_q(x, q, y):
        lower = bind(hurwitz_zeta_op, x + 1.0, q) if order == 1 else zeta_exponent(x + 1.0, q, order - 1)
        return -float(order) * lower - x * zeta_exponent(x + 1.0, q, order)

    return (lambda x, q, y: zeta_exponent(x, q, order + 1), in_q)


_zeta_exponent = derivative_op(
    "zeta_exponent", "zeta", ("x", "q"), _zeta_exponent_partials, _zeta_exponent_kernel
)


def zeta_exponent(x, q, order=1):
    """``d^order zeta(x, q) / dx^order`` in polyad ops (``q`` 1.0: Riemann's zeta)."""
    return _zeta_exponent.bind(x, q, order=order)


LATER.update(
    {
        "zeta.x": lambda x, q, y: zeta_exponent(x, q),
        "riemann_zeta.x": lambda x, y: zeta_exponent(x, 1.0),
    }
)

# --------------------------------------------------------------------------------------------- zetac

zetac = unary_function(
    "zetac",
    lambda x, y: zeta_exponent(x, 1.0),
    "Riemann's zeta function minus 1, accurate where ``zeta(x)`` is close to 1.",
    ("[2.0, 40.0]", "array([6.44934067e-01, 9.09494784e-13])"),
    "Derivative: ``d zeta(x) / dx`` by Euler-Maclaurin summation (for ``x > 0``), of every order.",
)

__all__ = ["gammasgn", "zeta_exponent", "zetac"]
