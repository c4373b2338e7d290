"""Derivatives of the regularised incomplete gamma and beta functions in their shape parameters:
``gammainc``/``gammaincc`` (and their inverses) in ``a``, ``betainc`` (and ``betaincc``, ``betaincinv``)
in ``a`` and ``b``, to second order in the shape parameters and to every order in ``x`` on top.

Method: forward-mode differentiation of the algorithm that computes the function, as Moore (1982, AS 187)
does for the incomplete gamma integral and Boik and Robison-Cox (1998) for the incomplete beta function.
The series or continued fraction runs on second-order jets (``numerics.Jet``): every term carries its
first and second derivatives in the shape parameters, and the log-prefactor's derivatives are digamma and
trigamma values.

- ``P(a, x)``, where ``x <= 1`` or ``x <= a``: ``x**a e**-x / gamma(a + 1) * sum_n x**n / ((a+1)...(a+n))``.
- ``Q(a, x) = 1 - P`` elsewhere: ``x**a e**-x / gamma(a)`` times Legendre's continued fraction
  ``1/(x+1-a- 1(1-a)/(x+3-a- 2(2-a)/(x+5-a- ...)))``, evaluated by forward recurrences of numerators
  and denominators (rescaled as they grow), so that their derivatives recur alongside.
- ``I_x(a, b)``: ``x**a (1-x)**b / (a B(a, b))`` times the continued fraction ``1/(1+ d1/(1+ d2/(1+
  ...)))`` with ``d_{2m+1} = -(a+m)(a+b+m)x / ((a+2m)(a+2m+1))``, ``d_{2m} = m(b-m)x / ((a+2m-1)(a+2m))``,
  where ``x < (a+1)/(a+b+2)``; elsewhere ``1 - I_{1-x}(b, a)``.

The ops ``special.gammainc_shape`` and ``special.betainc_shape`` compute one derivative each (``wrt``:
the sorted tuple of parameter indices, ``(0,)``, ``(0, 0)``, ``(0, 1)``...). Their derivatives in ``x``
are the shape derivatives of the density, in closed form (digamma, polygamma); in a shape parameter, the
next order; a third order in the shape parameters raises ``NotImplementedError`` naming the function.
Loops stop when every element has converged (to the dtype's epsilon), at most ``MAX_TERMS`` terms; an
element that has not converged by then is nan, never a value short of its terms. Kernels: the Array API
code below on every device type whose arrays ``gammaln``, ``digamma`` and ``polygamma`` have kernels for,
and on host copies for CPU arrays (Dask chunk by chunk).
"""

import math

from polyad.ops.elementwise import exp, log, log1p
from polyad.ops.special.elementary import xlog1py, xlogy
from polyad.ops.special.gammas import betaln, digamma, gammaln, polygamma
from polyad.ops.special.numerics import Jet, at_level_0, converged, derivative_op, float_eps, host_kernel
from polyad.ops.special.shared import LATER, NoDerivative, kernel_arrays

MAX_TERMS = 5000  # per series or continued fraction; enough for shape parameters up to about 1e5
_CHECK = 8  # iterations between convergence tests (each test synchronises a device)

# --------------------------------------------------------------------------------------------- kernels


def _lgamma_jet(xp, s):
    """``log gamma`` of jet ``s``: values ``gammaln``, ``digamma``, ``polygamma(1, .)`` at ``s.v``."""
    v = s.v
    return s.apply(at_level_0(gammaln, v), at_level_0(digamma, v), at_level_0(polygamma, xp.ones_like(v), v))


def _all(xp, mask):
    return bool(xp.all(mask))


def _lower_series(xp, a, x, eps):
    """The jet of ``P(a, x)`` in ``a`` by its series, and the elements that converged."""
    A = Jet.variable(xp, a, 0, 1)
    term = Jet.constant(xp, xp.ones_like(a), 1)
    total = term
    done = xp.zeros_like(a, dtype=xp.bool)
    for n in range(1, MAX_TERMS + 1):
        term = term * (A + float(n)).reciprocal().scale(x)
        total = total + term
        if n % _CHECK == 0:
            done = converged(xp, total, total - term, eps)
            if _all(xp, done):
                break
    prefactor = A.scale(xp.log(x)) - _lgamma_jet(xp, A + 1.0) - x  # log of x**a e**-x / gamma(a+1)
    return prefactor.exp(xp) * total, done


def _fraction(xp, steps, like, eps):
    """The jet of the continued fraction ``alpha_1/(beta_1 + alpha_2/(beta_2 + ...))`` whose ``k``-th
    partial numerator and denominator ``steps(k)`` gives (jets or numbers), and the elements that
    converged. Steed's algorithm: the fraction is the sum of the differences ``delta_k`` of successive
    convergents, ``D_k = 1/(beta_k + alpha_k D_{k-1})``, ``delta_k = (beta_k D_k - 1) delta_{k-1}``:
    bounded quantities only (the numerators and denominators of the convergents grow, and their
    derivatives cancel in the quotient), stopped when the last difference is below ``eps`` in value and
    derivatives."""
    alpha, beta = steps(1)
    d = 1.0 / beta
    delta = d * alpha
    total = delta
    done = xp.zeros_like(like, dtype=xp.bool)
    for k in range(2, MAX_TERMS + 1):
        alpha, beta = steps(k)
        d = 1.0 / (d * alpha + beta)
        delta = delta * (d * beta - 1.0)
        total = total + delta
        if k % _CHECK == 0:
            done = converged(xp, total, total - delta, eps)
            if _all(xp, done):
                break
    return total, done


def _upper_fraction(xp, a, x, eps):
    """The jet of ``Q(a, x)`` in ``a`` by Legendre's continued fraction, and the elements that converged."""
    A = Jet.variable(xp, a, 0, 1)

    def steps(k):
        if k == 1:
            return 1.0, (x + 1.0) - A
        j = float(k - 1)
        return (A - j).scale(j), (x + (2.0 * j + 1.0)) - A

    fraction, done = _fraction(xp, steps, a, eps)
    prefactor = A.scale(xp.log(x)) - _lgamma_jet(xp, A) - x  # log of x**a e**-x / gamma(a)
    return prefactor.exp(xp) * fraction, done


def _gammainc_shape_kernel(xp, a, x, *, wrt):
    """``d^k P(a, x) / da^k`` with ``k = len(wrt)`` (1 or 2)."""
    a, x = xp.broadcast_arrays(*kernel_arrays(xp, (a, x)))
    eps = float_eps(xp, a)
    valid = (a > 0) & (x >= 0) & xp.isfinite(a) & ~xp.isnan(x)
    edge = (x == 0) | xp.isinf(x)  # P is 0 or 1 whatever a: no derivative
    ok = valid & ~edge
    upper = ok & (x > 1.0) & (x > a)
    a_safe = xp.where(ok, a, 1.0)
    p, p_done = _lower_series(xp, a_safe, xp.where(ok & ~upper, x, 0.5), eps)
    q, q_done = _upper_fraction(xp, a_safe, xp.where(upper, x, a_safe + 2.0), eps)
    out = xp.where(upper, -q.derivative(wrt), p.derivative(wrt))
    out = xp.where(xp.where(upper, q_done, p_done), out, math.nan)
    return xp.where(valid, xp.where(edge, 0.0, out), math.nan)


def _beta_fraction(xp, p, q, y, eps):
    """The jet of the continued fraction of ``I_y(p, q)`` (after its prefactor), and the elements that
    converged."""

    def steps(k):
        if k == 1:
            return 1.0, 1.0
        i = k - 1
        if i % 2:
            m = float((i - 1) // 2)
            d = ((p + m) * (p + q + m) / ((p + 2.0 * m) * (p + (2.0 * m + 1.0)))).scale(-y)
        else:
            m = float(i // 2)
            d = ((q - m).scale(m) / ((p + (2.0 * m - 1.0)) * (p + 2.0 * m))).scale(y)
        return d, 1.0

    return _fraction(xp, steps, y, eps)


def _betainc_shape_kernel(xp, a, b, x, *, wrt):
    """The derivative of ``I_x(a, b)`` in the shape parameters ``wrt`` (0: ``a``, 1: ``b``)."""
    a, b, x = xp.broadcast_arrays(*kernel_arrays(xp, (a, b, x)))
    eps = float_eps(xp, a)
    valid = (a > 0) & (b > 0) & xp.isfinite(a) & xp.isfinite(b) & (x >= 0) & (x <= 1)
    edge = (x == 0) | (x == 1)
    ok = valid & ~edge
    a, b, x = xp.where(ok, a, 1.0), xp.where(ok, b, 1.0), xp.where(ok, x, 0.5)
    swap = x > (a + 1.0) / (a + b + 2.0)  # there I_x(a, b) = 1 - I_{1-x}(b, a)
    ja, jb = Jet.variable(xp, a, 0, 2), Jet.variable(xp, b, 1, 2)
    p, q = Jet.where(xp, swap, jb, ja), Jet.where(xp, swap, ja, jb)
    lx, l1x = xp.log(x), xp.log1p(-x)
    y = xp.where(swap, 1.0 - x, x)
    log_beta = _lgamma_jet(xp, p) + _lgamma_jet(xp, q) - _lgamma_jet(xp, p + q)
    prefactor = p.scale(xp.where(swap, l1x, lx)) + q.scale(xp.where(swap, lx, l1x)) - log_beta - p.log(xp)
    fraction, done = _beta_fraction(xp, p, q, y, eps)
    value = prefactor.exp(xp) * fraction
    out = xp.where(swap, -value.derivative(wrt), value.derivative(wrt))
    out = xp.where(done, out, math.nan)
    return xp.where(valid, xp.where(edge, 0.0, out), math.nan)


# --------------------------------------------------------------------------------------------- ops


def _third(fname, params):
    return NoDerivative(
        f"polyad has the derivatives of {fname} in its shape parameters to the second order only"
    )


def _log_gamma_density(a, x):
    """``log(x**(a-1) e**-x / gamma(a))``, the log of ``gammainc``'s derivative in ``x``."""
    return xlogy(a - 1.0, x) - x - gammaln(a)


def _gamma_density_shape(a, x, order):
    """``d^order/da^order`` of the gamma density ``x**(a-1) e**-x / gamma(a)``: closed forms."""
    u = log(x) - digamma(a)
    density = exp(_log_gamma_density(a, x))
    if order == 1:
        return density * u
    return density * (u * u - polygamma(1.0, a))


def _gammainc_shape_partials(wrt):
    order = len(wrt)
    a_partial = (lambda a, x, y: gammainc_shape(a, x, order + 1)) if order < 2 else _third("gammainc", wrt)
    return (a_partial, lambda a, x, y: _gamma_density_shape(a, x, order))


_gammainc_shape = derivative_op(
    "gammainc_shape",
    "gammainc",
    ("a", "x"),
    _gammainc_shape_partials,
    _gammainc_shape_kernel,
    cpu=host_kernel(_gammainc_shape_kernel),
)


def gammainc_shape(a, x, order=1):
    """``d^order gammainc(a, x) / da^order`` (order 1 or 2), in polyad ops."""
    return _gammainc_shape.bind(a, x, wrt=(0,) * order)


def _log_beta_density(a, b, x):
    """``log(x**(a-1) (1-x)**(b-1) / B(a, b))``, the log of ``betainc``'s derivative in ``x``."""
    return xlogy(a - 1.0, x) + xlog1py(b - 1.0, -x) - betaln(a, b)


def _beta_density_shape(a, b, x, wrt):
    """The derivative ``wrt`` (indices: 0 ``a``, 1 ``b``) of the beta density in its shape parameters:
    closed forms in digamma and trigamma."""
    common = digamma(a + b)
    u = (log(x) - digamma(a) + common, log1p(-x) - digamma(b) + common)
    density = exp(_log_beta_density(a, b, x))
    if len(wrt) == 1:
        return density * u[wrt[0]]
    i, j = wrt
    second = polygamma(1.0, a + b)
    if i == j:
        second = second - polygamma(1.0, (a, b)[i])
    return density * (u[i] * u[j] + second)


def _betainc_shape_partials(wrt):
    def shape(i):
        if len(wrt) == 2:
            return _third("betainc", wrt)
        return lambda a, b, x, y: betainc_shape(a, b, x, tuple(sorted(wrt + (i,))))

    return (shape(0), shape(1), lambda a, b, x, y: _beta_density_shape(a, b, x, wrt))


_betainc_shape = derivative_op(
    "betainc_shape",
    "betainc",
    ("a", "b", "x"),
    _betainc_shape_partials,
    _betainc_shape_kernel,
    cpu=host_kernel(_betainc_shape_kernel),
)


def betainc_shape(a, b, x, wrt):
    """The derivative of ``betainc(a, b, x)`` in its shape parameters ``wrt`` (a sorted tuple of
    indices, 0 for ``a`` and 1 for ``b``, one or two of them), in polyad ops."""
    return _betainc_shape.bind(a, b, x, wrt=tuple(wrt))


def gamma_density(a, x):
    """``x**(a-1) e**-x / gamma(a)``: the derivative of ``gammainc`` in ``x``."""
    return exp(_log_gamma_density(a, x))


def beta_density(a, b, x):
    """``x**(a-1) (1-x)**(b-1) / B(a, b)``: the derivative of ``betainc`` in ``x``."""
    return exp(_log_beta_density(a, b, x))


# --------------------------------------------------------------------------------------------- partials

# gammaincinv/gammainccinv: x(a, y) keeps P(a, x) fixed (Q too), so dx/da = -P_a / P_x at the result
LATER.update(
    {
        "gammainc.a": lambda a, x, y: gammainc_shape(a, x),
        "gammaincc.a": lambda a, x, y: -gammainc_shape(a, x),
        "gammaincinv.a": lambda a, p, x: -gammainc_shape(a, x) / gamma_density(a, x),
        "gammainccinv.a": lambda a, q, x: -gammainc_shape(a, x) / gamma_density(a, x),
        "betainc.a": lambda a, b, x, y: betainc_shape(a, b, x, (0,)),
        "betainc.b": lambda a, b, x, y: betainc_shape(a, b, x, (1,)),
    }
)

__all__ = ["MAX_TERMS", "beta_density", "betainc_shape", "gamma_density", "gammainc_shape"]
