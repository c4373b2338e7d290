"""SciPy finds polyad's special functions and differentiates through them: with ``SCIPY_ARRAY_API=1``,
``scipy.special.<name>`` called on polyad tensors looks up ``xp.special.<name>`` on their namespace, so
``grad``, ``vmap``, ``jvp`` and ``hessian`` go through SciPy's own functions, and through the stats and
distribution functions SciPy builds on them (``chdtr`` from ``gammainc``, ``stdtr`` from ``betainc``,
``entropy``, ``skewtest``).

SciPy reads SCIPY_ARRAY_API once, when first imported, so polyad's side runs in a subprocess (with the
backend under test); the references (closed forms, and finite differences of SciPy on NumPy) are computed
here, where SciPy runs without it. Constants that SciPy combines with the tensors are passed as plain
polyad tensors: a raw array beside a tensor is two namespaces to SciPy, and its generic ``chdtr`` calls
``xp.isinf`` on its first argument, which the strict backend refuses for a Python float.
"""

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

scipy_special = pytest.importorskip("scipy.special")
scipy_stats = pytest.importorskip("scipy.stats")

X = [0.3, -0.5, 1.2, 2.0]
P = [0.5, 1.5, 3.0, 0.8]
Q = [0.1, 0.5, 0.9]
PROBS = [0.2, 0.3, 0.5]
SAMPLE = [0.3, -0.5, 1.2, 2.0, 0.7, -1.1, 0.05, 1.6, -0.2, 0.9, 2.4, -0.8]
LOOKED_UP = ("erf", "psi", "gammainc", "betainc", "xlogy", "logit", "i0e", "zeta", "multigammaln")

_SCRIPT = r"""
import json, os, traceback
assert os.environ["SCIPY_ARRAY_API"] == "1"
import numpy as np
import polyad as pa
from polyad import dispatch
import scipy.special as sp
import scipy.stats as st

B = dispatch.default_backend()
xp = pa.xp
X, P, Q, PROBS, SAMPLE, LOOKED_UP = {data}

def arr(v):
    return B.xp.asarray(np.asarray(v, dtype=np.float64))

def out(v):
    # a plain tensor's array, then a host copy through the backend (a CuPy tensor refuses np.asarray)
    return np.asarray(B.to_numpy(v.concrete() if isinstance(v, pa.Tensor) else v)).tolist()

def lookups():
    from scipy.special._support_alternative_backends import _get_native_func
    return [_get_native_func(xp, None, n) is getattr(xp.special, n) for n in LOOKED_UP]

CASES = {{
    "erf_grad": lambda: out(pa.grad(lambda v: xp.sum(sp.erf(v)))(arr(X))),
    "gammaln_vmap": lambda: out(pa.vmap(sp.gammaln)(arr([[0.5, 1.5], [3.0, 7.5]]))),
    "psi_grad": lambda: out(pa.grad(lambda v: xp.sum(sp.psi(v)))(arr(P))),
    "polygamma_grad": lambda: out(pa.grad(lambda v: xp.sum(sp.polygamma(1, v)))(arr(P))),
    "chdtr_grad": lambda: out(pa.grad(lambda v: xp.sum(sp.chdtr(pa.Tensor(arr(3.0)), v)))(arr(P))),
    "stdtr_grad": lambda: out(pa.grad(lambda v: xp.sum(sp.stdtr(pa.Tensor(arr(4.0)), v)))(arr(X))),
    "entropy_grad": lambda: out(pa.grad(lambda v: st.entropy(v))(arr(PROBS))),
    "skewtest_grad": lambda: out(pa.grad(lambda v: st.skewtest(v).pvalue)(arr(SAMPLE))),
    "log_ndtr_hessian": lambda: out(pa.hessian(lambda v: xp.sum(sp.log_ndtr(v)))(arr(X))),
    "ndtri_jvp": lambda: out(pa.jvp(sp.ndtri, (arr(Q),), (arr([1.0, 1.0, 1.0]),))[1]),
    "xlogy_value": lambda: out(sp.xlogy(pa.Tensor(arr([0.0, 2.0])), pa.Tensor(arr([0.0, 3.0])))),
    "lookups": lookups,
}}
results = {{}}
for name, case in CASES.items():
    try:
        results[name] = {{"value": case()}}
    except Exception as e:
        results[name] = {{"error": f"{{type(e).__name__}}: {{e}}", "trace": traceback.format_exc()}}
print("RESULTS" + json.dumps(results))
"""


@pytest.fixture(scope="module")
def results():
    data = repr((X, P, Q, PROBS, SAMPLE, LOOKED_UP))
    env = dict(os.environ, SCIPY_ARRAY_API="1")
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT.format(data=data)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULTS"))
    return json.loads(line[len("RESULTS") :])


def _value(results, name):
    r = results[name]
    assert "error" not in r, r["error"] + "\n" + r["trace"]
    return np.asarray(r["value"])


def _fd_grad(f, x, eps=1e-6):
    """Central differences of a scalar NumPy function (SciPy on NumPy: no polyad involved)."""
    x = np.asarray(x, dtype=np.float64)
    g = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e.flat[i] = eps
        g.flat[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


def test_scipy_finds_polyad_special_functions(results):
    assert _value(results, "lookups").tolist() == [True] * len(LOOKED_UP)
    # a plain tensor (no transform) goes through the same lookup
    np.testing.assert_allclose(_value(results, "xlogy_value"), [0.0, 2 * math.log(3.0)], rtol=1e-15)


def test_grad_of_scipy_erf(results):
    x = np.array(X)
    g = _value(results, "erf_grad")
    np.testing.assert_allclose(g, 2 / math.sqrt(math.pi) * np.exp(-(x**2)), rtol=1e-14)
    np.testing.assert_allclose(g, _fd_grad(lambda v: scipy_special.erf(v).sum(), x), rtol=1e-8)


def test_vmap_of_scipy_gammaln(results):
    expected = scipy_special.gammaln(np.array([[0.5, 1.5], [3.0, 7.5]]))
    np.testing.assert_allclose(_value(results, "gammaln_vmap"), expected, rtol=1e-15)


def test_grad_of_scipy_psi_and_polygamma(results):
    p = np.array(P)
    np.testing.assert_allclose(_value(results, "psi_grad"), scipy_special.polygamma(1, p), rtol=1e-13)
    np.testing.assert_allclose(_value(results, "polygamma_grad"), scipy_special.polygamma(2, p), rtol=1e-13)
    fd = _fd_grad(lambda v: scipy_special.polygamma(1, v).sum(), p)
    np.testing.assert_allclose(_value(results, "polygamma_grad"), fd, rtol=1e-6)


def test_grad_of_distribution_functions_scipy_builds_from_ours(results):
    """SciPy makes chdtr from polyad's gammainc and stdtr from its betainc: their gradients are the
    densities."""
    p, k = np.array(P), 3.0
    chi2_pdf = p ** (k / 2 - 1) * np.exp(-p / 2) / (2 ** (k / 2) * math.gamma(k / 2))
    np.testing.assert_allclose(_value(results, "chdtr_grad"), chi2_pdf, rtol=1e-12)
    t, nu = np.array(X), 4.0
    c = math.gamma((nu + 1) / 2) / (math.sqrt(nu * math.pi) * math.gamma(nu / 2))
    np.testing.assert_allclose(
        _value(results, "stdtr_grad"), c * (1 + t**2 / nu) ** (-(nu + 1) / 2), rtol=1e-12
    )


def test_grad_of_scipy_stats_on_special_functions(results):
    fd = _fd_grad(lambda v: scipy_stats.entropy(v), PROBS)
    np.testing.assert_allclose(_value(results, "entropy_grad"), fd, rtol=1e-7, atol=1e-9)
    fd = _fd_grad(lambda v: scipy_stats.skewtest(v).pvalue, SAMPLE)
    np.testing.assert_allclose(_value(results, "skewtest_grad"), fd, rtol=1e-6, atol=1e-9)


def test_second_and_forward_derivatives_through_scipy(results):
    x = np.array(X)

    def dlog_ndtr(v):  # pdf / cdf, from SciPy's values
        return np.exp(-0.5 * v**2 - 0.5 * math.log(2 * math.pi) - scipy_special.log_ndtr(v))

    h = _value(results, "log_ndtr_hessian")
    np.testing.assert_allclose(h - np.diag(np.diag(h)), 0.0, atol=0)
    fd = np.array([_fd_grad(lambda v: dlog_ndtr(v).sum(), x[i : i + 1])[0] for i in range(x.size)])
    np.testing.assert_allclose(np.diag(h), fd, rtol=1e-7)
    q = np.array(Q)
    expected = math.sqrt(2 * math.pi) * np.exp(scipy_special.ndtri(q) ** 2 / 2)
    np.testing.assert_allclose(_value(results, "ndtri_jvp"), expected, rtol=1e-13)
