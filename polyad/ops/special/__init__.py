"""Special functions, exposed as ``polyad.xp.special``: the names SciPy looks up on an array's namespace
(``xp.special.<name>``, with ``SCIPY_ARRAY_API=1``) before it falls back to NumPy, so that
``scipy.special`` and the ``scipy.stats`` functions built on it run on polyad's tensors, differentiated
and batched.

One file per sub-family, each importing only the ones before it:

- ``shared``: the op definer (partial derivatives -> VJP, JVP, batching, abstract evaluation), the SciPy
  kernel for CPU arrays, argument dtypes, ``NoDerivative``, docstrings, a series helper;
- ``elementary``: functions with a generic Array API kernel (``expit``, ``logit``, ``xlogy``, ``entr``,
  ``sinc``, ...);
- ``errors``: ``erf`` and relatives, the normal distribution, the exponential integrals;
- ``gammas``: gamma, digamma, polygamma, incomplete gamma and beta, zeta, ...;
- ``bessels``: Bessel functions of orders 0 and 1;
- ``reductions``: ``logsumexp``, ``softmax``, ``log_softmax``;
- ``numerics``: Bernoulli numbers, series with an exact branch, second-order jets, host kernels (no
  public function);
- ``trigonometric``: ``sindg``, ``cosdg``, ``tandg``, ``cotdg``, ``radian``, ``cosm1``;
- ``boxcox``: ``exprel``, ``boxcox``, ``boxcox1p``, ``inv_boxcox``, ``inv_boxcox1p``;
- ``elliptic``: ``ellipk``, ``ellipkm1``, ``ellipe``;
- ``integrals``: ``expn``, ``spence``;
- ``orthogonal``: ``yn``, ``lpmv``, ``hyp1f1``;
- ``gamma_zeta``: ``gammasgn``, ``zetac``, and ``zeta``'s derivative in its exponent;
- ``incomplete``: the derivatives of ``gammainc``/``betainc`` (and their inverses) in shape parameters;
- ``continuous``: ``chdtr``, ``chdtrc``, ``chdtri``, ``gdtr``, ``gdtrc``, ``fdtr``, ``fdtrc``, ``fdtri``,
  ``stdtr``, ``stdtrit``, ``betaincc``, ``betaincinv``;
- ``discrete``: ``bdtr``, ``bdtrc``, ``bdtri``, ``nbdtr``, ``nbdtrc``, ``nbdtri``, ``pdtr``, ``pdtrc``,
  ``pdtri``.

Arguments are arrays, positional, real: integer arrays are promoted to the default floating dtype (as
SciPy's ufuncs compute them) and complex ones refused. ``NAMES`` lists the public functions.
"""

from polyad.ops.special import incomplete  # noqa: F401
from polyad.ops.special.bessels import i0, i0e, i1, i1e, j0, j1, k0, k0e, k1, k1e, y0, y1
from polyad.ops.special.boxcox import boxcox, boxcox1p, exprel, inv_boxcox, inv_boxcox1p
from polyad.ops.special.continuous import (
    betaincc,
    betaincinv,
    chdtr,
    chdtrc,
    chdtri,
    fdtr,
    fdtrc,
    fdtri,
    gdtr,
    gdtrc,
    stdtr,
    stdtrit,
)
from polyad.ops.special.discrete import bdtr, bdtrc, bdtri, nbdtr, nbdtrc, nbdtri, pdtr, pdtrc, pdtri
from polyad.ops.special.elementary import (
    cbrt,
    entr,
    exp2,
    exp10,
    expit,
    huber,
    kl_div,
    log_expit,
    logit,
    pseudo_huber,
    rel_entr,
    sinc,
    softplus,
    xlog1py,
    xlogy,
)
from polyad.ops.special.elliptic import ellipe, ellipk, ellipkm1
from polyad.ops.special.errors import erf, erfc, erfcx, erfinv, exp1, expi, log_ndtr, ndtr, ndtri
from polyad.ops.special.gamma_zeta import gammasgn, zetac
from polyad.ops.special.gammas import (
    betainc,
    betaln,
    binom,
    digamma,
    gamma,
    gammainc,
    gammaincc,
    gammainccinv,
    gammaincinv,
    gammaln,
    loggamma,
    multigammaln,
    poch,
    polygamma,
    psi,
    rgamma,
    zeta,
)
from polyad.ops.special.integrals import expn, spence
from polyad.ops.special.orthogonal import hyp1f1, lpmv, yn
from polyad.ops.special.reductions import log_softmax, logsumexp, softmax
from polyad.ops.special.shared import PUBLIC, NoDerivative, special_function
from polyad.ops.special.trigonometric import cosdg, cosm1, cotdg, radian, sindg, tandg

ALIASES = {"psi": "digamma"}  # SciPy's names for functions polyad lists under another
NAMES = tuple(PUBLIC) + tuple(ALIASES)  # polyad.xp.special's functions

# the functions built by shared.special_function belong to no family file's namespace: doctest finds
# their examples through this table (those written with ``def`` it finds in their own files)
__test__ = {name: f for name, f in PUBLIC.items() if f.__module__ == special_function.__module__}

__all__ = [
    "ALIASES", "NAMES", "NoDerivative",
    "bdtr", "bdtrc", "bdtri", "betainc", "betaincc", "betaincinv", "betaln", "binom", "boxcox", "boxcox1p",
    "cbrt", "chdtr", "chdtrc", "chdtri", "cosdg", "cosm1", "cotdg", "digamma", "ellipe", "ellipk",
    "ellipkm1", "entr", "erf", "erfc", "erfcx", "erfinv", "exp1", "exp10", "exp2", "expi", "expit", "expn",
    "exprel", "fdtr", "fdtrc", "fdtri", "gamma", "gammainc", "gammaincc", "gammainccinv", "gammaincinv",
    "gammaln", "gammasgn", "gdtr", "gdtrc", "huber", "hyp1f1", "i0", "i0e", "i1", "i1e", "inv_boxcox",
    "inv_boxcox1p", "j0", "j1", "k0", "k0e", "k1", "k1e", "kl_div", "log_expit", "log_ndtr", "log_softmax",
    "loggamma", "logit", "logsumexp", "lpmv", "multigammaln", "nbdtr", "nbdtrc", "nbdtri", "ndtr", "ndtri",
    "pdtr", "pdtrc", "pdtri", "poch", "polygamma", "pseudo_huber", "psi", "radian", "rel_entr", "rgamma",
    "sinc", "sindg", "softmax", "softplus", "spence", "stdtr", "stdtrit", "tandg", "xlog1py", "xlogy", "y0",
    "y1", "yn", "zeta", "zetac",
]  # fmt: skip
