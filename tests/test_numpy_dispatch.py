"""NumPy's own functions, ufuncs and array methods on polyad tensors (polyad/interop/numpy): every dispatched
one through the op table's checks (values against NumPy on NumPy copies, abstract evaluation, VJP and JVP
against finite differences to second order, vmap against a loop), driven by the rows of
``polyad/testing/table_numpy*.py`` with the bodies of ``tests/test_ops.py``; then the table's coverage
and the protocols' edges (what is refused, with which message, and what NumPy keeps doing)."""

import numpy as np
import pytest
import test_ops
from helpers import raises_cleanly

import polyad as pa
from polyad.interop.numpy import FUNCTIONS, METHODS, UFUNCS
from polyad.testing.op_table import Sampler
from polyad.testing.table_numpy_more import NUMPY_TABLE


def _cases(predicate=lambda row: True):
    cases, sampler = [], Sampler()
    for row in NUMPY_TABLE:
        if predicate(row):
            for i, sample in enumerate(row.samples(sampler)):
                cases.append(pytest.param(row, i, id=f"{row.name}-{sample.name or i}"))
    return cases


_DIFF = _cases(lambda row: row.differentiable)


@pytest.mark.parametrize("row,i", _cases())
def test_value(row, i):
    test_ops.test_value(row, i)


@pytest.mark.parametrize("row,i", _cases())
def test_abstract_eval(row, i):
    test_ops.test_abstract_eval(row, i)


@pytest.mark.parametrize("row,i", _DIFF)
def test_vjp(row, i):
    test_ops.test_vjp(row, i)


@pytest.mark.parametrize("row,i", _DIFF)
def test_jvp(row, i):
    test_ops.test_jvp(row, i)


@pytest.mark.parametrize("row,i", _DIFF)
def test_second_order(row, i):
    test_ops.test_second_order(row, i)


@pytest.mark.parametrize("row,i", _cases())
def test_vmap(row, i):
    test_ops.test_vmap(row, i)


# ------------------------------------------------------------------------------ coverage of the table


def _row_names():
    return {row.name.split(":")[0] for row in NUMPY_TABLE}


def test_every_dispatched_function_has_a_row():
    names = _row_names()
    missing = []
    for (module, name), entry in FUNCTIONS.items():
        owner = np if module == "numpy" else getattr(np, module.split(".")[1])
        if entry.impl is not None and hasattr(owner, name) and entry.name not in names:
            missing.append(entry.name)
    missing += [n for n, e in UFUNCS.items() if e.impl is not None and n not in names]
    missing += [
        f"ndarray.{n}" for n, e in METHODS.items() if e.impl is not None and f"ndarray.{n}" not in names
    ]
    assert not missing, f"dispatched without a row in polyad/testing/table_numpy*.py: {sorted(missing)}"


def test_table_keys_are_numpy_functions():
    """Each key is what NumPy's function object says of itself (so that dispatch finds the entry)."""
    for (module, name), entry in FUNCTIONS.items():
        owner = np if module == "numpy" else getattr(np, module.split(".")[1])
        func = getattr(owner, name, None)
        if func is None:
            continue  # an alias this NumPy no longer has (np.trapz, np.in1d)
        assert (func.__module__, func.__name__) == (module, name), entry.name
        assert hasattr(func, "_implementation"), f"np.{entry.name} does not dispatch (__array_function__)"
    for name in UFUNCS:
        assert isinstance(getattr(np, name), np.ufunc), name
    every_ufunc = {f.__name__ for f in vars(np).values() if isinstance(f, np.ufunc)}
    assert every_ufunc <= set(UFUNCS), f"ufuncs neither dispatched nor refused: {every_ufunc - set(UFUNCS)}"


# ------------------------------------------------------------------------------ the protocols' edges


def _inside_grad(f, x=None):
    """Run ``f(t)`` on a traced ``t`` inside grad (its output discarded), re-raising what it raised."""
    x = np.array([0.5, -1.0, 2.0]) if x is None else x

    def loss(t):
        f(t)
        return pa.xp.sum(t)

    return pa.grad(loss)(x)


def test_numpy_operators_with_a_numpy_array_on_the_left():
    W = np.arange(9.0).reshape(3, 3)
    x = np.array([0.5, -1.0, 2.0])
    g = pa.grad(lambda t: pa.xp.sum(W @ t + (W * t).sum(axis=0) - np.float32(2.0) * t))(x)
    np.testing.assert_allclose(g, W.sum(axis=0) + W.sum(axis=0) - 2.0)
    comparisons = pa.vmap(lambda t: (W[0] < t) & (t >= W[1]))(np.stack([x, x + 4]))
    np.testing.assert_array_equal(comparisons, [(W[0] < v) & (v >= W[1]) for v in (x, x + 4)])


def test_in_place_operator_on_a_numpy_array_is_refused():
    def accumulate(t):
        total = np.zeros(3)
        total += t  # NumPy calls np.add(total, t, out=total): a NumPy array cannot hold t
        return total

    with raises_cleanly(TypeError, "out=", "ndarray", "np.zeros_like"):
        pa.grad(lambda t: pa.xp.sum(accumulate(t)))(np.ones(3))
    with raises_cleanly(TypeError, "out=", "ndarray"):
        _inside_grad(lambda t: np.exp(t, out=np.empty(3)))


def test_out_into_a_tensor_is_a_functionalised_write():
    def f(t):
        buffer = np.zeros_like(t)
        np.multiply(t, t, out=buffer)
        np.add(buffer, 1.0, out=buffer, where=t > 0)  # keeps buffer's values where t <= 0
        return buffer

    x = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(f(x), np.where(x > 0, x * x + 1, x * x))
    np.testing.assert_allclose(pa.jacrev(f)(x), np.diag(2 * x))
    total = np.zeros(3)
    np.add.at(total, np.array([0, 2, 2]), x)  # the reference, then the same under grad
    g = pa.grad(lambda t: np.sum(_add_at(t) ** 2))(x)
    np.testing.assert_allclose(g, [2 * total[0], 2 * total[2], 2 * total[2]])  # x1 and x2 both land at 2


def _add_at(t):
    out = np.zeros_like(t)
    np.add.at(out, np.array([0, 2, 2]), t)
    return out


def test_array_conversion_stays_refused():
    for convert in (np.asarray, np.array, np.ascontiguousarray):
        with raises_cleanly(TypeError, "np.asarray()", "ReverseTensor", "np.dot(A, x)"):
            _inside_grad(convert)
    with raises_cleanly(TypeError, "np.asarray()", "A.dot(x)"):
        _inside_grad(lambda t: np.ones(3).dot(t))  # a NumPy array's own method converts its argument


def test_a_function_without_a_polyad_implementation_is_refused_by_name():
    with raises_cleanly(TypeError, "np.histogram", "inside grad", "np.bincount"):
        _inside_grad(lambda t: np.histogram(t))
    with raises_cleanly(TypeError, "np.linalg.tensorinv", "np.linalg.inv"):
        _inside_grad(lambda t: np.linalg.tensorinv(np.reshape(np.outer(t, t), (3, 3))))
    with raises_cleanly(TypeError, "np.gcd", "integer-only"):
        pa.vmap(lambda i: np.gcd(i, 4))(np.arange(3))
    with raises_cleanly(TypeError, "np.busday_offset", "no implementation"):
        _inside_grad(lambda t: np.busday_offset(t, 1))


def test_unsupported_array_attributes_say_what_fits():
    with raises_cleanly(AttributeError, "'ReverseTensor' object has no attribute 'view'", "astype"):
        _inside_grad(lambda t: t.view())
    with raises_cleanly(AttributeError, "flat", "ravel"):
        _inside_grad(lambda t: t.flat)
    with raises_cleanly(AttributeError, "'ReverseTensor' object has no attribute 'nonsense'"):
        _inside_grad(lambda t: t.nonsense)
    assert not hasattr(pa.Tensor(np.ones(2)), "__array_interface__")


@pa.backend("numpy")
def test_arrays_made_inside_a_transform_compute_with_numpy():
    """A constant made inside a transform (a FreshTensor) keeps NumPy's own ufuncs and functions."""
    seen = {}

    def f(t):
        fresh = pa.xp.zeros(3)
        seen["ufunc"] = type(np.exp(fresh))
        seen["function"] = type(np.diag(fresh))
        fresh[0] = t[1]  # then written with a traced value: it is the transform's
        return np.sum(np.exp(fresh))

    g = pa.grad(f)(np.array([0.5, -1.0, 2.0]))
    assert seen == {"ufunc": np.ndarray, "function": np.ndarray}
    np.testing.assert_allclose(g, [0.0, np.exp(-1.0), 0.0])


def test_plain_tensors_dispatch_and_fall_back_to_numpy():
    t = pa.Tensor(np.array([[1.0, 2.0], [3.0, 4.0]]))
    assert type(np.exp(t)) is pa.Tensor and type(np.diag(t)) is pa.Tensor
    np.testing.assert_allclose(np.diag(t).concrete(), [1.0, 4.0])
    hist, edges = np.histogram(t, bins=2)  # no polyad implementation: NumPy's own, on the values
    np.testing.assert_array_equal(hist, [2, 2])


def test_numpy_arrays_outside_transforms_are_untouched():
    """NumPy's own results on NumPy arrays: the same objects' types and values as without polyad."""
    x = np.array([0.5, -1.0, 2.0])
    assert type(np.exp(x)) is np.ndarray and type(x.sum()) is np.float64
    assert type(pa.xp.exp(x)) is np.ndarray  # polyad's namespace on a raw array: a raw array back
    W = np.eye(3)
    W += x  # a NumPy array's in-place operator on NumPy arrays
    np.testing.assert_allclose(W, np.eye(3) + x)


def test_methods_follow_numpy_signatures():
    x = np.arange(6.0).reshape(2, 3)

    def f(t):
        parts = [t.reshape(3, 2), t.reshape((6,)), t.transpose(), t.transpose(1, 0), t.T, t.ravel(),
                 t.flatten("F"),
                 t.sum(axis=0, keepdims=True), t.mean(1), t.std(ddof=1), t.max(), t.min(axis=1), t.cumsum(),
                 t.clip(1.0, 4.0), t.astype(np.float32).astype(float), t.swapaxes(0, 1), t.take([0, 4]),
                 t.diagonal(), t.trace(), t.repeat(2, axis=0), t.squeeze(), t.prod(axis=1), t.var(),
                 t.dot(t.T), t.real, t.imag, t.conj(), t.round(1)]  # fmt: skip
        return [np.asarray(p) if isinstance(p, np.ndarray) else p for p in parts]

    expected = f(x)
    got = f(pa.Tensor(x))
    for e, g in zip(expected, got):
        np.testing.assert_allclose(g.concrete() if isinstance(g, pa.Tensor) else g, e)
    u = pa.Tensor(np.array([3.0, 1.0, 2.0]))
    u.sort()
    np.testing.assert_allclose(u.concrete(), [1.0, 2.0, 3.0])
    u.fill(7.0)
    np.testing.assert_allclose(u.concrete(), [7.0, 7.0, 7.0])
    assert 7.0 in u and 1.0 not in u


def test_the_coverage_table_is_generated_from_the_dispatch_table(tmp_path):
    """docs/numpy_coverage.py (run by ``make docs``) lists every entry of the dispatch table, with the
    status the table gives it."""
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parent.parent / "docs" / "numpy_coverage.py"
    spec = importlib.util.spec_from_file_location("numpy_coverage", path)
    coverage = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(coverage)
    coverage.generate(tmp_path)
    text = (tmp_path / "numpy_coverage.rst").read_text()
    for entry in FUNCTIONS.values():
        module = getattr(np, entry.name.split(".")[0], None) if "." in entry.name else np
        if module is not None and hasattr(module, entry.name.split(".")[-1]):
            assert f"``np.{entry.name}``" in text, entry.name
    for name in UFUNCS:
        assert f"``np.{name}``" in text, name
    assert coverage.status("diag")[:2] == ("dispatches", FUNCTIONS[("numpy", "diag")].derivative)
    assert coverage.status("linalg.tensorinv")[0] == "refused" and coverage.status("asarray")[0] == "refused"
    assert coverage.status("add.reduce")[0] == "dispatches" and coverage.status("zeros")[0] == "unchanged"
