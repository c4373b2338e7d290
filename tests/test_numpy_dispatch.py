"""NumPy's own functions, ufuncs and array methods on polyad tensors (polyad/ops/numpy): every dispatched
one through the op table's checks (values against NumPy on NumPy copies, abstract evaluation, VJP and JVP
against finite differences to second order, vmap against a loop), driven by the rows of
``polyad/testing/table_numpy*.py`` with the bodies of ``tests/test_ops.py``; then the table's coverage
and the protocols' edges (what is refused, with which message, and what NumPy keeps doing)."""

import numpy as np
import pytest
import test_ops

from polyad.ops.numpy import FUNCTIONS, METHODS, UFUNCS
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
