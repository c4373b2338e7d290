"""Writes the coverage table of "Coming from NumPy" (docs/_generated/numpy_coverage.rst) from polyad's own
dispatch table (``polyad.interop.numpy``: ``FUNCTIONS``, ``UFUNCS``, ``METHODS``) and the measure in
docs/numpy_usage.json (the NumPy functions and array methods SciPy's and scikit-learn's own source call, and
the NumPy functions HIPS autograd differentiates; ``scripts/numpy_usage.py`` measures it), so that the table
cannot drift from the code. ``make docs`` runs it (docs/conf.py calls ``generate``); by hand:

    python docs/numpy_coverage.py [--out docs/_generated]
"""

import argparse
import json
import pathlib
import re

import numpy as np

import polyad  # noqa: F401  (installs NumPy's dispatch on polyad's tensors)
from polyad.interop.numpy import FUNCTIONS, METHODS, UFUNCS
from polyad.interop.numpy.methods import UNSUPPORTED
from polyad.interop.numpy.ufuncs import method_support

HERE = pathlib.Path(__file__).resolve().parent
MIN_CALLS = 5  # a function SciPy and scikit-learn call at least this often has a row in the first table
HEADER = ("function", "calls", "autograd", "on a traced value", "derivative, or why not", "polyad ops")
WIDTHS = "16 7 7 10 30 30"

# NumPy functions that do not dispatch (no __array_function__), by what happens to a traced value
_CONVERTED = "NumPy converts its argument with np.asarray, the exit polyad guards: pa.xp.asarray keeps it"
NOT_DISPATCHED = {
    **dict.fromkeys(
        (
            "array",
            "asarray",
            "asanyarray",
            "ascontiguousarray",
            "asfortranarray",
            "asarray_chkfinite",
            "require",
            "from_dlpack",
        ),
        ("refused", _CONVERTED),
    ),  # fmt: skip
    "vectorize": ("refused", "calls np.asarray on its inputs: pa.vmap(f) batches f's polyad ops instead"),
    "frompyfunc": ("refused", "builds an object-array ufunc: pa.vmap(f) instead"),
    "nditer": ("refused", "iterates a NumPy array's memory: iterate the tensor (for row in x) or index it"),
    "ndarray": ("refused", "a NumPy array's constructor: pa.xp.asarray, pa.xp.empty"),
    **dict.fromkeys(
        ("frombuffer", "fromiter", "fromstring", "fromfile", "loadtxt", "genfromtxt", "load", "memmap"),
        ("unchanged", "reads data into a NumPy constant"),
    ),  # fmt: skip
    **dict.fromkeys(
        (
            "zeros",
            "ones",
            "empty",
            "arange",
            "eye",
            "identity",
            "tri",
            "indices",
            "diag_indices",
            "triu_indices",
            "tril_indices",
            "fft.fftfreq",
            "fft.rfftfreq",
        ),
        (
            "unchanged",
            "creates a NumPy constant: to write traced values into a new array, "
            "make it with np.zeros_like(x) or pa.xp.zeros(n)",
        ),
    ),  # fmt: skip
    "full": (
        "unchanged",
        "creates a NumPy constant; a traced fill value is refused (NumPy copies it into a "
        "NumPy array): np.full_like(x, value) or pa.xp.full",
    ),  # fmt: skip
    **dict.fromkeys(
        (
            "finfo",
            "iinfo",
            "dtype",
            "issubdtype",
            "promote_types",
            "common_type",
            "mintypecode",
            "min_scalar_type",
        ),
        ("unchanged", "reads dtypes"),
    ),  # fmt: skip
    **dict.fromkeys(
        (
            "errstate",
            "printoptions",
            "set_printoptions",
            "get_printoptions",
            "seterr",
            "format_float_scientific",
        ),
        ("unchanged", "NumPy's settings and formatting"),
    ),
    "isscalar": ("unchanged", "False for a tensor, as for a NumPy array"),
    "iterable": ("unchanged", "asks iter(): a tensor is iterable"),
    "ndindex": ("unchanged", "index tuples, no array"),
    "broadcast_shapes": ("unchanged", "shapes only"),
    "isfortran": ("unchanged", "the memory layout of a NumPy array"),
    "row_stack": ("dispatches", "NumPy's deprecated alias: it calls np.vstack"),
}


def _cell(text, literal=False):
    if text in (None, ""):
        return " "
    if literal:
        return f"``{text}``"
    text = str(text).replace("|", "\\|").replace("*", "\\*")
    return re.sub(r"(\w)_(?=\W|$)", r"\1\\_", text)  # ``word_`` would be a reference


def _function(path):
    obj = np
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def status(path):
    """``(status, derivative or reason, polyad ops)`` of NumPy's ``path`` given a traced value."""
    module, _, leaf = path.rpartition(".")
    func = _function(path)
    owner = _function(module) if module else np
    if isinstance(owner, np.ufunc):  # a ufunc's method: np.add.reduce
        how = method_support(owner.__name__, leaf)
        if how is not None:
            return "dispatches", UFUNCS[owner.__name__].derivative, how
        return "refused", f"np.{owner.__name__}.{leaf} has no polyad counterpart", ""
    if isinstance(func, np.ufunc):
        entry = UFUNCS.get(func.__name__)
    else:
        entry = FUNCTIONS.get(("numpy." + module if module else "numpy", leaf))
        if entry is None and func is not None and hasattr(func, "_implementation"):  # np.concat, an alias
            entry = FUNCTIONS.get((func.__module__, func.__name__))
    if entry is not None:
        return ("dispatches", entry.derivative, entry.how) if entry.impl else ("refused", entry.refused, "")
    if path in NOT_DISPATCHED:
        return (*NOT_DISPATCHED[path], "")
    if isinstance(func, type):
        if issubclass(func, np.generic):
            return (
                "unchanged",
                "a NumPy scalar type: np.float64(x) of a traced x is a plain number; x.astype",
                "",
            )
        return "unchanged", "a NumPy class (no array operation)", ""
    if func is not None and not hasattr(func, "_implementation"):
        return (
            "refused",
            "NumPy does not dispatch it (no __array_function__): it converts a traced argument",
            "",
        )
    return "refused", "polyad has no implementation: a traced argument raises TypeError naming it", ""


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
    for row in [header, *rows]:
        lines += [
            ("   * - " if j == 0 else "     - ") + _cell(cell, j == 0 and row is not header)
            for j, cell in enumerate(row)
        ]
    return "\n".join(lines) + "\n\n"


def _summary(usage, calls, autograd):
    counts, weighted = dict.fromkeys(("dispatches", "unchanged", "refused"), 0), {}
    for path, n in calls.items():
        if _function(path) is not None or "." in path:
            kind = status(path)[0]
            counts[kind] += 1
            weighted[kind] = weighted.get(kind, 0) + n
    total = sum(weighted.values())
    share = {k: f"{100 * weighted.get(k, 0) / total:.0f}%" for k in counts}
    covered = sum(status(p)[0] == "dispatches" for p in autograd)
    m = usage["measured"]
    return (
        f"Measured on SciPy {m['scipy']} and scikit-learn {m['sklearn']} ({m['files']} source files, their "
        f"tests left out; NumPy {m['numpy']}): they call {sum(counts.values())} NumPy functions {total:,} "
        f"times. Given a traced value, {counts['dispatches']} of them dispatch to polyad "
        f"({share['dispatches']} of the calls), "
        f"{counts['unchanged']} take no array and run in NumPy unchanged ({share['unchanged']}), and "
        f"{counts['refused']} are refused ({share['refused']}: ``np.asarray`` and ``np.array`` are "
        f"{100 * (calls.get('asarray', 0) + calls.get('array', 0)) / total:.0f}% of all calls). Of the "
        f"{len(autograd)} NumPy functions HIPS autograd differentiates, {covered} dispatch.\n\n"
    )


def generate(folder):
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    usage = json.loads((HERE / "numpy_usage.json").read_text())
    calls, autograd = usage["functions"], set(usage["autograd"])
    measured = {p for p, n in calls.items() if n >= MIN_CALLS} | autograd
    measured = sorted(measured, key=lambda p: (-calls.get(p, 0), p))
    text = [_summary(usage, calls, autograd)]
    rows = [(f"np.{p}", calls.get(p, 0), "yes" if p in autograd else "", *status(p)) for p in measured]
    title = f"NumPy functions called at least {MIN_CALLS} times, or differentiated by autograd"
    text.append(_table(title, HEADER, rows, WIDTHS))
    others = sorted({e.name for e in FUNCTIONS.values()} - set(measured))
    rows = [(f"np.{p}", calls.get(p, 0), "", *status(p)) for p in others if _function(p) is not None]
    text.append(
        _table("The other NumPy functions polyad dispatches or refuses by name", HEADER, rows, WIDTHS)
    )
    rows = []
    for name, entry in sorted(UFUNCS.items()):
        detail = entry.derivative if entry.impl is not None else entry.refused
        kind = "dispatches" if entry.impl is not None else "refused"
        rows.append(
            (f"np.{name}", calls.get(name, 0), "yes" if name in autograd else "", kind, detail, entry.how)
        )
    title = "Ufuncs (NumPy's operators with a NumPy array on the left call them too)"
    text.append(_table(title, ("ufunc", *HEADER[1:]), rows, WIDTHS))
    method_calls = usage["methods"]
    rows = [(f"x.{n}", method_calls.get(n, 0), "method", e.derivative, e.how) for n, e in METHODS.items()]
    rows += [(f"x.{n}", method_calls.get(n, 0), "AttributeError", why, "") for n, why in UNSUPPORTED.items()]
    rows.sort(key=lambda r: (-r[1], r[0]))
    title = "Array methods and attributes (calls: an upper bound, every object's attribute of that name)"
    header = ("attribute", "calls", "on a traced value", "derivative, or why not", "polyad ops")
    text.append(_table(title, header, rows, "16 8 12 34 30"))
    (folder / "numpy_coverage.rst").write_text("".join(text))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=HERE / "_generated")
    generate(parser.parse_args().out)
