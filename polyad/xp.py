"""polyad's Array API namespace (standard 2025.12, with the linalg and fft extensions, and ``special``: the
special functions SciPy looks up on a namespace).

Every function here binds an op of the registry, so it runs on raw backend arrays (fast path: a raw
array of the same library comes back) and on every transform's tensors alike. Dtypes are those of the
default backend; constants are Python floats as the standard says.

Example:
    >>> import numpy as np
    >>> from polyad import xp
    >>> xp.sum(xp.sin(np.zeros(3)))
    np.float64(0.0)
"""

import importlib
import importlib.util
import math
import sys
import types

import polyad.core.dispatch as dispatch
import polyad.core.standard as standard
from polyad.core import Tensor, bind, install_namespace
from polyad.ops import creation, views

__array_api_version__ = standard.API_VERSION

_FAMILIES = [
    importlib.import_module(f"polyad.ops.{name}")
    for name in (
        "elementwise",
        "creation",
        "dtypes",
        "manipulation",
        "indexing",
        "reductions",
        "searching",
        "sets",
        "linalg",
        "fft",
        "dct",
    )
    if importlib.util.find_spec(f"polyad.ops.{name}") is not None
]


def _find(name, modules):
    for m in modules:
        f = getattr(m, name, None)
        if f is not None and callable(f) and not isinstance(f, types.ModuleType):
            return f
    return None


_module = sys.modules[__name__]
for _name in standard.FUNCTIONS:
    _f = views.NAMESPACE.get(_name) or _find(_name, _FAMILIES)  # views: those that alias, as NumPy's
    if _f is not None:
        setattr(_module, _name, _f)


def _submodule(name, names, families):
    mod = types.ModuleType(f"{__name__}.{name}")
    mod.__doc__ = f"The {name} extension of polyad's namespace."
    for n in names:
        f = _find(n, families)
        if f is not None:
            setattr(mod, n, f)
    sys.modules[mod.__name__] = mod
    return mod


_linalg_families = [m for m in _FAMILIES if m.__name__.endswith((".linalg",))]
_fft_families = [m for m in _FAMILIES if m.__name__.endswith((".fft", ".dct"))]
# the standard's linalg, and the structured solves polyad adds to it (SciPy's: polyad/ops/linalg/)
_linalg_extensions = tuple(n for m in _linalg_families for n in getattr(m, "EXTENSIONS", ()))
linalg = _submodule("linalg", standard.LINALG + _linalg_extensions, [views, *_linalg_families])
# not in the standard: SciPy's discrete cosine and sine transforms (polyad/ops/dct.py) join the fft extension
_dct = importlib.import_module("polyad.ops.dct")
fft = _submodule("fft", standard.FFT + _dct.NAMES, _fft_families)
# not in the standard: the functions SciPy looks up as xp.special.<name> (polyad/ops/special/)
_special = importlib.import_module("polyad.ops.special")
special = _submodule("special", _special.NAMES, [_special])
# not in the standard: SciPy's array-API code asks xp.roots before building its own companion matrix
roots = importlib.import_module("polyad.ops.linalg.eig").roots

e = math.e
pi = math.pi
inf = math.inf
nan = math.nan
newaxis = None


def __getattr__(name):
    # dtypes come from the default backend, so that ``xp.float64`` is the dtype its arrays carry
    if name in standard.DTYPES:
        return getattr(dispatch.default_backend().xp, name)
    raise AttributeError(f"module 'polyad.xp' has no attribute {name!r}")


class _NamespaceInfo:
    """The standard's inspection API, answered by the default backend (or the one owning ``device``)."""

    def _info(self, device=None):
        return dispatch.backend_of_device(device).compat.__array_namespace_info__()

    def capabilities(self):
        return self._info().capabilities()

    def default_device(self):
        return self._info().default_device()

    def default_dtypes(self, *, device=None):
        return self._info(device).default_dtypes(device=device)

    def devices(self):
        return tuple(self._info().devices())  # a tuple, as the 2025.12 standard says (2024.12: a list)

    def dtypes(self, *, device=None, kind=None):
        return self._info(device).dtypes(device=device, kind=kind)


def __array_namespace_info__():
    """The inspection namespace: capabilities, default device and dtypes, devices, dtypes."""
    return _NamespaceInfo()


# ------------------------------------------------------------------------------ the Tensor's methods

# Python operator -> namespace function (reflected and in-place forms follow from the binary ones)
_BINARY_OPERATORS = {
    "add": "add",
    "sub": "subtract",
    "mul": "multiply",
    "truediv": "divide",
    "floordiv": "floor_divide",
    "mod": "remainder",
    "pow": "pow",
    "matmul": "matmul",
    "and": "bitwise_and",
    "or": "bitwise_or",
    "xor": "bitwise_xor",
    "lshift": "bitwise_left_shift",
    "rshift": "bitwise_right_shift",
}
_SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%", "pow": "**",
            "matmul": "@", "and": "&", "or": "|", "xor": "^", "lshift": "<<", "rshift": ">>"}  # fmt: skip
_COMPARISONS = {
    "__eq__": "equal",
    "__ne__": "not_equal",
    "__lt__": "less",
    "__le__": "less_equal",
    "__gt__": "greater",
    "__ge__": "greater_equal",
}
_UNARY_OPERATORS = {
    "__neg__": "negative",
    "__pos__": "positive",
    "__abs__": "abs",
    "__invert__": "bitwise_invert",
}


def _forward(fn):
    op = getattr(fn, "op", None)  # a function that only binds an op: bind it directly (the hot path)
    if op is None:
        return lambda self, other: fn(self, other)
    return lambda self, other: bind(op, self, other)


def _reflected(fn):
    op = getattr(fn, "op", None)
    if op is None:
        return lambda self, other: fn(other, self)
    return lambda self, other: bind(op, other, self)


def _inplace(fn, name):
    what = f"x {name}= y"

    def method(self, other):
        result = fn(self, other)
        if not isinstance(result, Tensor):
            return result
        if self._alias is None:  # shares memory with nothing: the common case
            return self._become(result)
        return views.write(self, result, what)  # a view, or a base of views: they see the write

    return method


def _unary(fn):
    op = getattr(fn, "op", None)
    return (lambda self: fn(self)) if op is None else (lambda self: bind(op, self))


def _tensor_methods():
    """The methods ``Tensor`` gets from the namespace: the standard's operators, indexing, to_device."""
    methods = {
        "__getitem__": views.getitem,  # a basic index is a view, as in NumPy
        "__setitem__": views.setitem,  # functionalised, and written through views and bases
        "to_device": lambda self, device, /, *, stream=None: creation.to_device(self, device, stream=stream),
    }
    for name, fname in _BINARY_OPERATORS.items():
        fn = getattr(_module, fname)
        methods[f"__{name}__"] = _forward(fn)
        methods[f"__r{name}__"] = _reflected(fn)
        methods[f"__i{name}__"] = _inplace(fn, _SYMBOLS[name])
    for dunder, fname in _COMPARISONS.items():
        methods[dunder] = _forward(getattr(_module, fname))
    for dunder, fname in _UNARY_OPERATORS.items():
        methods[dunder] = _unary(getattr(_module, fname))
    return methods


install_namespace(_module, _tensor_methods())
