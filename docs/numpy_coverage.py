"""Writes the coverage table of "Coming from NumPy" (docs/_generated/numpy_coverage.rst) from polyad's own
dispatch table (``polyad.ops.numpy``: ``FUNCTIONS``, ``UFUNCS``, ``METHODS``) and the measure in
docs/numpy_usage.json (which NumPy functions and array methods SciPy's and scikit-learn's own source call,
and which NumPy functions HIPS autograd differentiates; ``scripts/numpy_usage.py`` measures it), so that the
table cannot drift from the code. ``make docs`` runs it (docs/conf.py calls ``generate``); by hand:

    python docs/numpy_coverage.py [--out docs/_generated]
"""

import argparse
import json
import pathlib

import numpy as np

import polyad  # noqa: F401  (installs NumPy's dispatch on polyad's tensors)
from polyad.ops.numpy import FUNCTIONS, METHODS, UFUNCS

HERE = pathlib.Path(__file__).resolve().parent
MIN_CALLS = 5  # a function SciPy and scikit-learn call at least this often is in the table

# NumPy functions that do not dispatch (no __array_function__), by what they do with a traced value
CONVERTS = ("array", "asarray", "asanyarray", "ascontiguousarray", "asfortranarray", "asarray_chkfinite",
            "require", "frombuffer", "fromiter", "fromstring", "loadtxt", "load", "vectorize", "frompyfunc",
            "nditer", "ndindex", "ndarray", "iterable")  # fmt: skip
CONVERT_WHY = {
    "vectorize": "calls np.asarray on its inputs: use pa.vmap(f), which batches f's polyad ops",
    "frompyfunc": "builds an object-array ufunc: use pa.vmap(f)",
    "nditer": "iterates a NumPy array's memory: iterate the tensor (for row in x) or index it",
    "ndindex": "index tuples only (no array): works, it never sees a traced value",
    "iterable": "asks iter(): a tensor is iterable",
}
CONSTANTS = {
    "zeros": "creates a NumPy constant (no traced argument); write traced values into np.zeros_like(x) or "
             "pa.xp.zeros(n) instead",
    "empty": "creates a NumPy constant; write traced values into np.empty_like(x) or pa.xp.empty(n)",
    "ones": "creates a NumPy constant", "arange": "creates a NumPy constant", "eye": "creates a NumPy constant",
    "identity": "creates a NumPy constant", "indices": "creates NumPy index arrays",
    "full": "with a traced fill value it is refused (NumPy copies it into a NumPy array): np.full_like(x, v)",
    "finfo": "reads a dtype", "iinfo": "reads a dtype", "dtype": "a dtype", "issubdtype": "reads dtypes",
    "promote_types": "reads dtypes", "isscalar": "False for a tensor, as for a NumPy array",
    "errstate": "a context for NumPy's floating-point warnings", "printoptions": "printing options",
    "set_printoptions": "printing options", "seterr": "NumPy's error handling", "broadcast_shapes": "shapes",
    "float64": "a NumPy scalar type", "float32": "a NumPy scalar type", "int64": "a NumPy scalar type",
    "int32": "a NumPy scalar type", "complex128": "a NumPy scalar type", "complex64": "a NumPy scalar type",
    "intp": "a NumPy scalar type", "datetime64": "a NumPy scalar type", "common_type": "reads dtypes",
    "diag_indices": "creates NumPy index arrays", "triu_indices": "creates NumPy index arrays",
    "tril_indices": "creates NumPy index arrays", "row_stack": "NumPy's deprecated alias: calls np.vstack",
    "min_scalar_type": "reads a value: a dtype", "isfortran": "memory layout of a NumPy array",
}  # fmt: skip


def _cell(text):
    return (text or "").replace("|", "\\|").replace("*", "\\*")


def _function(path):
    obj = np
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _entry(path):
    module, _, name = path.rpartition(".")
    entry = FUNCTIONS.get(("numpy." + module if module else "numpy", name))
    if entry is None:
        func = _function(path)
        if isinstance(func, np.ufunc):
            return UFUNCS.get(func.__name__)
        if func is not None and hasattr(func, "_implementation"):  # an alias: np.concat of np.concatenate
            entry = FUNCTIONS.get((func.__module__, func.__name__))
    return entry


def status(path):
    """``(status, derivative or reason, how)`` of NumPy's ``path`` on a traced value."""
    entry = _entry(path)
    leaf = path.rpartition(".")[2]
    if entry is not None and entry.impl is not None:
        return "dispatches", entry.derivative, entry.how
    if entry is not None:
        return "refused", entry.refused, ""
    func = _function(path)
    if leaf in CONVERTS:
        return "refused", CONVERT_WHY.get(leaf, "converts with np.asarray, the exit polyad guards: use pa.xp.asarray "
                                                 "to keep the derivative, or a function polyad covers"), ""  # fmt: skip
    if leaf in CONSTANTS:
        return "unchanged", CONSTANTS[leaf], ""
    if func is not None and not hasattr(func, "_implementation") and not isinstance(func, np.ufunc):
        return (
            "refused",
            "NumPy does not dispatch it (no __array_function__): a traced argument is converted",
            "",
        )
    return "refused", "polyad has no implementation (a traced argument raises TypeError naming it)", ""


def _table(title, header, rows, widths):
    lines = [
        title,
        "-" * len(title),
        "",
        ".. list-table::",
        "   :header-rows: 1",
        f"   :widths: {widths}",
        "",
    ]
    for i, row in enumerate([header, *rows]):
        for j, cell in enumerate(row):
            lines.append(("   * - " if j == 0 else "     - ") + (_cell(str(cell)) or " "))
    return "\n".join(lines) + "\n\n"


def generate(folder):
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    usage = json.loads((HERE / "numpy_usage.json").read_text())
    calls, autograd = usage["functions"], set(usage["autograd"])
    measured = {p for p, n in calls.items() if n >= MIN_CALLS} | autograd
    measured = sorted((p for p in measured if _function(p) is not None), key=lambda p: (-calls.get(p, 0), p))
    totals = {"dispatches": 0, "unchanged": 0, "refused": 0}
    weighted = dict.fromkeys(totals, 0)
    for path, n in calls.items():
        if _function(path) is not None:
            kind = status(path)[0]
            totals[kind] += 1
            weighted[kind] += n
    all_calls = sum(weighted.values())
    m = usage["measured"]
    text = [
        f"Measured on SciPy {m['scipy']} and scikit-learn {m['sklearn']} ({m['files']} source files, tests left out; "
        f"NumPy {m['numpy']}): they call {sum(totals.values())} NumPy functions {all_calls:,} times. On a traced "
        f"value, {totals['dispatches']} of them dispatch to polyad ({100 * weighted['dispatches'] / all_calls:.0f}% "
        f"of the calls), {totals['unchanged']} take no traced value and run in NumPy unchanged "
        f"({100 * weighted['unchanged'] / all_calls:.0f}%), {totals['refused']} are refused "
        f"({100 * weighted['refused'] / all_calls:.0f}%, ``np.asarray`` and ``np.array`` most of them). Of the "
        f"{len(autograd)} NumPy functions HIPS autograd differentiates, "
        f"{sum(status(p)[0] == 'dispatches' for p in autograd if _function(p) is not None)} dispatch.",
        "",
    ]
    rows = []
    for path in measured:
        kind, detail, how = status(path)
        rows.append((f"np.{path}", calls.get(path, 0), "yes" if path in autograd else "", kind, detail, how))
    text.append(_table(f"NumPy functions (called at least {MIN_CALLS} times, or differentiated by autograd)",
                       ("function", "calls", "autograd", "on a traced value", "derivative, or why not", "polyad ops"),
                       rows, "16 7 7 10 30 30"))  # fmt: skip
    others = sorted({e.name for e in FUNCTIONS.values()} - set(measured))
    rows = [(f"np.{p}", calls.get(p, 0), "", *status(p)) for p in others if _function(p) is not None]
    text.append(_table("Other NumPy functions polyad covers or refuses by name",
                       ("function", "calls", "autograd", "on a traced value", "derivative, or why not", "polyad ops"),
                       rows, "16 7 7 10 30 30"))  # fmt: skip
    rows = []
    for name, entry in sorted(UFUNCS.items()):
        kind = "dispatches" if entry.impl is not None else "refused"
        rows.append((f"np.{name}", calls.get(name, 0), "yes" if name in autograd else "", kind,
                     entry.derivative if entry.impl is not None else entry.refused, entry.how))  # fmt: skip
    text.append(_table("Ufuncs (and NumPy's operators with a NumPy array on the left)",
                       ("ufunc", "calls", "autograd", "on a traced value", "derivative, or why not", "polyad ops"),
                       rows, "16 7 7 10 30 30"))  # fmt: skip
    from polyad.ops.numpy.methods import UNSUPPORTED

    method_calls = usage["methods"]
    rows = [
        (f"x.{n}", method_calls.get(n, 0), "method", e.derivative, e.how) for n, e in sorted(METHODS.items())
    ]
    rows += [
        (f"x.{n}", method_calls.get(n, 0), "AttributeError", why, "")
        for n, why in sorted(UNSUPPORTED.items())
    ]
    rows.sort(key=lambda r: -r[1])
    text.append(_table("Array methods and attributes (calls: an upper bound, any object's method of that name)",
                       ("attribute", "calls", "on a traced value", "derivative, or why not", "polyad ops"),
                       rows, "16 8 12 34 30"))  # fmt: skip
    (folder / "numpy_coverage.rst").write_text("\n".join(text))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=HERE / "_generated")
    generate(parser.parse_args().out)
