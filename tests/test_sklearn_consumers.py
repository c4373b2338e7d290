"""scikit-learn's array-API code on polyad's tracers (polyad/core/tensor.py): its metrics end in
``return float(...)``, and the derivative must survive that; its input validation branches on values
(``if not xp.isfinite(...)``), which vmap must allow when every example agrees.

scikit-learn and SciPy read SCIPY_ARRAY_API when first imported, so the checks run in a subprocess
started with SCIPY_ARRAY_API=1 and the backend under test; it reports polyad's results and the
references (finite differences of scikit-learn's own floats, per-example loops) for the tests here.
"""

import importlib.util

import numpy as np
import pytest
from helpers import run_array_api_consumer

import polyad as pa

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("sklearn") is None or importlib.util.find_spec("scipy") is None,
    reason="needs scikit-learn and scipy",
)

_SCRIPT = r"""
import json, traceback, warnings
import numpy as np
import polyad as pa
from polyad import dispatch
import sklearn
from sklearn.metrics import mean_absolute_error, mean_squared_error, r2_score
from sklearn.preprocessing import MinMaxScaler, StandardScaler, minmax_scale, normalize

sklearn.set_config(array_api_dispatch=True)
warnings.simplefilter("error", pa.DerivativeLostWarning)  # a lost derivative fails the check
BX = dispatch.default_backend().xp
EPS = 1e-6

def arr(v):
    return BX.asarray(np.asarray(v, dtype=np.float64))

def listed(a):
    return np.asarray(pa.Tensor(a).tolist() if not isinstance(a, pa.Tensor) else a.tolist()).tolist()

def fd(f, x):
    x = np.asarray(x, dtype=np.float64)
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        e = np.zeros_like(x); e[idx] = EPS
        g[idx] = (f(arr(x + e)) - f(arr(x - e))) / (2 * EPS)
    return g.tolist()

Y = arr([1.0, 2.0, 3.0, 4.0, -1.0])
P = [1.5, 1.0, 3.5, 3.0, -0.2]
T = [1.0, -1.0, 0.5, 2.0, 0.0]
results = {}

for name, metric in (("mse", mean_squared_error), ("r2", r2_score), ("mae", mean_absolute_error)):
    f = lambda p, metric=metric: metric(pa.Tensor(Y), p)
    try:
        value, grad = pa.value_and_grad(f)(arr(P))
        _, tangent = pa.jvp(f, (arr(P),), (arr(T),))
        results[name] = {
            "value": float(value),
            "sklearn_value": metric(Y, arr(P)),
            "sklearn_type": type(metric(Y, arr(P))).__name__,
            "grad": listed(grad),
            "tangent": float(tangent),
            "fd": fd(lambda p: metric(Y, p), P),
        }
    except Exception as e:
        results[name] = {"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()}

# vmap: every function validates its input by branching on values (all examples agree: finite)
rng = np.random.default_rng(0)
X = arr(rng.standard_normal((4, 6, 3)))
YY = arr(rng.standard_normal((6, 3)))
VMAPPED = {
    "minmax_scale": lambda x: minmax_scale(x),
    "normalize": lambda x: normalize(x),
    "StandardScaler": lambda x: StandardScaler().fit_transform(x),
    "MinMaxScaler": lambda x: MinMaxScaler().fit_transform(x),
    "mse_raw_values": lambda x: mean_squared_error(pa.Tensor(YY), x, multioutput="raw_values"),
    "grad_of_scale": pa.grad(lambda x: pa.xp.sum(StandardScaler().fit_transform(x) ** 3)),
}
for name, f in VMAPPED.items():
    try:
        got = pa.vmap(f)(X)
        loop = [listed(f(pa.Tensor(X[i, ...]))) for i in range(X.shape[0])]
        results["vmap_" + name] = {"got": listed(got), "loop": loop}
    except Exception as e:
        results["vmap_" + name] = {"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()}

# examples that disagree on the validation: vmap names the conversion; the loop raises scikit-learn's error
bad = BX.concat([X[:1, ...], X[1:, ...] * float("nan")], axis=0)
try:
    pa.vmap(lambda x: normalize(x))(bad)
    results["disagree"] = {"error": "no error"}
except pa.ConcretizationError as e:
    results["disagree"] = {"message": str(e)}
except Exception as e:
    results["disagree"] = {"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()}
print("RESULTS" + json.dumps(results))
"""


@pytest.fixture(scope="module")
def results():
    return run_array_api_consumer(_SCRIPT)


# scikit-learn's calls polyad cannot serve yet, as data: (backend, check) -> reason
KNOWN_FAILURES = {}  # minmax_scale's NumPy dtypes (FLOAT_DTYPES) are now translated by name by xp.asarray


def _get(results, name):
    r = results[name]
    reason = KNOWN_FAILURES.get((pa.get_backend(), name))
    if reason is not None:
        if "error" in r:
            pytest.xfail(reason)
        pytest.fail(f"{name} on {pa.get_backend()} passes now: remove its entry from KNOWN_FAILURES")
    assert "error" not in r, r["error"] + "\n" + r.get("trace", "")
    return r


Y = np.array([1.0, 2.0, 3.0, 4.0, -1.0])
P = np.array([1.5, 1.0, 3.5, 3.0, -0.2])
T = np.array([1.0, -1.0, 0.5, 2.0, 0.0])


@pytest.mark.parametrize("name", ["mse", "r2", "mae"])
def test_metrics_ending_in_float_differentiate(results, name):
    r = _get(results, name)
    assert r["sklearn_type"] == "float"  # the metric does end in float(...)
    np.testing.assert_allclose(r["value"], r["sklearn_value"], rtol=1e-13)
    np.testing.assert_allclose(r["grad"], r["fd"], rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(r["tangent"], np.dot(r["grad"], T), rtol=1e-12, atol=1e-14)
    assert np.any(np.abs(r["grad"]) > 0.1)  # not the silent zeros of a dropped derivative


def test_metric_gradients_match_their_formulas(results):
    n = len(Y)
    np.testing.assert_allclose(_get(results, "mse")["grad"], 2 * (P - Y) / n, rtol=1e-13)
    np.testing.assert_allclose(_get(results, "mae")["grad"], np.sign(P - Y) / n, rtol=1e-13)
    ss_tot = np.sum((Y - Y.mean()) ** 2)
    np.testing.assert_allclose(_get(results, "r2")["grad"], -2 * (P - Y) / ss_tot, rtol=1e-12)


@pytest.mark.parametrize(
    "name", ["minmax_scale", "normalize", "StandardScaler", "MinMaxScaler", "mse_raw_values", "grad_of_scale"]
)
def test_vmap_through_input_validation_matches_a_loop(results, name):
    r = _get(results, "vmap_" + name)
    np.testing.assert_allclose(r["got"], r["loop"], rtol=1e-12, atol=1e-14)


def test_vmap_names_a_validation_the_examples_disagree_on(results):
    msg = _get(results, "disagree")["message"]
    assert "differs between the batch's examples" in msg and "chunk_size=1" in msg and "xp.where" in msg
