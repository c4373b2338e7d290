"""The generalised exponential integral ``expn(n, x) = integral of exp(-x t) / t**n over [1, inf)`` and
Spence's function (the dilogarithm) ``spence(z) = integral of log(t) / (1 - t) over [1, z]``.

``expn``: SciPy on CPU arrays, cupyx on CUDA arrays. Its derivative in ``x`` is ``-expn(n - 1, x)``; where
``n - 1 <= 0``, SciPy's ``expn`` has no value, and ``E_k(x) = x**(k-1) gamma(1-k) gammaincc(1-k, x)``
(``k < 1``) takes over, so every order is there. None in the integer order ``n``.

``spence``: SciPy on CPU arrays, and a generic kernel: ``spence(z) = Li2(1 - z)``, with ``Li2(w) =
sum_n B_n u**(n+1) / (n+1)!`` (``u = -log(1 - w)``, Bernoulli numbers) for ``w <= 1/2``, Euler's
reflection ``Li2(w) = pi**2/6 - log(w) log(1-w) - Li2(1-w)`` above, and Landen's ``Li2(w) = -Li2(w/(w-1))
- log(1-w)**2 / 2`` for ``z > 1`` (``w < 0``); nan for ``z < 0`` and at inf, as SciPy's. Its derivative
``log(z) / (1 - z)`` is taken from its Taylor series near ``z = 1`` (where it is 0/0), so of every order.
"""

import math

from polyad.ops.base import where
from polyad.ops.elementwise import log1p
from polyad.ops.special.gammas import gamma, gammaincc
from polyad.ops.special.numerics import PI2_6, bernoulli_numbers, power_series, series_or_exact
from polyad.ops.special.shared import ELEMENTWISE, NoDerivative, docstring, special_function, unary_function

# --------------------------------------------------------------------------------------------- expn


def _expn_below(n, x):
    """``E_{n-1}(x)`` for integer ``n``: SciPy's ``expn`` where ``n >= 2``, the incomplete gamma form
    elsewhere (``n - 1 <= 0``)."""
    high = n >= 2.0
    n_low = where(high, 1.0, n)
    low = x ** (n_low - 2.0) * gamma(2.0 - n_low) * gammaincc(2.0 - n_low, x)
    return where(high, expn(where(high, n, 2.0) - 1.0, x), low)


expn = special_function(
    "expn",
    ("n", "x"),
    (NoDerivative("n is an integer order"), lambda n, x, y: -_expn_below(n, x)),
    doc=docstring(
        "The generalised exponential integral ``E_n(x)``: the integral of ``exp(-x t) / t**n`` over "
        "``[1, inf)``, for integer orders ``n >= 0``.",
        (("n", "non-negative integer orders (an int or an array)"), ("x", "a real array, non-negative")),
        ELEMENTWISE,
        ("expn(2, np.array([0.5, 2.0]))", "array([0.32664386, 0.03753426])"),
        "Derivative: ``-expn(n - 1, x)`` in ``x`` (every order); none in ``n``.",
    ),
)

# --------------------------------------------------------------------------------------------- spence

_B = bernoulli_numbers(24)
# Li2(w) = sum_n B_n u**(n+1) / (n+1)!, u = -log(1 - w) in [0, log 2]: coefficients of u**k, k = 0..25
_LI2 = [0.0] + [float(_B[n]) / math.factorial(n + 1) for n in range(25)]
# log(z) / (1 - z) = -sum_k (-1)**k w**k / (k + 1), w = z - 1
_SPENCE_PRIME = [-((-1) ** k) / (k + 1) for k in range(48)]


def _spence_kernel(xp, z):
    above = z > 1.0
    valid = (z >= 0) & (z < math.inf)  # SciPy: nan at inf too
    z_safe = xp.where(valid, z, 0.5)
    v = xp.where(above, 1.0 / xp.where(above, z_safe, 1.0), z_safe)  # 1 - w, exactly: Li2(w) is wanted
    # Li2(w) for w in [0, 1]: the series in u where w <= 1/2 (v >= 1/2), Euler's reflection elsewhere
    near = v >= 0.5
    u_far = -xp.log(xp.where(near, v, 1.0))  # u of w = 1 - v
    u_reflected = -xp.log1p(-xp.where(near, 0.5, v))  # u of 1 - w = v
    log_v = xp.log(xp.where(v > 0, v, 1.0))
    reflected = PI2_6 - xp.log1p(-xp.where(near, 0.5, v)) * log_v - power_series(u_reflected, _LI2)
    li2 = xp.where(near, power_series(u_far, _LI2), xp.where(v == 0, PI2_6, reflected))
    out = xp.where(above, -li2 - 0.5 * xp.log(xp.where(above, z_safe, 1.0)) ** 2, li2)
    return xp.where(valid, out, math.nan)


spence = unary_function(
    "spence",
    lambda z, y: series_or_exact(z - 1.0, _SPENCE_PRIME, lambda w: log1p(w) / -w, 0.25),
    "Spence's function (the dilogarithm ``Li2(1 - z)``): the integral of ``log(t) / (1 - t)`` over "
    "``[1, z]``, for ``z >= 0`` (nan below).",
    ("[0.5, 2.0]", "array([ 0.58224053, -0.82246703])"),
    "Derivative: ``log(z) / (1 - z)`` (-1 at ``z = 1``, by its series; every order).",
    generic=_spence_kernel,
    args=(("z", "a real array, non-negative"),),
)

__all__ = ["expn", "spence"]
