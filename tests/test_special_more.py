"""The special functions added for the rest of SciPy's ``xp.special`` lookups, and the derivatives in shape
parameters, beyond the op table: the shape derivatives of ``gammainc``/``betainc`` and the exponent
derivatives of ``zeta`` against mpmath at many points; the distribution functions' derivatives in their
degrees of freedom against mpmath; the inverses against the implicit function theorem; values and
derivatives at removable singularities against closed forms; SciPy's values at the edges of each domain,
for SciPy's kernel and for the generic one; a series that does not converge gives nan, not a value."""

import math
import os
import subprocess
import sys

import numpy as np
import pytest
from helpers import native_device_type, to_numpy

import polyad as pa
from polyad.core import dispatch
from polyad.ops.special import incomplete
from polyad.ops.special.gamma_zeta import zeta_exponent
from polyad.ops.special.incomplete import betainc_shape, gammainc_shape
from polyad.testing.op_table import BY_NAME
from polyad.xp import special

mp = pytest.importorskip("mpmath")
scipy_special = pytest.importorskip("scipy.special")

BX = dispatch.default_backend().xp
xp = pa.xp


def arr(values, dtype=np.float64):
    return BX.asarray(np.asarray(values, dtype=dtype))


def np_of(x):
    return np.asarray(to_numpy(x), dtype=np.float64)


def _relative_error(got, ref):
    """``|got/ref - 1|``, and ``|got|/1e-300`` where mpmath's value underflows double precision."""
    got, ref = np.asarray(got), np.asarray(ref)
    safe = np.where(ref == 0, 1.0, ref)
    with np.errstate(over="ignore"):  # the branch not taken
        return np.where(ref == 0, np.abs(got) / 1e-300, np.abs(got / safe - 1.0))


# ------------------------------------------------------------------------------ shape derivatives


def _dp_da(a, x, order):
    """``d^order P(a, x) / da^order`` by mpmath: from ``P`` where it is below 1/2, else from ``-Q`` (no
    cancellation against 1)."""
    with mp.workdps(40):
        if mp.gammainc(a, 0, x, regularized=True) < 0.5:
            return float(mp.diff(lambda s: mp.gammainc(s, 0, x, regularized=True), a, order))
        return float(-mp.diff(lambda s: mp.gammainc(s, x, mp.inf, regularized=True), a, order))


def _di_dab(a, b, x, orders):
    """A derivative of ``I_x(a, b)`` in ``(a, b)`` by mpmath, from ``1 - I_{1-x}(b, a)`` above 1/2."""
    with mp.workdps(40):
        if mp.betainc(a, b, 0, x, regularized=True) < 0.5:
            return float(mp.diff(lambda p, q: mp.betainc(p, q, 0, x, regularized=True), (a, b), orders))
        y = 1 - mp.mpf(x)
        return float(-mp.diff(lambda p, q: mp.betainc(q, p, 0, y, regularized=True), (a, b), orders))


@pytest.mark.parametrize("order", [1, 2])
def test_gammainc_shape_derivatives_match_mpmath(order):
    """60 points with ``a`` log-uniform in [0.05, 1000] and ``x/a`` in [0.02, 5]: both algorithms (series
    and continued fraction), values from 1e-300 to 1; relative error within 1e-11."""
    rng = np.random.default_rng(1)
    a = np.exp(rng.uniform(math.log(0.05), math.log(1000.0), 60))
    x = a * np.exp(rng.uniform(math.log(0.02), math.log(5.0), 60))
    got = np_of(gammainc_shape(arr(a), arr(x), order))
    ref = [_dp_da(ai, xi, order) for ai, xi in zip(a, x)]
    assert _relative_error(got, ref).max() < 1e-11


@pytest.mark.parametrize("wrt", [(0,), (1,), (0, 0), (0, 1), (1, 1)])
def test_betainc_shape_derivatives_match_mpmath(wrt):
    """40 points with ``a``, ``b`` log-uniform in [0.1, 300] and ``x`` in (0, 1), on both sides of the
    continued fraction's switch; relative error within 1e-11."""
    rng = np.random.default_rng(2)
    a = np.exp(rng.uniform(math.log(0.1), math.log(300.0), 40))
    b = np.exp(rng.uniform(math.log(0.1), math.log(300.0), 40))
    x = rng.uniform(0.005, 0.995, 40)
    orders = (wrt.count(0), wrt.count(1))
    got = np_of(betainc_shape(arr(a), arr(b), arr(x), wrt))
    ref = [_di_dab(ai, bi, xi, orders) for ai, bi, xi in zip(a, b, x)]
    assert _relative_error(got, ref).max() < 1e-11


@pytest.mark.parametrize("order", [1, 2, 3])
def test_zeta_exponent_derivatives_match_mpmath(order):
    """Hurwitz's zeta for ``x`` in (1, 60) and ``q`` in (0.05, 50), Riemann's also below 1."""
    rng = np.random.default_rng(3)
    x = np.concatenate([1.0 + np.exp(rng.uniform(math.log(0.01), math.log(60.0), 30)), [0.1, 0.5, 0.9]])
    q = np.concatenate([np.exp(rng.uniform(math.log(0.05), math.log(50.0), 30)), [1.0, 1.0, 1.0]])
    got = np_of(zeta_exponent(arr(x), arr(q), order))
    with mp.workdps(30):
        ref = [float(mp.zeta(xi, qi, order)) for xi, qi in zip(x, q)]
    assert _relative_error(got, ref).max() < 1e-12


def _orders(n, *indices):
    """mpmath's derivative orders for the partial derivative in the arguments ``indices`` of ``n``."""
    return tuple(indices.count(k) for k in range(n))


def test_derivatives_through_the_public_functions_match_mpmath():
    """grad and hessian of gammainc, betainc and zeta in every argument, mixed second derivatives too."""

    def hessian_ref(f, point):
        n = len(point)
        with mp.workdps(40):
            return np.array(
                [[float(mp.diff(f, point, _orders(n, i, j))) for j in range(n)] for i in range(n)]
            )  # fmt: skip

    cases = [
        (lambda v: special.gammainc(v[0], v[1]), lambda a, x: mp.gammainc(a, 0, x, regularized=True),
         (2.5, 1.7)),
        (lambda v: special.gammaincc(v[0], v[1]), lambda a, x: mp.gammainc(a, x, mp.inf, regularized=True),
         (0.7, 3.2)),
        (lambda v: special.betainc(v[0], v[1], v[2]),
         lambda a, b, x: mp.betainc(a, b, 0, x, regularized=True), (2.0, 3.5, 0.4)),
        (lambda v: special.zeta(v[0], v[1]), lambda s, q: mp.zeta(s, q), (2.5, 0.7)),
    ]  # fmt: skip
    for f, f_mp, point in cases:
        h = np_of(pa.hessian(f)(arr(point)))
        np.testing.assert_allclose(h, hessian_ref(f_mp, point), rtol=1e-11)


def _mp_stdtr(df, t):
    tail = mp.betainc(df / 2, mp.mpf(1) / 2, 0, df / (df + t * t), regularized=True) / 2
    return tail if t < 0 else 1 - tail


_F = (3.0, 7.0, 1.3)
# (function, its mpmath form, point): derivatives in the degrees of freedom and shapes
DISTRIBUTIONS = [
    ("chdtr", lambda v, x: mp.gammainc(v / 2, 0, x / 2, regularized=True), (3.5, 2.0)),
    ("chdtrc", lambda v, x: mp.gammainc(v / 2, x / 2, mp.inf, regularized=True), (3.5, 2.0)),
    ("gdtr", lambda a, b, x: mp.gammainc(b, 0, a * x, regularized=True), (1.5, 2.5, 1.2)),
    ("gdtrc", lambda a, b, x: mp.gammainc(b, a * x, mp.inf, regularized=True), (1.5, 2.5, 1.2)),
    ("fdtr", lambda m, n, x: mp.betainc(m / 2, n / 2, 0, m * x / (n + m * x), regularized=True), _F),
    ("fdtrc", lambda m, n, x: mp.betainc(n / 2, m / 2, 0, n / (n + m * x), regularized=True), _F),
    ("stdtr", _mp_stdtr, (4.5, 1.3)),
    ("stdtr", _mp_stdtr, (2.5, -0.7)),
    ("betaincc", lambda a, b, x: mp.betainc(a, b, x, 1, regularized=True), (2.0, 3.5, 0.4)),
]  # fmt: skip


@pytest.mark.parametrize("name, f_mp, point", DISTRIBUTIONS, ids=[d[0] for d in DISTRIBUTIONS])
def test_distribution_derivatives_match_mpmath(name, f_mp, point):
    fn = getattr(special, name)
    g = np_of(pa.grad(lambda v: fn(*[v[i] for i in range(len(point))]))(arr(point)))
    with mp.workdps(40):
        ref = [
            float(mp.diff(f_mp, point, tuple(int(k == i) for k in range(len(point)))))
            for i in range(len(point))
        ]
    np.testing.assert_allclose(g, ref, rtol=1e-11)


# (inverse, forward, the inverse's arguments, index of the probability): F(..., Finv(..., y)) == y, so its
# derivative is 1 in y and 0 in every parameter, first and second order
INVERSES = [
    ("gammaincinv", lambda a, y, x: special.gammainc(a, x), (2.5, 0.3)),
    ("gammainccinv", lambda a, y, x: special.gammaincc(a, x), (0.8, 0.6)),
    ("betaincinv", lambda a, b, y, x: special.betainc(a, b, x), (2.0, 3.5, 0.7)),
    ("chdtri", lambda v, p, x: special.chdtrc(v, x), (3.5, 0.4)),
    ("fdtri", lambda m, n, p, x: special.fdtr(m, n, x), (3.0, 7.0, 0.6)),
    ("stdtrit", lambda df, p, t: special.stdtr(df, t), (4.5, 0.8)),
    ("stdtrit", lambda df, p, t: special.stdtr(df, t), (2.5, 0.3)),
]


@pytest.mark.parametrize("name, forward, point", INVERSES, ids=[i[0] for i in INVERSES])
def test_inverse_derivatives_satisfy_the_implicit_function_theorem(name, forward, point):
    inverse = getattr(special, name)
    n = len(point)

    def roundtrip(v):
        args = [v[i] for i in range(n)]
        return forward(*args, inverse(*args))

    expected = np.zeros(n)
    expected[-1] = 1.0
    np.testing.assert_allclose(np_of(pa.grad(roundtrip)(arr(point))), expected, atol=1e-10)
    np.testing.assert_allclose(np_of(pa.hessian(roundtrip)(arr(point))), np.zeros((n, n)), atol=1e-9)


def test_discrete_inverses_satisfy_the_implicit_function_theorem():
    y = arr([0.2, 0.5, 0.8])
    cases = [(special.bdtri, special.bdtr, (2.0, 6.0)), (special.nbdtri, special.nbdtr, (2.0, 3.0)),
             (special.pdtri, special.pdtr, (3.0,))]  # fmt: skip
    for inverse, forward, counts in cases:
        g = pa.grad(lambda v, f=forward, i=inverse, c=counts: xp.sum(f(*c, i(*c, v))))(y)
        np.testing.assert_allclose(np_of(g), np.ones(3), rtol=1e-10)


def test_shape_derivatives_in_float32():
    a, x = arr([0.5, 2.0, 30.0], np.float32), arr([0.2, 3.0, 25.0], np.float32)
    g = pa.grad(lambda v: xp.sum(special.gammainc(v, x)))(a)
    assert to_numpy(g).dtype == np.float32
    expected = [_dp_da(float(ai), float(xi), 1) for ai, xi in zip(np_of(a), np_of(x))]
    np.testing.assert_allclose(np_of(g), expected, rtol=1e-4)


def test_a_series_that_does_not_converge_gives_nan(monkeypatch):
    """Cut short, the loops leave nan where they have not converged, never a partial sum."""
    monkeypatch.setattr(incomplete, "MAX_TERMS", 40)
    out = np_of(gammainc_shape(arr([0.5, 5000.0]), arr([0.2, 5001.0])))
    assert np.isfinite(out[0]) and np.isnan(out[1])
    out = np_of(betainc_shape(arr([2.0, 5000.0]), arr([3.0, 4000.0]), arr([0.1, 0.555]), (0,)))
    assert np.isfinite(out[0]) and np.isnan(out[1])


# ------------------------------------------------------------------------------ closed forms


def _d(f, order=1):
    for _ in range(order):
        f = pa.grad(f)
    return f


@pytest.mark.parametrize(
    "f, order, x, expected",
    [
        (special.exprel, 1, 0.0, 0.5),
        (special.exprel, 2, 0.0, 1.0 / 3.0),
        (lambda l: special.boxcox(2.0, l), 1, 0.0, math.log(2.0) ** 2 / 2),
        (lambda l: special.boxcox(2.0, l), 2, 0.0, math.log(2.0) ** 3 / 3),
        (lambda l: special.boxcox1p(1.0, l), 1, 0.0, math.log(2.0) ** 2 / 2),
        (lambda l: special.inv_boxcox(1.5, l), 1, 0.0, -(1.5**2) / 2 * math.exp(1.5)),
        (lambda l: special.inv_boxcox1p(1.5, l), 1, 0.0, -(1.5**2) / 2 * math.exp(1.5)),
        (special.ellipk, 1, 0.0, math.pi / 8),
        (special.ellipe, 1, 0.0, -math.pi / 8),
        (special.ellipkm1, 1, 1.0, -math.pi / 8),
        (special.spence, 1, 1.0, -1.0),
        (special.spence, 2, 1.0, 0.5),
        (special.cosm1, 2, 0.0, -1.0),
        (special.sindg, 1, 0.0, math.pi / 180),
        (lambda x: special.expn(1, x), 2, 0.5, math.exp(-0.5) * 1.5 / 0.25),  # E_-1 = e**-x (1 + x) / x**2
        (lambda x: special.expn(0, x), 1, 0.5, -math.exp(-0.5) * 1.5 / 0.25),
        (lambda x: special.zetac(x), 1, 2.0, -0.9375482543158437),  # zeta'(2)
    ],
)
def test_derivatives_against_closed_forms(f, order, x, expected):
    np.testing.assert_allclose(float(_d(f, order)(arr(x))), expected, rtol=1e-12)


# ------------------------------------------------------------------------------ edges, as SciPy gives them

_INF, _NAN = math.inf, math.nan
EDGES = [
    ("sindg", ([0.0, 90.0, 180.0, 270.0, -90.0, 360.0, -180.0, _INF, _NAN],)),
    ("cosdg", ([0.0, 90.0, 180.0, 270.0, -90.0, 360.0, -180.0, _NAN],)),
    ("tandg", ([0.0, 45.0, 90.0, 180.0, 270.0, -90.0, -135.0, _NAN],)),
    ("cotdg", ([0.0, 45.0, 90.0, 180.0, -180.0, -45.0, _NAN],)),
    ("cosm1", ([0.0, 1e-300, _NAN],)),
    ("exprel", ([0.0, 1e-300, -1e-300, 700.0, 709.0, 710.0, 1e6, -1e6, -_INF, _NAN],)),
    ("boxcox", ([0.0, 0.0, 0.0, -1.0, _INF, _INF, _INF, 2.0, _NAN],
                [0.5, 0.0, -0.5, 0.5, 0.5, -0.5, 0.0, 0.0, 1.0])),
    ("boxcox1p", ([-1.0, -1.0, -1.0, -2.0, _INF, 0.0, 1e-300], [0.5, 0.0, -0.5, 0.5, -0.5, 0.5, 0.0])),
    ("inv_boxcox", ([-3.0, -2.0, 4.0, 0.0, 800.0], [0.5, 0.5, -0.25, 0.0, 0.0])),
    ("inv_boxcox1p", ([-3.0, -2.0, 4.0, 0.0, 1e-300], [0.5, 0.5, -0.25, 0.0, 0.0])),
    ("ellipk", ([1.0, 2.0, -1e6, -1e300, 0.0, _NAN],)),
    ("ellipkm1", ([0.0, -1.0, 1e-300, 1e-12, 1.0, 2.0, _NAN],)),
    ("ellipe", ([1.0, 2.0, -1e6, 0.0, 1.0 - 1e-12, _NAN],)),
    ("spence", ([0.0, -1.0, _INF, 1e-300, 1e-8, 1e300, 1.0, _NAN],)),
    ("gammasgn", ([0.0, -0.0, -1.0, -_INF, _INF, _NAN, -1e-300, -2.5],)),
]  # fmt: skip


@pytest.mark.parametrize("name, columns", EDGES, ids=[e[0] for e in EDGES])
@pytest.mark.parametrize("kernel", ["default", "generic"])
def test_edges_match_scipy(name, columns, kernel):
    """SciPy's values (inf, nan, exact zeros and ones at multiples of 90 degrees) from SciPy's kernel and
    from the generic Array API kernel (a stand-in device type covers every array, so the dispatcher picks
    it)."""
    row = BY_NAME.get(f"special.{name}")
    reason = row.skip_reason("edges") if row is not None and kernel == "default" else None
    if reason:  # the backend's own kernel known to differ there (the op table's backend_failures)
        pytest.xfail(reason)
    args = [arr(c) for c in columns]
    f = getattr(special, name)
    if kernel == "generic":
        undo = dispatch.register_device_type("xpu", lambda a: True)
        try:
            got = f(*args)
        finally:
            undo()
    else:
        got = f(*args)
    expected = getattr(scipy_special, name)(*[np.asarray(c, dtype=np.float64) for c in columns])
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(np_of(got), expected, rtol=1e-12, atol=1e-300, equal_nan=True)


def test_exact_values_at_multiples_of_90_degrees():
    undo = dispatch.register_device_type("xpu", lambda a: True)
    try:
        s = np_of(special.sindg(arr([0.0, 90.0, 180.0, 270.0, 360.0, 720.0 + 90.0])))
        c = np_of(special.cosdg(arr([0.0, 90.0, 180.0, 270.0, 360.0])))
    finally:
        undo()
    assert s.tolist() == [0.0, 1.0, 0.0, -1.0, 0.0, 1.0]
    assert c.tolist() == [1.0, 0.0, -1.0, 0.0, 1.0]


# ------------------------------------------------------------------------------ without SciPy

_BLOCK_SCIPY = """
import importlib.abc, sys
class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "scipy" or name.startswith("scipy."):
            raise ImportError(f"No module named {name!r} (blocked)")
sys.meta_path.insert(0, Blocker())
"""


def test_without_scipy_the_generic_kernels_differentiate():
    code = _BLOCK_SCIPY + (
        "import polyad as pa\n"
        "from polyad import dispatch\n"
        "from polyad.xp import special\n"
        "bx = dispatch.default_backend().xp\n"
        "x = bx.asarray([0.5, 2.0])\n"
        "print('boxcox', float(pa.grad(lambda l: pa.xp.sum(special.boxcox(x, l)))(bx.asarray(0.0))))\n"
        "print('ellipk', float(pa.xp.sum(pa.grad(lambda m: pa.xp.sum(special.ellipk(m)))(0.2 * x))))\n"
        "print('spence', float(special.spence(bx.asarray(2.0))))\n"
        "try:\n"
        "    print('expn', float(pa.xp.sum(special.expn(1, x))))\n"
        "except ImportError as e:\n"
        "    print('error', e)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ),
                       timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr
    out = dict(line.split(" ", 1) for line in r.stdout.splitlines())
    np.testing.assert_allclose(
        float(out["boxcox"]), (math.log(0.5) ** 2 + math.log(2.0) ** 2) / 2, rtol=1e-12
    )
    m = np.array([0.1, 0.4])
    k, e = scipy_special.ellipk(m), scipy_special.ellipe(m)
    np.testing.assert_allclose(
        float(out["ellipk"]), np.sum((e - (1 - m) * k) / (2 * m * (1 - m))), rtol=1e-12
    )
    np.testing.assert_allclose(float(out["spence"]), scipy_special.spence(2.0), rtol=1e-13)
    if native_device_type() == "cpu":  # SciPy's kernel, missing: the error says how to install it
        assert "polyad.xp.special.expn" in out["error"] and "pip install polyad[scipy]" in out["error"]
    else:  # CuPy's arrays take cupyx's kernel, which needs no SciPy
        np.testing.assert_allclose(float(out["expn"]), scipy_special.expn(1, [0.5, 2.0]).sum(), rtol=1e-13)
