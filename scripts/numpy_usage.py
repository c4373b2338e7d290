"""Measures which NumPy functions and array methods SciPy's and scikit-learn's own source call, and records
the NumPy API that HIPS autograd wraps, into docs/numpy_usage.json: the measure the coverage table of
"Coming from NumPy" (docs/numpy_coverage.py) is read against. A measurement: it prints and writes figures,
it asserts nothing.

    python scripts/numpy_usage.py [--out docs/numpy_usage.json]

How it counts (by the syntax tree of every .py file of the installed scipy and sklearn packages, their test
folders and ``conftest.py`` files left out): a call ``np.NAME(...)``, ``np.linalg.NAME(...)``,
``np.fft.NAME(...)`` or ``np.UFUNC.METHOD(...)`` where ``np`` is any name the file bound to ``numpy``
(``import numpy as np``); a call ``OBJ.NAME(...)`` or a read ``OBJ.NAME`` of an ndarray method or attribute
name on anything that is not a module (so ``d.copy()`` on a dict counts too: method counts are an upper
bound, the function counts exact).
"""

import argparse
import ast
import collections
import json
import pathlib
import sys

import numpy as np

# The NumPy names HIPS autograd gives derivatives (defvjp in autograd/numpy/numpy_vjps.py, linalg.py and
# fft.py; list-taking functions in numpy_wrapper.py): facts read from its source, as a list of names.
AUTOGRAD = (
    "where", "nan_to_num", "add", "multiply", "subtract", "divide", "maximum", "minimum", "fmax", "fmin",
    "logaddexp", "logaddexp2", "true_divide", "mod", "remainder", "power", "negative", "abs", "fabs",
    "absolute", "reciprocal", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan",
    "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "rad2deg",
    "degrees", "deg2rad", "radians", "square", "sqrt", "sinc", "reshape", "roll", "array_split", "split",
    "vsplit", "hsplit", "dsplit", "ravel", "expand_dims", "squeeze", "diag", "flipud", "fliplr", "rot90",
    "trace", "full", "triu", "tril", "clip", "swapaxes", "moveaxis", "rollaxis", "real_if_close", "real",
    "imag", "conj", "conjugate", "angle", "cross", "linspace", "diff", "repeat", "tile", "kron",
    "transpose", "sum", "mean", "prod", "var", "std", "max", "min", "amax", "amin", "cumsum", "inner",
    "matmul", "dot", "tensordot", "outer", "concatenate", "sort", "partition", "atleast_1d", "atleast_2d",
    "atleast_3d", "einsum", "diagonal", "vstack", "hstack", "column_stack", "stack", "append", "select",
    "array",
    "linalg.det", "linalg.slogdet", "linalg.inv", "linalg.pinv", "linalg.solve", "linalg.norm",
    "linalg.eigh", "linalg.eig", "linalg.cholesky", "linalg.svd",
    "fft.fft", "fft.ifft", "fft.fft2", "fft.ifft2", "fft.fftn", "fft.ifftn", "fft.rfft", "fft.irfft",
    "fft.rfft2", "fft.irfft2", "fft.rfftn", "fft.irfftn", "fft.fftshift", "fft.ifftshift",
)  # fmt: skip

SUBMODULES = ("linalg", "fft")


def _numpy_aliases(tree):
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "numpy":
                    names.add(a.asname or "numpy")
    return names


def _chain(node):
    """``a.b.c`` as ``["a", "b", "c"]``, or None for anything but names and attributes."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return parts[::-1]


def _resolves(path):
    obj = np
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return False
    return callable(obj)


def count(files):
    functions, methods = collections.Counter(), collections.Counter()
    method_names = {n for n in dir(np.ndarray) if not n.startswith("_")}
    for path in files:
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except (SyntaxError, UnicodeDecodeError):
            continue
        aliases = _numpy_aliases(tree)
        module_names = aliases | {"math", "os", "sys", "warnings", "operator", "itertools"}
        called = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                chain = _chain(node.func)
                called.add(id(node.func))
                if chain and chain[0] in aliases and len(chain) >= 2:
                    path_ = ".".join(chain[1:])
                    if chain[1] in SUBMODULES and len(chain) == 3 or len(chain) == 2:
                        functions[path_] += 1
                    elif len(chain) == 3 and isinstance(getattr(np, chain[1], None), np.ufunc):
                        functions[path_] += 1  # np.add.reduce(...)
                    continue
                root = chain[0] if chain else None
                if node.func.attr in method_names and root not in module_names:
                    methods[node.func.attr] += 1
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and id(node) not in called and node.attr in method_names:
                chain = _chain(node)
                if chain is None or chain[0] not in module_names:
                    methods[node.attr] += 1  # an attribute read: x.T, x.shape, x.real
    functions = collections.Counter({k: v for k, v in functions.items() if _resolves(k)})
    return functions, methods


def sources(package):
    root = pathlib.Path(package.__file__).parent
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        if any(p in ("tests", "test") for p in parts) or path.name == "conftest.py":
            continue
        yield path


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = pathlib.Path(__file__).resolve().parent.parent / "docs" / "numpy_usage.json"
    parser.add_argument("--out", type=pathlib.Path, default=default)
    args = parser.parse_args()
    import scipy
    import sklearn

    files = list(sources(scipy)) + list(sources(sklearn))
    functions, methods = count(files)
    record = {
        "measured": {
            "scipy": scipy.__version__,
            "sklearn": sklearn.__version__,
            "numpy": np.__version__,
            "files": len(files),
        },
        "functions": dict(functions.most_common()),
        "methods": dict(methods.most_common()),
        "autograd": list(AUTOGRAD),
    }
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"{len(files)} files of scipy {scipy.__version__} and scikit-learn {sklearn.__version__}")
    print(f"{sum(functions.values())} calls of {len(functions)} NumPy functions; top 40:")
    for name, n in functions.most_common(40):
        print(f"  {n:6d}  np.{name}")
    print("array methods and attributes (upper bounds), top 40:")
    for name, n in methods.most_common(40):
        print(f"  {n:6d}  .{name}")
    print(f"written: {args.out}")


if __name__ == "__main__":
    sys.exit(main())
