"""polyad.xp.special beyond the op table (tests/test_ops.py runs its rows): values and derivatives at
points with known closed forms, SciPy's values at the edges of each domain (inf, nan, zeros), the
derivatives polyad does not have raising by name, dtypes, which kernel the dispatcher picks per device
type (stand-in device types; the CUDA kernels the CuPy backend declares, run on stand-in cupy modules),
and the functions that keep working without SciPy."""

import importlib
import math
import os
import subprocess
import sys

import numpy as np
import pytest
from helpers import assert_close, cupy_kernels_on_stand_ins, native_device_type, raises_cleanly, to_numpy

import polyad as pa
from polyad.core import OPS, dispatch
from polyad.ops import special as special_ops
from polyad.testing.op_table import BY_NAME, OP_TABLE, Sampler
from polyad.xp import special

scipy_special = pytest.importorskip("scipy.special")

BX = dispatch.default_backend().xp
xp = pa.xp


def arr(values, dtype=np.float64):
    return BX.asarray(np.asarray(values, dtype=dtype))


def np_of(x):
    return to_numpy(x)


# ------------------------------------------------------------------------------ coverage


def test_every_function_has_an_op_table_row():
    names = [n for n in special_ops.NAMES if n not in special_ops.ALIASES]
    assert not [n for n in names if f"special.{n}" not in BY_NAME]
    assert special.psi is special.digamma
    for name in special_ops.NAMES:
        assert callable(getattr(special, name)) and getattr(special, name).__doc__


def test_scipy_lookups_are_covered():
    """Every name SciPy looks up on a namespace (scipy/special/_support_alternative_backends.py) is one of
    polyad's: a new SciPy name fails this test until polyad has it."""
    alt = importlib.import_module("scipy.special._support_alternative_backends")
    looked_up = {info.name for info in alt._special_funcs}
    assert looked_up <= set(special_ops.NAMES), sorted(looked_up - set(special_ops.NAMES))
    assert len(looked_up) == 91 and len(special_ops.NAMES) == 98  # the figures of the report


# ------------------------------------------------------------------------------ closed forms

EULER_GAMMA = 0.5772156649015329


def _d(f, order=1):
    """The ``order``-th derivative of a scalar function by nested grad."""
    for _ in range(order):
        f = pa.grad(f)
    return f


@pytest.mark.parametrize(
    "f, x, expected",
    [
        (special.erf, 0.5, math.erf(0.5)),
        (special.erfc, -1.5, math.erfc(-1.5)),
        (special.gammaln, 7.5, math.lgamma(7.5)),
        (special.gamma, 4.5, math.gamma(4.5)),
        (special.digamma, 1.0, -EULER_GAMMA),
        (special.ndtr, 1.0, 0.5 * math.erfc(-1.0 / math.sqrt(2))),
        (special.expit, -2.0, 1 / (1 + math.exp(2.0))),
        (special.i0, 0.0, 1.0),
        (special.sinc, 0.25, math.sin(math.pi / 4) / (math.pi / 4)),
        (lambda x: special.polygamma(1, x), 1.0, math.pi**2 / 6),
        (special.zeta, 2.0, math.pi**2 / 6),
        (special.zeta, 4.0, math.pi**4 / 90),
    ],
)
def test_values_against_closed_forms(f, x, expected):
    np.testing.assert_allclose(float(f(arr(x))), expected, rtol=1e-13)


@pytest.mark.parametrize(
    "f, order, x, expected",
    [
        (special.erf, 1, 0.0, 2 / math.sqrt(math.pi)),
        (special.gammaln, 1, 1.0, -EULER_GAMMA),
        (special.gammaln, 2, 1.0, math.pi**2 / 6),
        (special.digamma, 2, 1.0, -2 * 1.2020569031595942),  # polygamma(2, 1) = -2 zeta(3)
        (lambda q: special.zeta(2.0, q), 1, 1.0, -2 * 1.2020569031595942),
        (special.i1, 1, 0.0, 0.5),
        (special.i1, 3, 0.0, 3 / 8),  # i1 = x/2 + x**3/16 + ...
        (special.j1, 1, 0.0, 0.5),
        (special.j1, 3, 0.0, -3 / 8),
        (special.i0, 2, 0.0, 0.5),
        (special.sinc, 1, 0.0, 0.0),
        (special.sinc, 2, 0.0, -(math.pi**2) / 3),
        (special.sinc, 4, 0.0, math.pi**4 / 5),
        (special.ndtri, 1, 0.5, math.sqrt(2 * math.pi)),
        (special.erfinv, 1, 0.0, math.sqrt(math.pi) / 2),
        (special.expit, 2, 0.0, 0.0),
        (special.log_expit, 1, 0.0, 0.5),
    ],
)
def test_derivatives_against_closed_forms(f, order, x, expected):
    """Derivatives of every order at points where the rules take a removable singularity (i1'(0),
    sinc''(0)) or a known value; nested grad runs the rules' own derivatives."""
    got = float(_d(lambda v: f(v), order)(arr(x)))
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


def test_log_ndtr_derivative_far_in_the_left_tail():
    """d/dx log ndtr(x) = pdf/cdf, the inverse Mills ratio: finite and accurate where both underflow."""

    def inverse_mills(t):  # of -t, by the asymptotic series of ndtr(-t) / pdf(t) for large t
        s = 1.0 - 1 / t**2 + 3 / t**4 - 15 / t**6 + 105 / t**8 - 945 / t**10
        return t / s

    x = arr([-40.0, -200.0, -1000.0])
    g = np_of(pa.grad(lambda v: xp.sum(special.log_ndtr(v)))(x))
    np.testing.assert_allclose(
        g, [inverse_mills(40.0), inverse_mills(200.0), inverse_mills(1000.0)], rtol=1e-12
    )
    # far right: the derivative vanishes (pdf/cdf -> 0), no nan from inf/inf
    g = np_of(pa.grad(lambda v: xp.sum(special.log_ndtr(v)))(arr([40.0, 1e3])))
    assert np.all(g == 0.0)


def test_logsumexp_gradient_is_softmax_and_weights():
    a, b = arr([[0.5, -1.0, 2.0], [3.0, 0.0, -2.0]]), arr([1.0, -0.5, 2.0])
    g = pa.grad(lambda v: xp.sum(special.logsumexp(v, axis=1)))(a)
    assert_close(g, special.softmax(a, axis=1), rtol=1e-14)
    # weighted, through the sign: d/db log|sum b e^a| = e^a / sum(b e^a)
    na, nb = np_of(a), np_of(b)
    s = (nb * np.exp(na)).sum(axis=1, keepdims=True)
    gb = pa.grad(lambda w: xp.sum(special.logsumexp(a, axis=1, b=w, return_sign=True)[0]))(b)
    np.testing.assert_allclose(np_of(gb), (np.exp(na) / s).sum(axis=0), rtol=1e-13)


# ------------------------------------------------------------------------------ edges, as SciPy gives them

_INF, _NAN = math.inf, math.nan
EDGES = [
    ("xlogy", ([0.0, 0.0, 1.0, 0.0, -1.0, 2.0], [0.0, _NAN, 0.0, 2.0, 0.0, -1.0])),
    ("xlog1py", ([0.0, 0.0, 1.0, 2.0], [-1.0, _NAN, -1.0, -2.0])),
    ("logit", ([0.0, 1.0, 2.0, -0.5, _NAN],)),
    ("entr", ([-1.0, 0.0, 0.5, _NAN, _INF],)),
    ("rel_entr", ([0.0, 1.0, -1.0, 1.0, 0.0, _NAN, 0.0], [0.5, 0.0, 1.0, _INF, -1.0, 1.0, 0.0])),
    ("kl_div", ([0.0, 1.0, -1.0, 0.0, _NAN, 0.0], [0.5, 0.0, 1.0, -1.0, 1.0, 0.0])),
    ("huber", ([-1.0, 0.0, 1.0, 1.0], [1.0, 0.5, 2.0, _NAN])),
    ("pseudo_huber", ([-1.0, 0.0, 1.0, 2.0], [1.0, 0.5, 1e-9, 0.0])),
    ("expit", ([-800.0, 800.0, _INF, -_INF, _NAN],)),
    ("log_expit", ([-800.0, 800.0, -_INF],)),
    ("softplus", ([-800.0, 800.0, _INF, -_INF],)),
    ("sinc", ([0.0, 1.0, -2.0, 1e-300],)),
    ("erf", ([_INF, -_INF, _NAN, 0.0],)),
    ("gammaln", ([0.0, -1.0, -2.5, _INF],)),
    ("ndtri", ([0.0, 1.0, 0.5],)),
]


@pytest.mark.parametrize("name, columns", EDGES, ids=[e[0] for e in EDGES])
def test_edges_match_scipy(name, columns):
    reason = BY_NAME[f"special.{name}"].skip_reason("edges") if f"special.{name}" in BY_NAME else None
    if reason:  # a backend's kernel known to differ there (the op table's backend_failures)
        pytest.xfail(reason)
    args = [arr(c) for c in columns]
    got = getattr(special, name)(*args)
    expected = getattr(scipy_special, name)(*[np.asarray(c, dtype=np.float64) for c in columns])
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(np_of(got), expected, rtol=1e-12, equal_nan=True)


def test_logsumexp_edges_match_scipy():
    cases = [
        (np.zeros((0, 3)), {"axis": 0}),  # an empty sum: -inf
        (np.array([-_INF, -_INF]), {"return_sign": True}),  # sign 0
        (np.array([1.0, _INF]), {}),
        (np.array([1.0, 2.0]), {"b": np.array([1.0, -1.0])}),  # a negative sum: nan
        (np.array([1.0, 2.0]), {"b": np.array([1.0, -1.0]), "return_sign": True}),
        (np.array([_INF, 2.0]), {"b": np.array([0.0, 1.0])}),  # a zero weight drops an infinite term
        (np.array(3.0), {"keepdims": True}),  # computed on 1-d, as SciPy: shape (1,)
        (np.array([[1.0, 2.0], [3.0, 4.0]]), {"axis": -1, "b": 0.5}),
    ]
    for a, kw in cases:
        kw_ours = {k: arr(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
        got = special.logsumexp(arr(a), **kw_ours)
        expected = scipy_special.logsumexp(a, **kw)
        got, expected = (got, expected) if isinstance(got, tuple) else ((got,), (expected,))
        for g, e in zip(got, expected):
            assert np_of(g).shape == np.shape(e), (a, kw)
            np.testing.assert_allclose(np_of(g), e, rtol=1e-13, equal_nan=True)


# ------------------------------------------------------------------------------ derivatives polyad lacks

_X = [0.5, 1.5, 3.0]


def _third(f):
    """The third derivative of a scalar function, by nested grad."""
    return pa.grad(pa.grad(pa.grad(f)))


@pytest.mark.parametrize(
    "fname, argname, fn",
    [
        ("polygamma", "n", lambda n: special.polygamma(n, arr(_X))),
        ("expn", "n", lambda n: special.expn(n, arr(_X))),
        ("yn", "n", lambda n: special.yn(n, arr(_X))),
        ("lpmv", "v", lambda v: special.lpmv(1.0, v, arr([0.2, 0.5, -0.3]))),
        ("lpmv", "m", lambda m: special.lpmv(m, 2.5, arr([0.2, 0.5, -0.3]))),
        ("hyp1f1", "a", lambda a: special.hyp1f1(a, 2.0, arr(_X))),
        ("hyp1f1", "b", lambda b: special.hyp1f1(1.0, b, arr(_X))),
        ("bdtr", "k", lambda k: special.bdtr(k, 6.0, arr([0.2, 0.5, 0.7]))),
        ("bdtr", "n", lambda n: special.bdtr(1.0, n + 4.0, arr([0.2, 0.5, 0.7]))),
        ("pdtr", "k", lambda k: special.pdtr(k, arr(_X))),
    ],
)
def test_missing_derivative_raises_by_name(fname, argname, fn):
    """A derivative polyad does not have raises when it is asked for, in either mode, never a silent
    zero; the levels are restored."""
    if f"special.{fname}" in NO_CUDA_KERNEL and pa.get_backend() == "cupy":
        pytest.skip(NO_CUDA_KERNEL[f"special.{fname}"])  # the op refuses CUDA arrays (tested below)
    a = arr([1.0, 2.0, 3.0])
    fragments = (f"polyad.xp.special.{fname}", f"argument {argname!r}")
    with raises_cleanly(NotImplementedError, *fragments):
        pa.grad(lambda v: xp.sum(fn(v)))(a)
    with raises_cleanly(NotImplementedError, *fragments):
        pa.jvp(fn, (a,), (arr([1.0, 0.0, 0.0]),))
    fn(a)  # the value itself is fine


@pytest.mark.parametrize(
    "fname, fn",
    [
        ("gammainc", lambda a: xp.sum(special.gammainc(a, arr(_X)))),
        ("gammainc", lambda a: xp.sum(special.gammaincc(a, arr(_X)))),  # 1 - gammainc
        ("betainc", lambda a: xp.sum(special.betainc(a, 2.0, arr([0.2, 0.5, 0.7])))),
        ("betainc", lambda b: xp.sum(special.betainc(2.0, b, arr([0.2, 0.5, 0.7])))),
        ("betainc", lambda a: xp.sum(special.betainc(a, a + 1.0, arr([0.2, 0.5, 0.7])))),
        # chdtr is gammainc(v/2, x/2): the error names the function whose derivative is missing
        ("gammainc", lambda v: xp.sum(special.chdtr(v, arr(_X)))),
    ],
)
def test_third_derivative_in_a_shape_parameter_raises(fname, fn):
    """Shape derivatives stop at the second order: a third raises by name (never a wrong value); the
    second is there."""
    a = arr(2.5)
    with raises_cleanly(NotImplementedError, f"polyad.xp.special.{fname}", "to the second order only"):
        _third(fn)(a)
    assert np.isfinite(float(pa.grad(pa.grad(fn))(a)))


def test_derivative_in_x_with_the_shape_held():
    """With the shape parameter a constant (or stop_gradient) the derivative in x flows, to second order:
    d/dx gammainc(a, x) = x**(a-1) e**-x / gamma(a)."""
    a, x = 2.5, np.array(_X)
    density = x ** (a - 1) * np.exp(-x) / math.gamma(a)
    g = pa.grad(lambda v: xp.sum(special.gammainc(a, v)))(arr(_X))
    np.testing.assert_allclose(np_of(g), density, rtol=1e-13)
    g = pa.grad(lambda v: xp.sum(special.gammainc(pa.stop_gradient(v - v + a), v)))(arr(_X))
    np.testing.assert_allclose(np_of(g), density, rtol=1e-13)
    h = pa.hessian(lambda v: xp.sum(special.gammainc(a, v)))(arr(_X))
    np.testing.assert_allclose(np.diag(np_of(h)), density * ((a - 1) / x - 1), rtol=1e-12)


# ------------------------------------------------------------------------------ dtypes and arguments


def test_dtypes_follow_the_arguments():
    x32 = arr([0.25, 0.5], dtype=np.float32)
    for f in (special.erf, special.expit, special.gammaln, special.i1e):
        out = f(x32)
        assert np_of(out).dtype == np.float32
        expected = getattr(scipy_special, f.__name__)(np.asarray([0.25, 0.5], dtype=np.float32))
        np.testing.assert_allclose(np_of(out), expected, rtol=2e-6)
    out = special.polygamma(1, x32)  # SciPy computes it in float64
    assert np_of(out).dtype == np.float32
    assert pa.eval_shape(lambda v: special.polygamma(1, v), x32).dtype == out.dtype
    ints = BX.asarray([1, 2, 3])
    assert_close(special.gammaln(ints), arr(scipy_special.gammaln([1.0, 2.0, 3.0])), rtol=1e-15)
    assert np_of(special.xlogy(ints, 2.0)).dtype == np.float64


def test_bad_arguments_are_named():
    z = BX.asarray([1 + 1j])
    with raises_cleanly(TypeError, "polyad.xp.special.erf", "x must be a real array", "complex128"):
        special.erf(z)
    with raises_cleanly(TypeError, "polyad.xp.special.gammainc(a, x)", "takes 2", "got 1"):
        special.gammainc(arr([1.0]))
    with raises_cleanly(ValueError, "multigammaln", "d must be a positive Python int", "0"):
        special.multigammaln(arr([3.0]), 0)


# ------------------------------------------------------------------------------ kernels per device type


def test_cpu_arrays_take_the_scipy_kernel(stand_in):
    # float64 arrays: the backend's own kernel (SciPy's on NumPy, cupyx's on CuPy); float32 ones play an
    # accelerator's ("cuda" on NumPy, a stand-in above "cuda" on CuPy)
    native, accelerator = stand_in
    calls = []
    fake = lambda x: calls.append("cuda") or x + 100.0  # noqa: E731
    with pa.library.override(special.erf, accelerator, fake):
        x64 = arr([0.5])
        assert_close(special.erf(x64), arr(scipy_special.erf([0.5])), rtol=1e-15)
        assert calls == []  # float64: "cpu", SciPy
        np.testing.assert_allclose(np_of(special.erf(arr([0.5], np.float32))), [100.5])
        assert calls == ["cuda"]
        # inside transforms the choice is made at level 0 on the real arrays
        pa.grad(lambda v: xp.sum(special.erf(v)))(arr([0.5], np.float32))
        pa.vmap(special.erf)(arr([[0.5], [1.0]], np.float32))
        assert calls == ["cuda"] * 3
    assert special.erf.op.kernels["cpu"].scipy_name == "erf"


def test_highest_priority_device_type_wins_for_mixed_arguments(fake_cuda):
    calls = []
    with pa.library.override(special.gammainc, "cuda", lambda a, x: calls.append(1) or x * 0.0):
        out = special.gammainc(arr([2.0]), arr([0.5], np.float32))
    assert calls == [1] and np_of(out).tolist() == [0.0]


def test_a_device_type_without_kernel_refuses_or_runs_the_generic_kernel():
    undo = dispatch.register_device_type("xpu", lambda a: "float32" in str(a.dtype))
    try:
        x = arr([0.5, -1.0], np.float32)
        # a generic Array API kernel serves any device type
        np.testing.assert_allclose(np_of(special.expit(x)), scipy_special.expit(np_of(x)), rtol=1e-6)
        np.testing.assert_allclose(np_of(special.logsumexp(x)), scipy_special.logsumexp(np_of(x)), rtol=1e-6)
        # SciPy's kernel is for CPU arrays: elsewhere the dispatcher names the op, never copies to the host
        with raises_cleanly(NotImplementedError, "'special.erf'", "['xpu']", "kernels registered: ['cpu'"):
            special.erf(x)
    finally:
        undo()


_GENERIC_ROWS = [r for r in OP_TABLE if r.name.startswith("special.") and r.device_types is None]


@pytest.mark.parametrize("row", _GENERIC_ROWS, ids=[r.name for r in _GENERIC_ROWS])
def test_generic_kernels_match_scipy(row):
    """The Array API kernels (which CPU arrays reach only without SciPy) against SciPy, on every sample of
    the row: a stand-in device type covers every array, so the dispatcher picks the generic kernel."""
    samples = row.samples(Sampler())
    expected = [row.reference(BX)(*s.args, **s.kwargs) for s in samples]
    undo = dispatch.register_device_type("xpu", lambda a: True)
    try:
        with pa.library.override(row.function().op, "cpu", _no_cpu_kernel):
            got = [row.function()(*s.args, **s.kwargs) for s in samples]
    finally:
        undo()
    for g, e in zip(got, expected):
        assert_close(g, e, rtol=row.rtol, atol=row.atol)


def _no_cpu_kernel(*args, **kwargs):
    raise AssertionError("the cpu kernel ran where the generic kernel should")


# functions with neither a generic kernel nor a cupyx function: CUDA arrays are refused, naming the op
NO_CUDA_KERNEL = {"special.hyp1f1": "cupyx.scipy.special has no hyp1f1"}


def test_cupy_backend_declares_a_cuda_kernel_per_special_function(monkeypatch):
    """Every special function without a generic kernel has a CUDA kernel in polyad/backends/cupy/kernels.py,
    and each declared kernel calls cupyx's function of the same meaning with the arguments in order
    (checked on stand-in cupy modules that compute with SciPy: there is no GPU here)."""
    kernels, calls = cupy_kernels_on_stand_ins(monkeypatch)
    functions = {f.op.name: f for f in (getattr(special, n) for n in special_ops.NAMES) if hasattr(f, "op")}
    functions["special.riemann_zeta"] = special.zeta
    without_generic = {name for name in functions if OPS[name].generic is None}
    assert without_generic - set(kernels) == set(NO_CUDA_KERNEL)
    assert {n for n in kernels if n.startswith("special.")} <= set(functions)
    numpy_sampler = Sampler(dispatch.backends.load("numpy"))
    for name in sorted(n for n in kernels if n.startswith("special.")):
        row = BY_NAME["special.zeta" if name == "special.riemann_zeta" else name]
        sample = row.samples(numpy_sampler)[-1 if name == "special.riemann_zeta" else 2]
        args = [np.asarray(a, dtype=np.float64) for a in sample.args]
        del calls[:]
        got = kernels[name]["cuda"](None, *args)
        np.testing.assert_allclose(got, functions[name](*args), rtol=1e-13, err_msg=name)
        assert calls, f"{name}: no cupyx function was called"


# ------------------------------------------------------------------------------ without SciPy

_BLOCK_SCIPY = """
import importlib.abc, sys
class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "scipy" or name.startswith("scipy."):
            raise ImportError(f"No module named {name!r} (blocked)")
sys.meta_path.insert(0, Blocker())
"""


def test_without_scipy_generic_kernels_work_and_scipy_kernels_say_how_to_install():
    code = _BLOCK_SCIPY + (
        "import polyad as pa\n"
        "from polyad import dispatch\n"
        "from polyad.xp import special\n"
        "bx = dispatch.default_backend().xp\n"
        "x = bx.asarray([0.5, -1.0])\n"
        "print('expit', float(pa.xp.sum(pa.grad(lambda v: pa.xp.sum(special.expit(v)))(x))))\n"
        "print('lse', float(special.logsumexp(x)))\n"
        "try:\n"
        "    print('erf', float(pa.xp.sum(special.erf(x))))\n"
        "except ImportError as e:\n"
        "    print('error', e)\n"
    )
    env = dict(os.environ)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    out = dict(line.split(" ", 1) for line in r.stdout.splitlines())
    s = scipy_special.expit(np.array([0.5, -1.0]))
    np.testing.assert_allclose(float(out["expit"]), (s * (1 - s)).sum(), rtol=1e-12)
    np.testing.assert_allclose(float(out["lse"]), scipy_special.logsumexp([0.5, -1.0]), rtol=1e-13)
    if native_device_type() == "cpu":  # SciPy's kernel, missing: the error says how to install it
        assert "polyad.xp.special.erf" in out["error"] and "pip install polyad[scipy]" in out["error"]
    else:  # CuPy's arrays take cupyx's kernel, which needs no SciPy
        np.testing.assert_allclose(float(out["erf"]), scipy_special.erf([0.5, -1.0]).sum(), rtol=1e-13)
