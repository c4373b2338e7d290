"""The interop table: other people's Array API code (SciPy, scikit-learn) under polyad's transforms.

One row per function: how to call it on the sample inputs, which inputs are differentiated and mapped,
which transforms apply, and for each (function, transform) known to fail the cause and whose side it is
on ("polyad", "scipy" or "scikit-learn"). tests/interop/test_interop.py checks ``grad`` and ``jvp``
against central finite differences of the library's own eager results, and ``vmap`` against a loop of
eager calls. Known failures are strict xfails: one that starts passing fails the run until its entry
goes. Nothing here works around a gap: each function is called as its users call it.

SciPy must have been imported with ``SCIPY_ARRAY_API=1`` (the test module checks); scikit-learn's
functions run under ``sklearn.config_context(array_api_dispatch=True)``.
"""

import dataclasses
from collections.abc import Callable

import numpy as np
import scipy.fft as sfft
import scipy.integrate as integrate
import scipy.optimize as optimize
import scipy.signal as signal
import scipy.special as special
import scipy.stats as stats
import sklearn.decomposition as decomposition
import sklearn.linear_model as linear_model
import sklearn.metrics as metrics
import sklearn.metrics.pairwise as pairwise
import sklearn.preprocessing as preprocessing

import polyad as pa

TRANSFORMS = ("grad", "jvp", "vmap")
SIDES = ("polyad", "scipy", "scikit-learn")


@dataclasses.dataclass(frozen=True)
class Fail:
    """A known failure: whose side it is on and why (the xfail reason)."""

    side: str
    cause: str

    def __post_init__(self):
        assert self.side in SIDES, self.side


@dataclasses.dataclass
class Row:
    """One library function.

    Attributes:
        name: dotted public name ("scipy.stats.zscore").
        fn: ``fn(*arrays)`` calls the function as a user would (constant arguments baked in).
        inputs: ``inputs(rng) -> tuple of NumPy float64 arrays``; the test moves them to the backend.
        argnums: positions differentiated and mapped (the others are held fixed).
        known_failures: ``{transform: Fail}``.
        fast: part of the fast subset that ``make test`` runs.
        rtol, atol: tolerances against finite differences (and the loop, for vmap).
    """

    name: str
    fn: Callable
    inputs: Callable
    argnums: tuple = (0,)
    known_failures: dict = dataclasses.field(default_factory=dict)
    fast: bool = False
    rtol: float = 1e-5
    atol: float = 1e-6

    @property
    def library(self):
        return "scikit-learn" if self.name.startswith("sklearn") else "scipy"


# ------------------------------------------------------------------------------ sample inputs


def _vec(n=6, low=-1.0, high=1.0):
    return lambda rng: (rng.uniform(low, high, n),)


def _pos(n=6):
    return _vec(n, 0.2, 2.0)


def _prob(n=6):
    def make(rng):
        p = rng.uniform(0.2, 1.0, n)
        return (p / p.sum(),)

    return make


def _two(n=6, low=-1.0, high=1.0):
    return lambda rng: (rng.uniform(low, high, n), rng.uniform(low, high, n))


def _mat(m=6, n=3, low=-1.0, high=1.0):
    return lambda rng: (rng.uniform(low, high, (m, n)),)


def _regression(rng):
    return rng.uniform(-1.0, 1.0, (8, 3)), rng.uniform(-1.0, 1.0, 8)


LABELS = np.array([0, 1, 1, 0, 1, 0])
SIGNS = np.array([-1, 1, 1, -1, 1, -1])


def _probabilities(rng):
    return (rng.uniform(0.1, 0.9, 6),)


# ------------------------------------------------------------------------------ causes (grouped)

# polyad's side
FLOAT_ARITHMETIC = Fail(
    "polyad",
    "Python arithmetic on float(...) results (`1 - numerator / denominator`): CPython makes float() return "
    "an exact float, so the arithmetic is invisible to polyad; grad raises DerivativeLostWarning (an error "
    "in this suite) instead of a zero gradient, jvp refuses the float output",
)
# the libraries' side
SCIPY_MATH_ON_VALUE = Fail(
    "scipy",
    "math.log(abs(lmb)) of the traced lmb: CPython computes a plain float, so the term's derivative is "
    "lost; polyad reports it (DerivativeLostWarning naming math.log and the line, an error in this suite) "
    "instead of returning a wrong derivative, and vmap's examples give different numbers "
    "(ConcretizationError)",
)
SCIPY_NUMPY_ONLY = Fail("scipy", "no array API path: the function converts its input with np.asarray")
SCIPY_REAL_TRANSFORMS_NUMPY_ONLY = Fail(
    "scipy",
    "scipy.fft's real transforms (dct, dst, ...) have no array API path: SciPy's backend converts with "
    "np.asarray; polyad's scipy.fft backend computes them (pa.use_scipy_fft_backend(), the rows above)",
)
SKLEARN_NUMPY_ONLY = Fail(
    "scikit-learn",
    "no array API path: its NumPy code (np.ravel, dtype.kind) runs on polyad's tensors of NumPy arrays "
    "(polyad/interop/numpy), not on those of another library",
)
SKLEARN_FLOAT_RESULT = Fail(
    "scikit-learn",
    "the metric returns float(...) of its result: one Python number cannot hold a batch of values, so "
    "vmap raises ConcretizationError (vmap(chunk_size=1) loops)",
)


def _on(fail, *transforms):
    """``{transform: fail}`` for the given transforms (all of them when none are named)."""
    return dict.fromkeys(transforms or TRANSFORMS, fail)


# ------------------------------------------------------------------------------ rows

SCIPY_SPECIAL = [
    Row("scipy.special.logsumexp", special.logsumexp, _vec(), fast=True),
    Row(
        "scipy.special.logsumexp(axis=1, b=)",
        lambda x, b: special.logsumexp(x, axis=1, b=b),
        lambda rng: (rng.uniform(-1, 1, (3, 4)), rng.uniform(0.5, 1.5, (3, 4))),
        argnums=(0, 1),
    ),
    Row("scipy.special.softmax", special.softmax, _vec()),
    Row("scipy.special.log_softmax", special.log_softmax, _vec()),
    Row("scipy.special.expit", special.expit, _vec()),
    Row("scipy.special.logit", special.logit, _vec(low=0.1, high=0.9)),
    Row("scipy.special.erf", special.erf, _vec()),
    Row("scipy.special.erfc", special.erfc, _vec()),
    Row("scipy.special.ndtr", special.ndtr, _vec()),
    Row("scipy.special.log_ndtr", special.log_ndtr, _vec()),
    Row("scipy.special.ndtri", special.ndtri, _vec(low=0.1, high=0.9)),
    Row("scipy.special.gammaln", special.gammaln, _pos()),
    Row("scipy.special.digamma", special.digamma, _pos()),
    Row("scipy.special.i0", special.i0, _vec()),
    Row("scipy.special.xlogy", special.xlogy, _two(low=0.2, high=2.0), argnums=(0, 1)),
    Row(
        "scipy.special.xlog1py",
        special.xlog1py,
        _two(low=0.2, high=2.0),
        argnums=(0, 1),
    ),
    Row("scipy.special.entr", special.entr, _pos()),
    Row(
        "scipy.special.rel_entr",
        special.rel_entr,
        _two(low=0.2, high=2.0),
        argnums=(0, 1),
    ),
    Row(
        "scipy.special.kl_div",
        special.kl_div,
        _two(low=0.2, high=2.0),
        argnums=(0, 1),
    ),
]


def _args(*ranges, n=6):
    """One input per ``(low, high)`` range, each ``n`` uniform values."""
    return lambda rng: tuple(rng.uniform(lo, hi, n) for lo, hi in ranges)


def _special(name, fn, ranges, argnums=None, **kwargs):
    """A ``scipy.special`` function of the inputs ``ranges`` gives (constants baked into ``fn``),
    differentiated in every input unless ``argnums`` says."""
    argnums = tuple(range(len(ranges))) if argnums is None else argnums
    return Row(f"scipy.special.{name}", fn, _args(*ranges), argnums=argnums, **kwargs)


# the rest of SciPy's xp.special lookups, and derivatives in shape parameters: gammainc in a, betainc in
# a and b, zeta in its exponent, the distribution functions in their degrees of freedom
SCIPY_SPECIAL_MORE = [
    _special("gammainc(a, x)", special.gammainc, [(0.5, 3.0), (0.2, 4.0)]),
    _special("gammaincc(a, x)", special.gammaincc, [(0.5, 3.0), (0.2, 4.0)]),
    _special("gammaincinv(a, y)", special.gammaincinv, [(0.5, 3.0), (0.1, 0.9)]),
    _special("betainc(a, b, x)", special.betainc, [(0.5, 4.0), (0.5, 4.0), (0.05, 0.95)]),
    _special("betaincc(a, b, x)", special.betaincc, [(0.5, 4.0), (0.5, 4.0), (0.05, 0.95)]),
    _special("betaincinv(a, b, y)", special.betaincinv, [(0.5, 4.0), (0.5, 4.0), (0.1, 0.9)]),
    _special("zeta(x, q)", special.zeta, [(1.5, 5.0), (0.5, 3.0)]),
    _special("zeta(x)", special.zeta, [(1.5, 5.0)]),
    _special("zetac", special.zetac, [(1.5, 5.0)]),
    _special("chdtr(v, x)", special.chdtr, [(1.0, 8.0), (0.3, 6.0)]),
    _special("chdtrc(v, x)", special.chdtrc, [(1.0, 8.0), (0.3, 6.0)]),
    _special("chdtri(v, p)", special.chdtri, [(1.0, 8.0), (0.1, 0.9)]),
    _special("gdtr(a, b, x)", special.gdtr, [(0.5, 2.0), (0.5, 4.0), (0.2, 4.0)]),
    _special("gdtrc(a, b, x)", special.gdtrc, [(0.5, 2.0), (0.5, 4.0), (0.2, 4.0)]),
    _special("fdtr(dfn, dfd, x)", special.fdtr, [(1.0, 8.0), (2.0, 10.0), (0.2, 3.0)]),
    _special("fdtrc(dfn, dfd, x)", special.fdtrc, [(1.0, 8.0), (2.0, 10.0), (0.2, 3.0)]),
    _special("fdtri(dfn, dfd, p)", special.fdtri, [(1.0, 8.0), (2.0, 10.0), (0.1, 0.9)]),
    _special("stdtr(df, t)", special.stdtr, [(1.5, 10.0), (0.1, 3.0)]),
    _special("stdtrit(df, p)", special.stdtrit, [(1.5, 10.0), (0.55, 0.95)]),
    _special("bdtr(2, 6, p)", lambda p: special.bdtr(2, 6, p), [(0.1, 0.9)]),
    _special("bdtrc(2, 6, p)", lambda p: special.bdtrc(2, 6, p), [(0.1, 0.9)]),
    _special("bdtri(2, 6, y)", lambda y: special.bdtri(2, 6, y), [(0.1, 0.9)]),
    _special("nbdtr(2, 3, p)", lambda p: special.nbdtr(2, 3, p), [(0.1, 0.9)]),
    _special("nbdtrc(2, 3, p)", lambda p: special.nbdtrc(2, 3, p), [(0.1, 0.9)]),
    _special("nbdtri(2, 3, y)", lambda y: special.nbdtri(2, 3, y), [(0.1, 0.9)]),
    _special("pdtr(2, m)", lambda m: special.pdtr(2, m), [(0.2, 4.0)]),
    _special("pdtrc(2, m)", lambda m: special.pdtrc(2, m), [(0.2, 4.0)]),
    _special("pdtri(2, y)", lambda y: special.pdtri(2, y), [(0.1, 0.9)]),
    _special("boxcox(x, lmbda)", special.boxcox, [(0.3, 3.0), (-1.0, 1.0)]),
    _special("boxcox1p(x, lmbda)", special.boxcox1p, [(-0.5, 2.0), (-1.0, 1.0)]),
    _special("inv_boxcox(y, lmbda)", special.inv_boxcox, [(-1.0, 1.5), (-0.5, 0.5)]),
    _special("inv_boxcox1p(y, lmbda)", special.inv_boxcox1p, [(-1.0, 1.5), (-0.5, 0.5)]),
    _special("exprel", special.exprel, [(-3.0, 3.0)]),
    _special("cosm1", special.cosm1, [(-3.0, 3.0)]),
    _special("sindg", special.sindg, [(-170.0, 170.0)]),
    _special("cosdg", special.cosdg, [(-170.0, 170.0)]),
    _special("tandg", special.tandg, [(-80.0, 80.0)]),
    _special("cotdg", special.cotdg, [(10.0, 170.0)]),
    _special("radian(d, m, s)", special.radian, [(-90.0, 90.0), (0.0, 60.0), (0.0, 60.0)]),
    _special("ellipk", special.ellipk, [(-2.0, 0.9)]),
    _special("ellipkm1", special.ellipkm1, [(0.1, 2.0)]),
    _special("expn(2, x)", lambda x: special.expn(2, x), [(0.3, 3.0)]),
    _special("spence", special.spence, [(0.1, 3.0)]),
    _special("yn(2, x)", lambda x: special.yn(2, x), [(0.5, 3.0)]),
    _special("lpmv(1, 2.5, x)", lambda x: special.lpmv(1, 2.5, x), [(-0.8, 0.8)]),
    _special("hyp1f1(1.5, 2.5, x)", lambda x: special.hyp1f1(1.5, 2.5, x), [(-2.0, 2.0)]),
    _special("gammasgn", special.gammasgn, [(0.3, 3.0)]),
]

SCIPY_STATS = [
    Row("scipy.stats.zscore", stats.zscore, _vec(), fast=True),
    Row("scipy.stats.zmap", stats.zmap, _two(), argnums=(0, 1)),
    Row("scipy.stats.variation", stats.variation, _pos()),
    Row("scipy.stats.moment(order=3)", lambda x: stats.moment(x, order=3), _vec()),
    Row("scipy.stats.skew", stats.skew, _vec()),
    Row("scipy.stats.kurtosis", stats.kurtosis, _vec()),
    Row("scipy.stats.entropy", stats.entropy, _prob()),
    Row(
        "scipy.stats.entropy(qk, base=2)",
        lambda p, q: stats.entropy(p, q, base=2),
        lambda rng: (_prob()(rng)[0], _prob()(rng)[0]),
        argnums=(0, 1),
    ),
    Row("scipy.stats.differential_entropy", stats.differential_entropy, _vec(8)),
    Row("scipy.stats.gmean", stats.gmean, _pos()),
    Row("scipy.stats.hmean", stats.hmean, _pos()),
    Row(
        "scipy.stats.pmean(p=2)",
        lambda x: stats.pmean(x, 2.0),
        _pos(),
    ),
    Row("scipy.stats.sem", stats.sem, _vec()),
    Row("scipy.stats.trim_mean", lambda x: stats.trim_mean(x, 0.2), _vec(10)),
    Row("scipy.stats.iqr", stats.iqr, _vec(7)),
    Row(
        "scipy.stats.median_abs_deviation",
        stats.median_abs_deviation,
        _vec(7),
    ),
    Row("scipy.stats.circmean", stats.circmean, _vec()),
    Row("scipy.stats.circvar", stats.circvar, _vec()),
    Row("scipy.stats.circstd", stats.circstd, _vec()),
    Row(
        "scipy.stats.pearsonr",
        lambda x, y: stats.pearsonr(x, y).statistic,
        _two(),
        argnums=(0, 1),
    ),
    Row(
        "scipy.stats.ttest_1samp",
        lambda x: stats.ttest_1samp(x, 0.1).statistic,
        _vec(),
    ),
    # p-values and confidence intervals: distribution functions of the statistic
    Row("scipy.stats.ttest_1samp(...).pvalue", lambda x: stats.ttest_1samp(x, 0.1).pvalue, _vec()),
    Row(
        "scipy.stats.ttest_1samp(...).confidence_interval()",
        lambda x: tuple(stats.ttest_1samp(x, 0.1).confidence_interval()),
        _vec(),
    ),
    Row(
        "scipy.stats.ttest_ind(...).pvalue", lambda x, y: stats.ttest_ind(x, y).pvalue, _two(), argnums=(0, 1)
    ),
    Row(
        "scipy.stats.ttest_ind(equal_var=False).pvalue",
        lambda x, y: stats.ttest_ind(x, y, equal_var=False).pvalue,
        lambda rng: (rng.uniform(-1.0, 1.0, 6), rng.uniform(-0.5, 2.0, 8)),
        argnums=(0, 1),
    ),
    Row(
        "scipy.stats.ttest_rel(...).pvalue", lambda x, y: stats.ttest_rel(x, y).pvalue, _two(), argnums=(0, 1)
    ),
    Row("scipy.stats.pearsonr(...).pvalue", lambda x, y: stats.pearsonr(x, y).pvalue, _two(), argnums=(0, 1)),
    Row("scipy.stats.f_oneway(...).pvalue", lambda x, y: stats.f_oneway(x, y).pvalue, _two(), argnums=(0, 1)),
    Row("scipy.stats.bartlett(...).pvalue", lambda x, y: stats.bartlett(x, y).pvalue, _two(), argnums=(0, 1)),
    Row("scipy.stats.levene(...).pvalue", lambda x, y: stats.levene(x, y).pvalue, _two(), argnums=(0, 1)),
    Row(
        "scipy.stats.linregress(...).pvalue",
        lambda x, y: stats.linregress(x, y).pvalue,
        _two(),
        argnums=(0, 1),
        known_failures=_on(SCIPY_NUMPY_ONLY),
    ),
    Row("scipy.stats.skewtest(...).pvalue", lambda x: stats.skewtest(x).pvalue, _vec(10)),
    Row("scipy.stats.jarque_bera(...).pvalue", lambda x: stats.jarque_bera(x).pvalue, _vec(10)),
    Row("scipy.stats.chisquare(...).pvalue", lambda f: stats.chisquare(f).pvalue, _pos()),
    Row("scipy.stats.boxcox_llf(0.3, data)", lambda x: stats.boxcox_llf(0.3, x), _pos()),
    Row(
        "scipy.stats.boxcox_llf(lmb, data)",
        lambda lmb, x: stats.boxcox_llf(lmb, x),
        lambda rng: (rng.uniform(-0.5, 0.5, ()), rng.uniform(0.5, 2.0, 6)),
        argnums=(0, 1),
        known_failures=_on(SCIPY_MATH_ON_VALUE),
    ),
]


def _signal_and_kernel(n=16, k=3):
    return lambda rng: (rng.uniform(-1, 1, n), rng.uniform(-1, 1, k))


SCIPY_OTHER = [
    # writes through views: ``part = ret[..., :k]; part += overlap`` (its values were wrong before polyad
    # followed views)
    Row("scipy.signal.oaconvolve", signal.oaconvolve, _signal_and_kernel(), argnums=(0, 1), fast=True),
    Row(
        "scipy.signal.oaconvolve(mode='same')",
        lambda a, k: signal.oaconvolve(a, k, mode="same"),
        _signal_and_kernel(),
        argnums=(0, 1),
    ),
    Row(
        "scipy.signal.oaconvolve(mode='valid')",
        lambda a, k: signal.oaconvolve(a, k, mode="valid"),
        _signal_and_kernel(19, 5),
        argnums=(0, 1),
    ),
    Row("scipy.integrate.trapezoid", integrate.trapezoid, _vec()),
    Row("scipy.integrate.simpson", integrate.simpson, _vec(7), known_failures=_on(SCIPY_NUMPY_ONLY)),
    Row("scipy.optimize.rosen", optimize.rosen, _vec(4)),
]


def _power(f, **kwargs):
    """The power spectrum ``|f(x)|^2`` of a transform with complex output (the table compares reals)."""
    return lambda x: pa.xp.abs(f(x, **kwargs)) ** 2


def _polyad_backend(f, *args, **kwargs):
    """``f`` called as its users call it once polyad's backend for scipy.fft is active."""

    def call(x):
        with pa.use_scipy_fft_backend():
            return f(x, *args, **kwargs)

    return call


# with SCIPY_ARRAY_API=1 SciPy sends the FFTs to the namespace of their input (polyad.xp.fft); the real
# transforms need polyad's scipy.fft backend (polyad/interop/scipy_fft.py)
SCIPY_FFT = [
    Row("scipy.fft.fft |.|^2", _power(sfft.fft), _vec(8), fast=True),
    Row("scipy.fft.rfft(norm='ortho') |.|^2", _power(sfft.rfft, norm="ortho"), _vec(7)),
    Row("scipy.fft.irfft(n=10)", lambda x: sfft.irfft(x, n=10), _vec(6)),
    Row("scipy.fft.hfft", sfft.hfft, _vec(5)),
    Row("scipy.fft.ihfft |.|^2", _power(sfft.ihfft), _vec(6)),
    Row("scipy.fft.fft2 |.|^2", _power(sfft.fft2), _mat(4, 3)),
    Row("scipy.fft.rfftn(s=(4, 6)).real", lambda x: pa.xp.real(sfft.rfftn(x, s=(4, 6))), _mat(4, 3)),
    Row("scipy.fft.irfftn(s=(4, 4))", lambda x: sfft.irfftn(x, s=(4, 4)), _mat(4, 3)),
    Row("scipy.fft.hfftn", sfft.hfftn, _mat(3, 3)),
    Row("scipy.fft.ihfft2 |.|^2", _power(sfft.ihfft2), _mat(4, 4)),
    Row("scipy.fft.fftshift", sfft.fftshift, _vec(7)),
    Row(
        "scipy.fft.rfftfreq(xp=) weighted spectrum",
        lambda x: pa.xp.abs(sfft.rfft(x)) ** 2 * sfft.rfftfreq(8, d=0.1, xp=pa.xp) ** 2,
        _vec(8),
    ),
    Row("scipy.fft.dct (polyad's backend)", _polyad_backend(sfft.dct, norm="ortho"), _vec(), fast=True),
    Row("scipy.fft.idct(type=1) (polyad's backend)", _polyad_backend(sfft.idct, 1), _vec()),
    Row("scipy.fft.dst(type=4) (polyad's backend)", _polyad_backend(sfft.dst, type=4, n=8), _vec()),
    Row("scipy.fft.idst(type=3) (polyad's backend)", _polyad_backend(sfft.idst, 3, norm="forward"), _vec()),
    Row("scipy.fft.dctn (polyad's backend)", _polyad_backend(sfft.dctn, 2, s=(5, 2)), _mat(4, 3)),
    Row("scipy.fft.idctn(type=4) (polyad's backend)", _polyad_backend(sfft.idctn, 4, axes=0), _mat(4, 3)),
    Row("scipy.fft.dstn(type=1) (polyad's backend)", _polyad_backend(sfft.dstn, 1, norm="ortho"), _mat(3, 4)),
    Row("scipy.fft.idstn (polyad's backend)", _polyad_backend(sfft.idstn, orthogonalize=True), _mat(3, 4)),
    Row("scipy.fft.dct (without polyad's backend)", sfft.dct, _vec(),
        known_failures=_on(SCIPY_REAL_TRANSFORMS_NUMPY_ONLY)),
]  # fmt: skip

# the regression and classification metrics return float(...) of the result
_METRIC = _on(SKLEARN_FLOAT_RESULT, "vmap")


def _metric(name, fn, inputs=None, **kwargs):
    """A regression metric ``fn(y_true, y_pred)``, differentiated and mapped in both (rows share
    ``_METRIC``'s failures)."""
    fn = getattr(metrics, name) if fn is None else fn
    inputs = _two() if inputs is None else inputs
    return Row(f"sklearn.metrics.{name}", fn, inputs, argnums=(0, 1), known_failures=_METRIC, **kwargs)


_POSITIVE = _two(low=0.2, high=2.0)

SKLEARN_METRICS = [
    _metric("mean_squared_error", None, fast=True),
    _metric("root_mean_squared_error", None),
    _metric("mean_absolute_error", None),
    _metric("r2_score", None),
    _metric("explained_variance_score", None),
    _metric("mean_tweedie_deviance(power=1.5)", lambda y, p: metrics.mean_tweedie_deviance(y, p, power=1.5),
            _POSITIVE),
    _metric("mean_poisson_deviance", None, _POSITIVE),
    _metric("mean_gamma_deviance", None, _POSITIVE),
    Row("sklearn.metrics.d2_tweedie_score(power=1.5)", lambda y, p: metrics.d2_tweedie_score(y, p, power=1.5),
        _POSITIVE, argnums=(0, 1), known_failures={**_METRIC, **_on(FLOAT_ARITHMETIC, "grad", "jvp")}),
    _metric("mean_absolute_percentage_error", None, _POSITIVE),
    _metric("mean_squared_log_error", None, _POSITIVE),
    # classification: labels fixed, the probabilities or decisions differentiated
    Row("sklearn.metrics.log_loss", lambda p: metrics.log_loss(LABELS, p), _probabilities,
        known_failures=_METRIC),
    Row("sklearn.metrics.brier_score_loss", lambda p: metrics.brier_score_loss(LABELS, p), _probabilities,
        known_failures=_METRIC),
    # its NumPy code (np.ravel, np.clip...) runs on polyad's tensors (polyad/interop/numpy/): grad, jvp exact
    Row("sklearn.metrics.hinge_loss", lambda d: metrics.hinge_loss(SIGNS, d), _vec(low=-0.5, high=0.5),
        known_failures=_METRIC if pa.get_backend() == "numpy" else _on(SKLEARN_NUMPY_ONLY)),
]  # fmt: skip

SKLEARN_PAIRWISE = [
    Row(
        f"sklearn.metrics.pairwise.{f.__name__}",
        f,
        _mat(5, 3, 0.1, 1.0),
    )
    for f in (
        pairwise.cosine_similarity,
        pairwise.cosine_distances,
        pairwise.euclidean_distances,
        pairwise.manhattan_distances,
        pairwise.linear_kernel,
        pairwise.polynomial_kernel,
        pairwise.rbf_kernel,
        pairwise.laplacian_kernel,
        pairwise.sigmoid_kernel,
        pairwise.chi2_kernel,
        pairwise.additive_chi2_kernel,
    )
] + [
    Row(
        "sklearn.metrics.pairwise.paired_euclidean_distances",
        pairwise.paired_euclidean_distances,
        lambda rng: (rng.uniform(-1, 1, (5, 3)), rng.uniform(-1, 1, (5, 3))),
        argnums=(0, 1),
    ),
]


def _fit_transform(cls, **kwargs):
    return lambda x: cls(**kwargs).fit_transform(x)


SKLEARN_ESTIMATORS = [
    Row(
        "sklearn.preprocessing.StandardScaler",
        _fit_transform(preprocessing.StandardScaler),
        _mat(),
        fast=True,
    ),
    Row(
        "sklearn.preprocessing.MinMaxScaler",
        _fit_transform(preprocessing.MinMaxScaler),
        _mat(),
    ),
    Row(
        "sklearn.preprocessing.MaxAbsScaler",
        _fit_transform(preprocessing.MaxAbsScaler),
        _mat(),
    ),
    Row(
        "sklearn.preprocessing.Normalizer",
        _fit_transform(preprocessing.Normalizer),
        _mat(),
    ),
    Row(
        "sklearn.preprocessing.normalize",
        preprocessing.normalize,
        _mat(),
    ),
    Row(
        "sklearn.preprocessing.KernelCenterer",
        _fit_transform(preprocessing.KernelCenterer),
        lambda rng: ((lambda a: a @ a.T)(rng.uniform(-1, 1, (5, 3))),),
    ),
    Row(
        "sklearn.preprocessing.PolynomialFeatures",
        _fit_transform(preprocessing.PolynomialFeatures),
        _mat(4, 2),
    ),
    Row(
        "sklearn.linear_model.Ridge(solver='svd').coef_",
        lambda x, y: linear_model.Ridge(alpha=1.0, solver="svd").fit(x, y).coef_,
        _regression,
        argnums=(0, 1),
    ),
    Row(
        "sklearn.decomposition.PCA(svd_solver='full')",
        _fit_transform(decomposition.PCA, n_components=2, svd_solver="full"),
        _mat(),
    ),
]

ROWS = (
    SCIPY_SPECIAL
    + SCIPY_SPECIAL_MORE
    + SCIPY_STATS
    + SCIPY_OTHER
    + SCIPY_FFT
    + SKLEARN_METRICS
    + SKLEARN_PAIRWISE
    + SKLEARN_ESTIMATORS
)
BY_NAME = {row.name: row for row in ROWS}
assert len(BY_NAME) == len(ROWS), "row names must be unique"
