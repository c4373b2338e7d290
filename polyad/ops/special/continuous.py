"""Distribution functions of continuous distributions and their inverses, in SciPy's raw form: chi-square
(``chdtr``, ``chdtrc``, ``chdtri``), gamma (``gdtr``, ``gdtrc``), F (``fdtr``, ``fdtrc``, ``fdtri``),
Student's t (``stdtr``, ``stdtrit``), and the incomplete beta function's complement and inverse
(``betaincc``, ``betaincinv``). SciPy's ufuncs on CPU arrays (the values SciPy's users get); cupyx on CUDA
arrays (``stdtr``, ``stdtrit`` and ``betaincc`` from cupyx's ``betainc`` and ``betaincinv``).

Each is ``gammainc`` or ``betainc`` at transformed arguments, so its derivatives are those of
``incomplete.py`` by the chain rule: in the variable, a density in closed form; in a degree of freedom or
shape parameter, the shape derivative of ``gammainc``/``betainc`` (to second order in the shape
parameters, every order in the variable on top). Inverses differentiate by the implicit function theorem
at their result: ``dx/dp = 1 / F_x``, ``dx/dv = -F_v / F_x``.
"""

import math

from polyad.ops.elementwise import exp, log, log1p, sign
from polyad.ops.special.gammas import betaln, gammaln
from polyad.ops.special.incomplete import beta_density, betainc_shape, gamma_density, gammainc_shape
from polyad.ops.special.shared import ELEMENTWISE, REAL, docstring, special_function

_DF = "a real array of degrees of freedom (positive)"


def _function(name, argnames, partials, summary, args, example, derivative):
    return special_function(
        name, argnames, partials, doc=docstring(summary, args, ELEMENTWISE, example, derivative)
    )


# --------------------------------------------------------------------------------------------- chi-square


def _chi2_df(v, x):
    return 0.5 * gammainc_shape(0.5 * v, 0.5 * x)


def _chi2_x(v, x):
    return 0.5 * gamma_density(0.5 * v, 0.5 * x)


_VX = (("v", _DF), ("x", "a real array, non-negative"))
_CHI2_DERIVATIVE = (
    "Derivatives: the chi-square density in ``x``; ``gammainc``'s shape derivative in ``v`` (to second order "
    "in ``v``)."
)

chdtr = _function(
    "chdtr",
    ("v", "x"),
    (lambda v, x, y: _chi2_df(v, x), lambda v, x, y: _chi2_x(v, x)),
    "The chi-square distribution function with ``v`` degrees of freedom: ``gammainc(v/2, x/2)``.",
    _VX,
    ("chdtr(3.0, np.array([1.0, 4.0]))", "array([0.19874804, 0.73853587])"),
    _CHI2_DERIVATIVE,
)

chdtrc = _function(
    "chdtrc",
    ("v", "x"),
    (lambda v, x, y: -_chi2_df(v, x), lambda v, x, y: -_chi2_x(v, x)),
    "The chi-square survival function: ``gammaincc(v/2, x/2)``.",
    _VX,
    ("chdtrc(3.0, np.array([1.0, 4.0]))", "array([0.80125196, 0.26146413])"),
    _CHI2_DERIVATIVE,
)

chdtri = _function(
    "chdtri",
    ("v", "p"),
    (
        lambda v, p, x: -gammainc_shape(0.5 * v, 0.5 * x) / gamma_density(0.5 * v, 0.5 * x),
        lambda v, p, x: -1.0 / _chi2_x(v, x),
    ),
    "The inverse of ``chdtrc`` in ``x``: ``chdtrc(v, chdtri(v, p)) == p``.",
    (("v", _DF), ("p", "a real array of probabilities")),
    ("chdtri(3.0, np.array([0.8, 0.25]))", "array([1.00517401, 4.10834494])"),
    "Derivatives (implicit): ``-1 / chdtrc_x`` in ``p``; ``-chdtrc_v / chdtrc_x`` in ``v``.",
)

# --------------------------------------------------------------------------------------------- gamma

_ABX = (("a", "a real array of rates (positive)"), ("b", "a real array of shapes (positive)"), ("x", REAL))

gdtr = _function(
    "gdtr",
    ("a", "b", "x"),
    (
        lambda a, b, x, y: x * gamma_density(b, a * x),
        lambda a, b, x, y: gammainc_shape(b, a * x),
        lambda a, b, x, y: a * gamma_density(b, a * x),
    ),
    "The gamma distribution function with rate ``a`` and shape ``b``: ``gammainc(b, a x)``.",
    _ABX,
    ("gdtr(2.0, 3.0, np.array([0.5, 2.0]))", "array([0.0803014 , 0.76189669])"),
    "Derivatives: ``x g``, ``gammainc``'s shape derivative and ``a g`` in ``a``, ``b``, ``x``, with ``g`` "
    "the gamma density at ``(b, a x)``.",
)

gdtrc = _function(
    "gdtrc",
    ("a", "b", "x"),
    (
        lambda a, b, x, y: -x * gamma_density(b, a * x),
        lambda a, b, x, y: -gammainc_shape(b, a * x),
        lambda a, b, x, y: -a * gamma_density(b, a * x),
    ),
    "The gamma survival function: ``gammaincc(b, a x)``.",
    _ABX,
    ("gdtrc(2.0, 3.0, np.array([0.5, 2.0]))", "array([0.9196986 , 0.23810331])"),
    "Derivatives: those of ``gdtr``, negated.",
)

# --------------------------------------------------------------------------------------------- F


def _f_parts(dfn, dfd, x):
    """``(w, f, s)``: ``fdtr = betainc(dfn/2, dfd/2, w)``, ``w = dfn x / s``, ``s = dfd + dfn x``, ``f`` the
    beta density at ``w``."""
    s = dfd + dfn * x
    w = dfn * x / s
    return w, beta_density(0.5 * dfn, 0.5 * dfd, w), s


def _fdtr_x(dfn, dfd, x):
    w, f, s = _f_parts(dfn, dfd, x)
    return f * dfn * dfd / (s * s)


def _fdtr_dfn(dfn, dfd, x):
    w, f, s = _f_parts(dfn, dfd, x)
    return 0.5 * betainc_shape(0.5 * dfn, 0.5 * dfd, w, (0,)) + f * x * dfd / (s * s)


def _fdtr_dfd(dfn, dfd, x):
    w, f, s = _f_parts(dfn, dfd, x)
    return 0.5 * betainc_shape(0.5 * dfn, 0.5 * dfd, w, (1,)) - f * dfn * x / (s * s)


_F = (("dfn", _DF), ("dfd", _DF), ("x", "a real array, non-negative"))

fdtr = _function(
    "fdtr",
    ("dfn", "dfd", "x"),
    (
        lambda dfn, dfd, x, y: _fdtr_dfn(dfn, dfd, x),
        lambda dfn, dfd, x, y: _fdtr_dfd(dfn, dfd, x),
        lambda dfn, dfd, x, y: _fdtr_x(dfn, dfd, x),
    ),
    "The F distribution function: ``betainc(dfn/2, dfd/2, dfn x / (dfd + dfn x))``.",
    _F,
    ("fdtr(3.0, 5.0, np.array([0.5, 2.0]))", "array([0.30154736, 0.76737608])"),
    "Derivatives: the F density in ``x``; through ``betainc``'s shape derivatives in ``dfn``, ``dfd``.",
)

fdtrc = _function(
    "fdtrc",
    ("dfn", "dfd", "x"),
    (
        lambda dfn, dfd, x, y: -_fdtr_dfn(dfn, dfd, x),
        lambda dfn, dfd, x, y: -_fdtr_dfd(dfn, dfd, x),
        lambda dfn, dfd, x, y: -_fdtr_x(dfn, dfd, x),
    ),
    "The F survival function, ``1 - fdtr``.",
    _F,
    ("fdtrc(3.0, 5.0, np.array([0.5, 2.0]))", "array([0.69845264, 0.23262392])"),
    "Derivatives: those of ``fdtr``, negated.",
)

fdtri = _function(
    "fdtri",
    ("dfn", "dfd", "p"),
    (
        lambda dfn, dfd, p, x: -_fdtr_dfn(dfn, dfd, x) / _fdtr_x(dfn, dfd, x),
        lambda dfn, dfd, p, x: -_fdtr_dfd(dfn, dfd, x) / _fdtr_x(dfn, dfd, x),
        lambda dfn, dfd, p, x: 1.0 / _fdtr_x(dfn, dfd, x),
    ),
    "The inverse of ``fdtr`` in ``x``: the F quantile of probability ``p``.",
    (("dfn", _DF), ("dfd", _DF), ("p", "a real array of probabilities")),
    ("fdtri(3.0, 5.0, np.array([0.3, 0.75]))", "array([0.49736246, 1.88426785])"),
    "Derivatives (implicit): ``1 / fdtr_x`` in ``p``; ``-fdtr_dfn / fdtr_x`` and ``-fdtr_dfd / fdtr_x``.",
)

# --------------------------------------------------------------------------------------------- Student t

_LOG_SQRT_PI = 0.5 * math.log(math.pi)


def _t_density(df, t):
    half = 0.5 * df
    log_norm = gammaln(half + 0.5) - gammaln(half) - 0.5 * log(df) - _LOG_SQRT_PI
    return exp(log_norm - (half + 0.5) * log1p(t * t / df))


def _stdtr_df(df, t):
    """``d stdtr / d df``: ``stdtr = tail`` (``t < 0``) or ``1 - tail``, ``tail = betainc(df/2, 1/2,
    x) / 2``, ``x = df / (df + t**2)``; written with ``t`` (not ``|t|``) where the sign cancels, so that
    it is smooth in ``t``."""
    half = 0.5 * df
    s = df + t * t
    x = df / s
    shape = betainc_shape(half, 0.5, x, (0,))
    slope = exp((half - 1.0) * log(x) - betaln(half, 0.5)) * s ** (-1.5)
    return -0.25 * sign(t) * shape - 0.5 * t * slope


_DF_T = (("df", _DF), ("t", REAL))

stdtr = _function(
    "stdtr",
    ("df", "t"),
    (lambda df, t, y: _stdtr_df(df, t), lambda df, t, y: _t_density(df, t)),
    "Student's t distribution function with ``df`` degrees of freedom.",
    _DF_T,
    ("stdtr(4.0, np.array([-1.0, 2.0]))", "array([0.18695048, 0.94194174])"),
    "Derivatives: the t density in ``t``; through ``betainc``'s shape derivative in ``df``.",
)

stdtrit = _function(
    "stdtrit",
    ("df", "p"),
    (
        lambda df, p, t: -_stdtr_df(df, t) / _t_density(df, t),
        lambda df, p, t: 1.0 / _t_density(df, t),
    ),
    "The inverse of ``stdtr`` in ``t``: the t quantile of probability ``p``.",
    (("df", _DF), ("p", "a real array of probabilities")),
    ("stdtrit(4.0, np.array([0.5, 0.975]))", "array([0.        , 2.77644511])"),
    "Derivatives (implicit): ``1 / density`` in ``p``; ``-stdtr_df / density`` in ``df``.",
)

# --------------------------------------------------------------------------------------------- betainc

_AB = (("a", "a real array of positive shape parameters"), ("b", "a real array of positive shape parameters"))

betaincc = _function(
    "betaincc",
    ("a", "b", "x"),
    (
        lambda a, b, x, y: -betainc_shape(a, b, x, (0,)),
        lambda a, b, x, y: -betainc_shape(a, b, x, (1,)),
        lambda a, b, x, y: -beta_density(a, b, x),
    ),
    "The complement of the regularised incomplete beta function, ``1 - betainc(a, b, x)``.",
    (*_AB, ("x", "a real array with values in [0, 1]")),
    ("betaincc(2.0, 3.0, np.array([0.25, 0.5]))", "array([0.73828125, 0.3125    ])"),
    "Derivatives: those of ``betainc``, negated.",
)

betaincinv = _function(
    "betaincinv",
    ("a", "b", "y"),
    (
        lambda a, b, y, x: -betainc_shape(a, b, x, (0,)) / beta_density(a, b, x),
        lambda a, b, y, x: -betainc_shape(a, b, x, (1,)) / beta_density(a, b, x),
        lambda a, b, y, x: 1.0 / beta_density(a, b, x),
    ),
    "The inverse of ``betainc`` in ``x``: ``betainc(a, b, betaincinv(a, b, y)) == y``.",
    (*_AB, ("y", "a real array of probabilities")),
    ("betaincinv(2.0, 3.0, np.array([0.25, 0.6875]))", "array([0.24302208, 0.5       ])"),
    "Derivatives (implicit): ``1 / density`` in ``y``; ``-betainc_a / density``, ``-betainc_b / density``.",
)

__all__ = [
    "betaincc", "betaincinv", "chdtr", "chdtrc", "chdtri", "fdtr", "fdtrc", "fdtri", "gdtr", "gdtrc",
    "stdtr", "stdtrit",
]  # fmt: skip
