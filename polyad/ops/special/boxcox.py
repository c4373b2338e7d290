"""``exprel`` and the Box-Cox transformations: ``boxcox``, ``boxcox1p`` and their inverses ``inv_boxcox``,
``inv_boxcox1p``, differentiable in ``lmbda`` as well as in the data.

Each is written through two functions with a removable singularity at 0: ``exprel(u) = (e**u - 1)/u``
and ``L(v) = log1p(v)/v`` (both 1 at 0). ``boxcox(x, l) = log(x) exprel(l log(x))`` and ``inv_boxcox(y,
l) = exp(y L(l y))``, so the derivatives in ``lmbda`` are ``log(x)**2 exprel'(l log(x))`` and ``inv_boxcox
y**2 L'(l y)``, where ``exprel'`` and ``L'`` come from their Taylor series near 0 (``numerics.series_or_
exact``): exact at ``lmbda == 0``, where SciPy switches to ``log``, and to every order. Generic kernels
follow SciPy's values at the edges (``boxcox(0, l)``, ``inv_boxcox`` outside its domain) without a
floating-point warning.
"""

import math

from polyad.ops.elementwise import exp, log, log1p
from polyad.ops.special.numerics import series_or_exact
from polyad.ops.special.shared import ELEMENTWISE, docstring, kernel_arrays, special_function, unary_function

_OVERFLOW = 1024 * math.log(2.0)  # expm1 overflows past this

# --------------------------------------------------------------------------------------------- exprel

# exprel'(u) = ((u - 1) e**u + 1) / u**2 = sum_j (j + 1) u**j / (j + 2)!
_EXPREL_PRIME = [(j + 1) / math.factorial(j + 2) for j in range(20)]
# L'(v) = (v/(1 + v) - log1p(v)) / v**2 = sum_j (-1)**(j+1) (j + 1) v**j / (j + 2)
_L_PRIME = [(-1) ** (j + 1) * (j + 1) / (j + 2) for j in range(48)]


def exprel_prime(u):
    """``exprel'(u)`` in polyad ops, exact at 0 and differentiable again."""
    return series_or_exact(u, _EXPREL_PRIME, lambda v: ((v - 1.0) * exp(v) + 1.0) / (v * v), 0.5)


def _log1p_ratio_prime(v):
    """``L'(v)`` for ``L(v) = log1p(v) / v``, in polyad ops."""
    return series_or_exact(v, _L_PRIME, lambda w: (w / (1.0 + w) - log1p(w)) / (w * w), 0.25)


def _exprel_kernel(xp, x):
    big = x > _OVERFLOW
    safe = xp.where((x == 0) | big, 1.0, x)
    return xp.where(x == 0, 1.0, xp.where(big, math.inf, xp.expm1(safe) / safe))


exprel = unary_function(
    "exprel",
    lambda x, y: exprel_prime(x),
    "The relative error exponential ``(exp(x) - 1) / x``, 1 at 0.",
    ("[0.0, 1.0]", "array([1.        , 1.71828183])"),
    "Derivative: ``((x - 1) exp(x) + 1) / x**2``, from its Taylor series near 0 (every order).",
    generic=_exprel_kernel,
)

# --------------------------------------------------------------------------------------------- Box-Cox


def _safe_log(xp, x, log_fn, pole):
    """``log_fn(x)``: -inf at ``x == pole``, nan below, without a warning."""
    inside = x > pole
    out = getattr(xp, log_fn)(xp.where(inside, x, pole + 1.0))
    return xp.where(inside, out, xp.where(x == pole, -math.inf, xp.full_like(out, math.nan)))


def _boxcox_kernel(log_fn, pole):
    """``(x**l - 1) / l`` (``log(x)`` at ``l == 0``) with ``log_fn``'s log of ``x``: ``log`` (``boxcox``,
    pole 0) or ``log1p`` (``boxcox1p``, pole -1); at the pole ``-1/l`` for ``l > 0``, -inf otherwise."""

    def kernel(xp, x, lmbda):
        x, lmbda = kernel_arrays(xp, (x, lmbda))
        lx = _safe_log(xp, x, log_fn, pole)
        finite = xp.isfinite(lx)
        lx_safe = xp.where(finite, lx, 1.0)
        out = lx_safe * _exprel_kernel(xp, lmbda * lx_safe)
        positive = lmbda > 0
        at_pole = xp.where(positive, -1.0 / xp.where(positive, lmbda, 1.0), -math.inf)
        negative = lmbda < 0  # x = inf: x**lmbda is 0
        at_inf = xp.where(negative, -1.0 / xp.where(negative, lmbda, 1.0), math.inf)
        edges = xp.where(x == pole, at_pole, xp.where(lx == math.inf, at_inf, lx))
        return xp.where(finite, out, edges)

    return kernel


def _inv_boxcox_kernel(minus_one):
    """``(1 + l y)**(1/l)`` (``exp(y)`` at ``l == 0``), minus one for ``inv_boxcox1p``; nan where ``1 + l y
    < 0``, the limit where it is 0."""

    def kernel(xp, y, lmbda):
        y, lmbda = kernel_arrays(xp, (y, lmbda))
        v = lmbda * y
        zero = lmbda == 0
        g = xp.where(zero, y, _safe_log(xp, v, "log1p", -1.0) / xp.where(zero, 1.0, lmbda))
        big = g > _OVERFLOW
        out = xp.expm1(xp.where(big, 0.0, g)) if minus_one else xp.exp(xp.where(big, 0.0, g))
        return xp.where(big, math.inf, out)

    return kernel


_X_LMBDA = (("x", "a real array of data (positive)"), ("lmbda", "a real array, the transformation parameter"))
_Y_LMBDA = (
    ("y", "a real array of transformed data"),
    ("lmbda", "a real array, the transformation parameter"),
)

boxcox = special_function(
    "boxcox",
    ("x", "lmbda"),
    (
        lambda x, lmbda, y: exp((lmbda - 1.0) * log(x)),
        lambda x, lmbda, y: log(x) ** 2 * exprel_prime(lmbda * log(x)),
    ),
    generic=_boxcox_kernel("log", 0.0),
    doc=docstring(
        "The Box-Cox transformation ``(x**lmbda - 1) / lmbda``, ``log(x)`` where ``lmbda == 0``.",
        _X_LMBDA,
        ELEMENTWISE,
        ("boxcox(np.array([1.0, 4.0]), 0.5)", "array([0., 2.])"),
        "Derivatives: ``x**(lmbda-1)`` in ``x``; ``log(x)**2 exprel'(lmbda log(x))`` in ``lmbda`` (exact "
        "at ``lmbda == 0``, every order).",
        kernels="both",
    ),
)

boxcox1p = special_function(
    "boxcox1p",
    ("x", "lmbda"),
    (
        lambda x, lmbda, y: exp((lmbda - 1.0) * log1p(x)),
        lambda x, lmbda, y: log1p(x) ** 2 * exprel_prime(lmbda * log1p(x)),
    ),
    generic=_boxcox_kernel("log1p", -1.0),
    doc=docstring(
        "The Box-Cox transformation of ``1 + x``: ``((1 + x)**lmbda - 1) / lmbda``, ``log1p(x)`` where "
        "``lmbda == 0``.",
        (("x", "a real array of data (greater than -1)"), _X_LMBDA[1]),
        ELEMENTWISE,
        ("boxcox1p(np.array([0.0, 3.0]), 0.5)", "array([0., 2.])"),
        "Derivatives: ``(1 + x)**(lmbda-1)`` in ``x``; ``log1p(x)**2 exprel'(lmbda log1p(x))`` in ``lmbda``.",
        kernels="both",
    ),
)

inv_boxcox = special_function(
    "inv_boxcox",
    ("y", "lmbda"),
    (
        lambda y, lmbda, x: x / (1.0 + lmbda * y),
        lambda y, lmbda, x: x * y * y * _log1p_ratio_prime(lmbda * y),
    ),
    generic=_inv_boxcox_kernel(False),
    doc=docstring(
        "The inverse of ``boxcox`` in ``x``: ``(1 + lmbda y)**(1/lmbda)``, ``exp(y)`` where ``lmbda == 0``.",
        _Y_LMBDA,
        ELEMENTWISE,
        ("inv_boxcox(np.array([0.0, 2.0]), 0.5)", "array([1., 4.])"),
        "Derivatives: ``inv_boxcox / (1 + lmbda y)`` in ``y``; ``inv_boxcox y**2 L'(lmbda y)`` in "
        "``lmbda``, ``L(v) = log1p(v)/v``.",
        kernels="both",
    ),
)

inv_boxcox1p = special_function(
    "inv_boxcox1p",
    ("y", "lmbda"),
    (
        lambda y, lmbda, x: (x + 1.0) / (1.0 + lmbda * y),
        lambda y, lmbda, x: (x + 1.0) * y * y * _log1p_ratio_prime(lmbda * y),
    ),
    generic=_inv_boxcox_kernel(True),
    doc=docstring(
        "The inverse of ``boxcox1p`` in ``x``: ``(1 + lmbda y)**(1/lmbda) - 1``, ``expm1(y)`` where "
        "``lmbda == 0``.",
        _Y_LMBDA,
        ELEMENTWISE,
        ("inv_boxcox1p(np.array([0.0, 2.0]), 0.5)", "array([0., 3.])"),
        "Derivatives: ``(inv_boxcox1p + 1) / (1 + lmbda y)`` in ``y``; ``(inv_boxcox1p + 1) y**2 "
        "L'(lmbda y)`` in ``lmbda``.",
        kernels="both",
    ),
)

__all__ = ["boxcox", "boxcox1p", "exprel", "exprel_prime", "inv_boxcox", "inv_boxcox1p"]
