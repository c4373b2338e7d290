"""CUDA kernels for polyad's shipped custom ops and special functions, ``{op name: {device type:
kernel(xp, *arrays, **params)}}``; the core attaches them to the ops when the cupy backend loads.

The discrete cosine and sine transforms (``polyad.xp.fft.dct``, ...): cupyx.scipy.fft implements types 2
and 3 (SciPy's default orthogonalization for each norm, as polyad's ops compute, complex input part by
part); types 1 and 4 run polyad's generic kernel, built from ``cupy.fft``.

Special functions (``polyad.xp.special``): those without an Array API formula have no generic kernel, so
on CUDA arrays these cupyx kernels are the only ones; for those with one, cupyx's fused kernel replaces
the chain of element-wise launches the generic kernel would make.
"""

import cupy
import cupyx.scipy.fft as _fft
import cupyx.scipy.special as _special

from .elementwise_kernels import softplus
from .linalg_kernels import LINALG

KERNELS = {"polyad::softplus": {"cuda": lambda xp, x: softplus(x)}}

# polyad.xp.special functions cupyx has under the same name (and the same arguments, in order)
SPECIAL = (
    # no generic kernel in polyad
    "erf", "erfc", "erfinv", "erfcx", "ndtr", "ndtri", "log_ndtr", "expi", "exp1",
    "gammaln", "gamma", "loggamma", "rgamma", "digamma", "gammainc", "gammaincc", "gammaincinv",
    "gammainccinv", "betaln", "betainc", "binom", "poch",
    "i0", "i0e", "i1", "i1e", "j0", "j1", "y0", "y1", "k0", "k0e", "k1", "k1e",
    # a generic kernel, replaced by one fused kernel
    "expit", "logit", "log_expit", "xlogy", "xlog1py", "entr", "rel_entr", "kl_div", "huber",
    "pseudo_huber", "exp2", "exp10", "cbrt",
    # the rest of SciPy's lookups: no generic kernel in polyad
    "expn", "yn", "lpmv", "zetac", "bdtr", "bdtrc", "bdtri", "nbdtr", "nbdtrc", "nbdtri", "pdtr", "pdtrc",
    "pdtri", "chdtr", "chdtrc", "chdtri", "gdtr", "gdtrc", "fdtr", "fdtrc", "fdtri", "betaincinv",
    # ... and a generic kernel, replaced by one fused kernel
    "cosdg", "sindg", "tandg", "cotdg", "radian", "cosm1", "exprel", "boxcox", "boxcox1p", "inv_boxcox",
    "inv_boxcox1p", "ellipk", "ellipkm1", "gammasgn",
)  # fmt: skip


def _cupyx(fn):
    return lambda xp, *args: fn(*args)


def _like_arrays(args):
    """Python scalars among ``args`` as CuPy arrays of the first array's dtype (for cupyx functions that
    are compositions, not ufuncs)."""
    like = next(a for a in args if isinstance(a, cupy.ndarray))
    return [a if isinstance(a, cupy.ndarray) else cupy.asarray(a, dtype=like.dtype) for a in args]


KERNELS.update({f"special.{name}": {"cuda": _cupyx(getattr(_special, name))} for name in SPECIAL})
KERNELS.update(
    {
        "special.polygamma": {"cuda": lambda xp, n, x: _special.polygamma(*_like_arrays((n, x)))},
        "special.zeta": {"cuda": _cupyx(_special.zeta)},  # Hurwitz: zeta(x, q)
        "special.riemann_zeta": {"cuda": lambda xp, x: _special.zetac(x) + 1.0},
        "special.sinc": {"cuda": _cupyx(cupy.sinc)},  # the normalised sinc, as SciPy's
        "special.betaincc": {"cuda": lambda xp, a, b, x: _special.betainc(b, a, 1.0 - x)},
        "special.stdtr": {"cuda": lambda xp, df, t: _stdtr(df, t)},
        "special.stdtrit": {"cuda": lambda xp, df, p: _stdtrit(df, p)},
    }
)
KERNELS.update(LINALG)  # the structured solves of polyad.linalg (linalg_kernels.py)


# Student's t from the incomplete beta function (cupyx has neither stdtr nor stdtrit): the two-sided
# tail probability of |t| is betainc(df/2, 1/2, df / (df + t**2))
def _stdtr(df, t):
    tail = 0.5 * _special.betainc(0.5 * df, 0.5, df / (df + t * t))
    return cupy.where(t < 0, tail, 1.0 - tail)


def _stdtrit(df, p):
    x = _special.betaincinv(0.5 * df, 0.5, 2.0 * cupy.minimum(p, 1.0 - p))
    t = cupy.sqrt(df * (1.0 / x - 1.0))
    return cupy.where(p < 0.5, -t, t)


def _real_transform(name, t):
    f = getattr(_fft, name)
    return lambda xp, x, *, s, axes, norm: f(x, type=t, s=s, axes=axes, norm=norm)


KERNELS.update(
    {
        f"fft.{family}n_type{t}": {"cuda": _real_transform(family + "n", t)}
        for family in ("dct", "dst")
        for t in (2, 3)
    }
)
