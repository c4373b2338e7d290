"""The gamma function and its relatives: ``gammaln``, ``gamma``, ``loggamma``, ``rgamma``, ``digamma``
(SciPy's ``psi``), ``polygamma``, the regularised incomplete gamma functions ``gammainc``/``gammaincc`` and
their inverses, ``betaln``, ``betainc``, ``zeta``, ``multigammaln``, ``binom``, ``poch``. SciPy kernels on
CPU, cupyx on CUDA.

Derivatives: the gamma family differentiates into digamma and polygamma of the next order, so every order
is available. The incomplete functions differentiate in ``x`` in closed form; in a shape parameter (no
closed form) by the series and continued fractions of ``incomplete.py``, to second order; ``zeta`` in its
exponent by ``gamma_zeta.py`` (both written there, as ``later`` partials: they need this file's functions).
``polygamma`` has no derivative in its order: asking for it raises (``NoDerivative``).
"""

import math

from polyad.core import bind
from polyad.ops.base import where
from polyad.ops.elementwise import exp
from polyad.ops.special.elementary import xlog1py, xlogy
from polyad.ops.special.shared import (
    ELEMENTWISE,
    REAL,
    NoDerivative,
    docstring,
    float_args,
    keeping_dtype,
    later,
    public,
    special_function,
    special_op,
    unary_function,
)

gammaln = unary_function(
    "gammaln",
    lambda x, y: digamma(x),
    "``log(|gamma(x)|)``, the log of the absolute value of the gamma function.",
    ("[0.5, 10.0]", "array([ 0.57236494, 12.80182748])"),
    "Derivative: ``digamma(x)``.",
)

gamma = unary_function(
    "gamma",
    lambda x, y: y * digamma(x),
    "The gamma function.",
    ("[0.5, 5.0]", "array([ 1.77245385, 24.        ])"),
    "Derivative: ``gamma(x) digamma(x)``.",
)

loggamma = unary_function(
    "loggamma",
    lambda x, y: digamma(x),
    "The principal branch of ``log(gamma(x))``: for real ``x``, nan where ``gamma(x) < 0``.",
    ("[0.5, 10.0]", "array([ 0.57236494, 12.80182748])"),
    "Derivative: ``digamma(x)``.",
)

rgamma = unary_function(
    "rgamma",
    lambda x, y: -y * digamma(x),
    "``1 / gamma(x)``, zero at the poles of gamma.",
    ("[0.5, 5.0]", "array([0.56418958, 0.04166667])"),
    "Derivative: ``-rgamma(x) digamma(x)``.",
)

digamma = unary_function(
    "digamma",
    lambda x, y: polygamma(1.0, x),
    "The digamma function ``d/dx log(gamma(x))`` (SciPy's ``psi``, also ``polyad.xp.special.psi``).",
    ("[1.0, 0.5]", "array([-0.57721566, -1.96351003])"),
    "Derivative: ``polygamma(1, x)``.",
)
psi = digamma

polygamma = special_function(
    "polygamma",
    ("n", "x"),
    (NoDerivative("n is an integer order"), lambda n, x, y: polygamma(n + 1.0, x)),
    doc=docstring(
        "The polygamma function, the ``n``-th derivative of ``digamma``.",
        (("n", "non-negative integer orders (an int or an array)"), ("x", REAL)),
        ELEMENTWISE,
        ("polygamma(1, np.array([1.0, 0.5]))", "array([1.64493407, 4.9348022 ])"),
        "Derivative: ``polygamma(n + 1, x)`` in ``x``; none in ``n``.",
    ),
)

polygamma.op.kernels["cpu"] = keeping_dtype(polygamma.op.kernels["cpu"])  # SciPy's is float64 always

# ------------------------------------------------------------------------------ incomplete gamma


def _gamma_density(a, x):
    """``x**(a-1) exp(-x) / gamma(a)``: the derivative of ``gammainc`` in ``x``."""
    return exp(xlogy(a - 1.0, x) - x - gammaln(a))


_AX = (("a", "a real array of positive shape parameters"), ("x", "a real array, non-negative"))

gammainc = special_function(
    "gammainc",
    ("a", "x"),
    (later("gammainc.a"), lambda a, x, y: _gamma_density(a, x)),
    doc=docstring(
        "The regularised lower incomplete gamma function ``P(a, x)``.",
        _AX,
        ELEMENTWISE,
        ("gammainc(2.0, np.array([0.5, 3.0]))", "array([0.09020401, 0.80085173])"),
        "Derivatives: ``x**(a-1) exp(-x) / gamma(a)`` in ``x``; in ``a`` by a series or continued "
        "fraction, to second order in ``a``.",
    ),
)

gammaincc = special_function(
    "gammaincc",
    ("a", "x"),
    (later("gammaincc.a"), lambda a, x, y: -_gamma_density(a, x)),
    doc=docstring(
        "The regularised upper incomplete gamma function ``Q(a, x) = 1 - P(a, x)``.",
        _AX,
        ELEMENTWISE,
        ("gammaincc(2.0, np.array([0.5, 3.0]))", "array([0.90979599, 0.19914827])"),
        "Derivatives: ``-x**(a-1) exp(-x) / gamma(a)`` in ``x``; in ``a`` by a series or continued "
        "fraction, to second order in ``a``.",
    ),
)

_AY = (("a", "a real array of positive shape parameters"), ("y", "a real array of probabilities"))

gammaincinv = special_function(
    "gammaincinv",
    ("a", "y"),
    (later("gammaincinv.a"), lambda a, p, x: 1.0 / _gamma_density(a, x)),
    doc=docstring(
        "The inverse of ``gammainc`` in ``x``: ``gammainc(a, gammaincinv(a, y)) == y``.",
        _AY,
        ELEMENTWISE,
        ("gammaincinv(2.0, np.array([0.25, 0.5]))", "array([0.96127876, 1.67834699])"),
        "Derivatives: ``1 / gammainc'(a, x)`` at the result ``x``, in ``y``; ``-dgammainc/da / "
        "gammainc'`` in ``a`` (to second order in ``a``).",
    ),
)

gammainccinv = special_function(
    "gammainccinv",
    ("a", "y"),
    (later("gammainccinv.a"), lambda a, q, x: -1.0 / _gamma_density(a, x)),
    doc=docstring(
        "The inverse of ``gammaincc`` in ``x``: ``gammaincc(a, gammainccinv(a, y)) == y``.",
        _AY,
        ELEMENTWISE,
        ("gammainccinv(2.0, np.array([0.25, 0.5]))", "array([2.69263453, 1.67834699])"),
        "Derivatives: ``-1 / gammainc'(a, x)`` at the result ``x``, in ``y``; ``-dgammainc/da / "
        "gammainc'`` in ``a`` (to second order in ``a``).",
    ),
)

# ------------------------------------------------------------------------------ beta

_AB = (("a", REAL), ("b", REAL))

betaln = special_function(
    "betaln",
    ("a", "b"),
    (
        lambda a, b, y: digamma(a) - digamma(a + b),
        lambda a, b, y: digamma(b) - digamma(a + b),
    ),
    doc=docstring(
        "``log(|beta(a, b)|)``, the log of the beta function.",
        _AB,
        ELEMENTWISE,
        ("betaln(np.array([1.0, 2.0]), 3.0)", "array([-1.09861229, -2.48490665])"),
        "Derivatives: ``digamma(a) - digamma(a + b)`` in ``a``, and symmetrically in ``b``.",
    ),
)

betainc = special_function(
    "betainc",
    ("a", "b", "x"),
    (
        later("betainc.a"),
        later("betainc.b"),
        lambda a, b, x, y: exp(xlogy(a - 1.0, x) + xlog1py(b - 1.0, -x) - betaln(a, b)),
    ),
    doc=docstring(
        "The regularised incomplete beta function ``I_x(a, b)`` (also, through SciPy, the Student t "
        "distribution ``stdtr`` and ``betaincc``).",
        (*_AB, ("x", "a real array with values in [0, 1]")),
        ELEMENTWISE,
        ("betainc(2.0, 3.0, np.array([0.25, 0.5]))", "array([0.26171875, 0.6875    ])"),
        "Derivatives: ``x**(a-1) (1-x)**(b-1) / beta(a, b)`` in ``x``; in ``a`` and ``b`` by the "
        "continued fraction, to second order in ``a`` and ``b`` together.",
    ),
)

# ------------------------------------------------------------------------------ zeta

hurwitz_zeta_op = special_op(
    "zeta", ("x", "q"), (later("zeta.x"), lambda x, q, y: -x * bind(hurwitz_zeta_op, x + 1.0, q))
)
_riemann = special_op("riemann_zeta", ("x",), (later("riemann_zeta.x"),), scipy_name="zeta")


def zeta(x, q=None, /):
    if q is None:
        return bind(_riemann, *float_args("zeta", ("x",), (x,)))
    return bind(hurwitz_zeta_op, *float_args("zeta", ("x", "q"), (x, q)))


public(
    "zeta",
    zeta,
    docstring(
        "The Hurwitz zeta function ``sum((k + q)**-x for k >= 0)``; the Riemann zeta function when ``q`` "
        "is None.",
        (("x", "a real array, the exponent"), ("q", "a real array, or None for Riemann's zeta")),
        ELEMENTWISE,
        ("zeta(np.array([2.0, 4.0]))", "array([1.64493407, 1.08232323])"),
        "Derivatives: ``-x zeta(x + 1, q)`` in ``q``; in the exponent ``x``, ``-sum(log(k + q) "
        "(k + q)**-x)`` by Euler-Maclaurin summation, of every order.",
    ),
)
zeta.op = hurwitz_zeta_op

# ------------------------------------------------------------------------------ multigammaln, binom, poch


def multigammaln(a, d, /):
    if isinstance(d, bool) or not isinstance(d, int) or d < 1:
        raise ValueError(f"polyad.xp.special.multigammaln: d must be a positive Python int, got {d!r}")
    (a,) = float_args("multigammaln", ("a",), (a,))
    terms = [gammaln(a - 0.5 * j) for j in range(d)]
    out = 0.25 * d * (d - 1) * math.log(math.pi) + _sum_terms(terms)
    return where(a > 0.5 * (d - 1), out, math.nan)  # outside its domain: nan (SciPy raises)


def _sum_terms(terms):
    out = terms[0]
    for t in terms[1:]:
        out = out + t
    return out


public(
    "multigammaln",
    multigammaln,
    docstring(
        "The log of the multivariate gamma function of dimension ``d``: ``d(d-1)/4 log(pi) + "
        "sum(gammaln(a - j/2) for j < d)``; nan where ``a <= (d - 1)/2``.",
        (("a", REAL), ("d", "the dimension, a positive Python int")),
        ELEMENTWISE,
        ("multigammaln(np.array([2.0, 3.5]), 3)", "array([1.59631259, 3.89589848])"),
        "Derivative: that of the sum of ``gammaln`` terms (polyad ops), so of every order.",
    ),
)

binom = special_function(
    "binom",
    ("n", "k"),
    (
        lambda n, k, y: y * (digamma(n + 1.0) - digamma(n - k + 1.0)),
        lambda n, k, y: y * (digamma(n - k + 1.0) - digamma(k + 1.0)),
    ),
    doc=docstring(
        "The binomial coefficient ``gamma(n + 1) / (gamma(k + 1) gamma(n - k + 1))`` for real ``n``, ``k``.",
        (("n", REAL), ("k", REAL)),
        ELEMENTWISE,
        ("binom(np.array([5.0, 4.5]), 2.0)", "array([10.   ,  7.875])"),
        "Derivatives: ``binom (digamma(n+1) - digamma(n-k+1))`` in ``n``, ``binom (digamma(n-k+1) - "
        "digamma(k+1))`` in ``k``.",
    ),
)

poch = special_function(
    "poch",
    ("z", "m"),
    (
        lambda z, m, y: y * (digamma(z + m) - digamma(z)),
        lambda z, m, y: y * digamma(z + m),
    ),
    doc=docstring(
        "The Pochhammer symbol (rising factorial) ``gamma(z + m) / gamma(z)``.",
        (("z", REAL), ("m", REAL)),
        ELEMENTWISE,
        ("poch(np.array([2.0, 0.5]), 3.0)", "array([24.   ,  1.875])"),
        "Derivatives: ``poch (digamma(z + m) - digamma(z))`` in ``z``, ``poch digamma(z + m)`` in ``m``.",
    ),
)

__all__ = [
    "betainc", "betaln", "binom", "digamma", "gamma", "gammainc", "gammaincc", "gammainccinv",
    "gammaincinv", "gammaln", "loggamma", "multigammaln", "poch", "polygamma", "psi", "rgamma", "zeta",
]  # fmt: skip
