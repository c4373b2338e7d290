"""Distribution functions of discrete distributions and their inverses in the probability or mean, in
SciPy's raw form: binomial (``bdtr``, ``bdtrc``, ``bdtri``), negative binomial (``nbdtr``, ``nbdtrc``,
``nbdtri``) and Poisson (``pdtr``, ``pdtrc``, ``pdtri``). SciPy's ufuncs on CPU arrays, cupyx on CUDA
arrays.

The counts ``k`` and ``n`` are integers (SciPy rounds them down): no derivative in them (asking raises
``NotImplementedError`` naming the argument). In the probability ``p`` or mean ``m`` each is ``betainc``
or ``gammainc(c)`` at integer parameters, so its derivative is a density in closed form (every order):
``bdtr(k, n, p) = betainc(n-k, k+1, 1-p)``, ``nbdtr(k, n, p) = betainc(n, k+1, p)``, ``pdtr(k, m) =
gammaincc(k+1, m)``; the inverses differentiate as ``1 / F_p`` at their result.
"""

import math

from polyad.core import dispatch
from polyad.ops.base import where
from polyad.ops.elementwise import floor
from polyad.ops.special.incomplete import beta_density, gamma_density
from polyad.ops.special.shared import (
    ELEMENTWISE,
    NoDerivative,
    docstring,
    host_call,
    keeping_dtype,
    scipy_function,
    special_function,
)

_COUNT = NoDerivative("the counts k and n are integers")
_K = ("k", "integer numbers of successes (floats are rounded down)")
_N = ("n", "integer numbers of trials (floats are rounded down)")
_P = ("p", "a real array of success probabilities in [0, 1]")
_Y = ("y", "a real array of probabilities")


def _function(name, argnames, partials, summary, args, example, derivative):
    return special_function(
        name, argnames, partials, doc=docstring(summary, args, ELEMENTWISE, example, derivative)
    )


def _binomial_slope(k, n, p):
    """``d bdtrc / dp``: the beta density of ``(k+1, n-k)`` at ``p``; 0 where ``k >= n`` (``bdtrc`` is 0)."""
    k, n = floor(k), floor(n)
    inside = k < n
    return where(inside, beta_density(k + 1.0, where(inside, n - k, 1.0), p), 0.0)


def _negative_binomial_slope(k, n, p):
    """``d nbdtr / dp``: the beta density of ``(n, k+1)`` at ``p``."""
    return beta_density(floor(n), floor(k) + 1.0, p)


def _poisson_slope(k, m):
    """``d pdtrc / dm``: the gamma density of ``k + 1`` at ``m``."""
    return gamma_density(floor(k) + 1.0, m)


def _integer_trials_kernel(name):
    """The ``"cpu"`` kernel of ``bdtr``, ``bdtrc``, ``bdtri``: SciPy's ufunc with ``n`` as integers (its
    loop for a floating ``n`` warns that non-integer ``n`` is deprecated, whatever the values, and polyad
    makes integer arguments floating); nan where ``n`` is not finite."""

    def kernel(xp, k, n, p):
        f = scipy_function(name)

        def host(k, n, p):
            hx = dispatch.backend_of((k, n, p)).xp
            n = hx.asarray(n)
            finite = hx.isfinite(n)
            out = f(k, hx.astype(hx.where(finite, n, 0.0), hx.int64), p)
            return hx.where(finite, out, math.nan)

        return host_call(host, (k, n, p), elementwise=True)

    kernel.scipy_name = name
    return kernel


# --------------------------------------------------------------------------------------------- binomial

bdtr = _function(
    "bdtr",
    ("k", "n", "p"),
    (_COUNT, _COUNT, lambda k, n, p, y: -_binomial_slope(k, n, p)),
    "The binomial distribution function: the probability of at most ``k`` successes in ``n`` trials.",
    (_K, _N, _P),
    ("bdtr(2, 5, np.array([0.3, 0.5]))", "array([0.83692, 0.5    ])"),
    "Derivative: ``-(n-k) binom(n, k) p**k (1-p)**(n-k-1)`` in ``p``; none in ``k``, ``n``.",
)

bdtrc = _function(
    "bdtrc",
    ("k", "n", "p"),
    (_COUNT, _COUNT, lambda k, n, p, y: _binomial_slope(k, n, p)),
    "The binomial survival function: the probability of more than ``k`` successes in ``n`` trials.",
    (_K, _N, _P),
    ("bdtrc(2, 5, np.array([0.3, 0.5]))", "array([0.16308, 0.5    ])"),
    "Derivative: ``(n-k) binom(n, k) p**k (1-p)**(n-k-1)`` in ``p``; none in ``k``, ``n``.",
)

bdtri = _function(
    "bdtri",
    ("k", "n", "y"),
    (_COUNT, _COUNT, lambda k, n, y, p: -1.0 / _binomial_slope(k, n, p)),
    "The inverse of ``bdtr`` in ``p``: the success probability at which ``bdtr(k, n, p) == y``.",
    (_K, _N, _Y),
    ("bdtri(2, 5, np.array([0.83692, 0.5]))", "array([0.3, 0.5])"),
    "Derivative: ``1 / bdtr_p`` at the result, in ``y``; none in ``k``, ``n``.",
)

# ---------------------------------------------------------------------------------- negative binomial

_NB_N = ("n", "integer numbers of successes to reach (floats are rounded down)")
_NB_K = ("k", "integer numbers of failures (floats are rounded down)")

nbdtr = _function(
    "nbdtr",
    ("k", "n", "p"),
    (_COUNT, _COUNT, lambda k, n, p, y: _negative_binomial_slope(k, n, p)),
    "The negative binomial distribution function: the probability of at most ``k`` failures before the "
    "``n``-th success.",
    (_NB_K, _NB_N, _P),
    ("nbdtr(2, 3, np.array([0.3, 0.5]))", "array([0.16308, 0.5    ])"),
    "Derivative: ``p**(n-1) (1-p)**k / B(n, k+1)`` in ``p``; none in ``k``, ``n``.",
)

nbdtrc = _function(
    "nbdtrc",
    ("k", "n", "p"),
    (_COUNT, _COUNT, lambda k, n, p, y: -_negative_binomial_slope(k, n, p)),
    "The negative binomial survival function: the probability of more than ``k`` failures.",
    (_NB_K, _NB_N, _P),
    ("nbdtrc(2, 3, np.array([0.3, 0.5]))", "array([0.83692, 0.5    ])"),
    "Derivative: ``-p**(n-1) (1-p)**k / B(n, k+1)`` in ``p``; none in ``k``, ``n``.",
)

nbdtri = _function(
    "nbdtri",
    ("k", "n", "y"),
    (_COUNT, _COUNT, lambda k, n, y, p: 1.0 / _negative_binomial_slope(k, n, p)),
    "The inverse of ``nbdtr`` in ``p``.",
    (_NB_K, _NB_N, _Y),
    ("nbdtri(2, 3, np.array([0.16308, 0.5]))", "array([0.3, 0.5])"),
    "Derivative: ``1 / nbdtr_p`` at the result, in ``y``; none in ``k``, ``n``.",
)

# --------------------------------------------------------------------------------------------- Poisson

_M = ("m", "a real array of means (non-negative)")

pdtr = _function(
    "pdtr",
    ("k", "m"),
    (_COUNT, lambda k, m, y: -_poisson_slope(k, m)),
    "The Poisson distribution function: the probability of at most ``k`` events at mean ``m``.",
    (_K, _M),
    ("pdtr(2, np.array([1.0, 3.0]))", "array([0.9196986 , 0.42319008])"),
    "Derivative: ``-m**k exp(-m) / k!`` in ``m``; none in ``k``.",
)

pdtrc = _function(
    "pdtrc",
    ("k", "m"),
    (_COUNT, lambda k, m, y: _poisson_slope(k, m)),
    "The Poisson survival function: the probability of more than ``k`` events at mean ``m``.",
    (_K, _M),
    ("pdtrc(2, np.array([1.0, 3.0]))", "array([0.0803014 , 0.57680992])"),
    "Derivative: ``m**k exp(-m) / k!`` in ``m``; none in ``k``.",
)

pdtri = _function(
    "pdtri",
    ("k", "y"),
    (_COUNT, lambda k, y, m: -1.0 / _poisson_slope(k, m)),
    "The inverse of ``pdtr`` in ``m``: the mean at which ``pdtr(k, m) == y``.",
    (_K, _Y),
    ("pdtri(2, np.array([0.9196986, 0.42319008]))", "array([1.00000002, 3.00000001])"),
    "Derivative: ``1 / pdtr_m`` at the result, in ``y``; none in ``k``.",
)

for _f in (bdtr, bdtrc, bdtri):
    _f.op.kernels["cpu"] = keeping_dtype(_integer_trials_kernel(_f.__name__))

__all__ = ["bdtr", "bdtrc", "bdtri", "nbdtr", "nbdtrc", "nbdtri", "pdtr", "pdtrc", "pdtri"]
