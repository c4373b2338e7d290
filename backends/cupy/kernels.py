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

_softplus = cupy.ElementwiseKernel(
    "T x",
    "T y",
    "y = fmax(x, (T)0) + log1p(exp(-fabs(x)))",
    "polyad_softplus",
)

KERNELS = {"polyad::softplus": {"cuda": lambda xp, x: _softplus(x)}}

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
    }
)


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
