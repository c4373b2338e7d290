"""What the NumPy layer's files share: the dispatch table's entries, how they are registered, and the
conversions of NumPy's arguments (dtypes given NumPy's ways, lists and scalars, ``axis=None`` meaning the
flattened array) to polyad's.

An entry says what a NumPy function does on polyad tensors: the function that computes it in polyad ops
(``impl``), what its derivative is (``derivative``: one of ``EXACT``, ``NONE_DISCRETE``, ``NONE_METADATA``),
how (``how``: the ops it is made of, for the coverage table), or why it is refused (``refused``: the reason
and what fits instead). The table is keyed ``(module, name)`` as NumPy's function objects give them
(``np.linalg.solve`` is ``("numpy.linalg", "solve")``), so this layer needs no NumPy import to match them.
"""

import dataclasses
import threading
from collections.abc import Callable

import polyad.core.dispatch as dispatch
import polyad.xp as pxp
from polyad.backends.host import np as host_np
from polyad.core import Tensor
from polyad.core.avals import bottom, dtype_kind

EXACT = "exact (the ops' own rules)"  # every op it is made of has its rules (grad, jvp, vmap, jit follow)
NONE_DISCRETE = "none: integer or boolean result"  # comparisons, indices, counts
NONE_METADATA = "none: reads shape or dtype only"  # np.shape, np.ndim, np.result_type
ZERO = "zero: piecewise constant, or an op without a derivative"  # np.spacing, np.nextafter


@dataclasses.dataclass(frozen=True)
class Entry:
    """One NumPy function (or ufunc, or ndarray method) and what polyad does with it.

    Attributes:
        name: its path under ``numpy`` ("diag", "linalg.solve", "fft.rfft"); a ufunc: "ufunc.exp"; an
            ndarray method: "ndarray.sum".
        impl: computes it in polyad ops, taking NumPy's signature; None where refused.
        derivative: ``EXACT``, ``NONE_DISCRETE`` or ``NONE_METADATA``.
        how: the polyad ops it is made of (one line, for the coverage table).
        refused: why it cannot run on a traced value, and what to use instead (None where it dispatches).
    """

    name: str
    impl: Callable | None
    derivative: str = EXACT
    how: str = ""
    refused: str | None = None


FUNCTIONS: dict[tuple[str, str], Entry] = {}  # (module, name) of NumPy's function -> entry


def _key(path):
    module, _, name = path.rpartition(".")
    return ("numpy." + module if module else "numpy", name)


def implements(*paths, derivative=EXACT, how=""):
    """Register the decorated function as polyad's implementation of NumPy's ``paths`` (aliases share one:
    ``implements("amax", "max")``)."""

    def register(impl):
        for path in paths:
            FUNCTIONS[_key(path)] = Entry(path, impl, derivative, how)
        return impl

    return register


def refuse(path, why):
    """Record NumPy's ``path`` as refused on traced values: ``why`` says why and what to use instead."""
    FUNCTIONS[_key(path)] = Entry(path, None, derivative="", refused=why)


def entry_of(func):
    """The table's entry for NumPy's function object ``func``, or None."""
    return FUNCTIONS.get((getattr(func, "__module__", None), getattr(func, "__name__", None)))


# ------------------------------------------------------------------------------ arguments

_CALL = threading.local()  # the array a NumPy call dispatched on: Python data in the call is made like it


class dispatched_on:  # noqa: N801  (a context manager, named as one)
    """While NumPy's function runs in polyad, lists and scalars among its arguments become arrays of
    ``tensor``'s library and device (a CuPy tensor's ``np.take(t, [0, 2])`` takes CuPy indices)."""

    __slots__ = ("tensor", "previous")

    def __init__(self, tensor):
        self.tensor = tensor

    def __enter__(self):
        self.previous = getattr(_CALL, "like", None)
        _CALL.like = self.tensor

    def __exit__(self, *exc):
        _CALL.like = self.previous


def is_array(x):
    """Whether ``x`` is a polyad tensor or an array of a backend (not a list, scalar or None)."""
    return isinstance(x, Tensor) or dispatch.backend_of_array(x) is not None


def arr(x, dtype=None, like=None):
    """``x`` as something polyad's functions take as an array: tensors and backend arrays unchanged (cast to
    ``dtype`` if given), Python and NumPy scalars, lists and tuples (of tensors too) through ``xp.asarray``,
    as NumPy converts them; data without tensors on the library of ``like`` if given (the array it meets)."""
    if not is_array(x):
        like = like if like is not None else getattr(_CALL, "like", None)
        if like is not None and not _holds_tensor(x):
            return xp_of(like).asarray(x, dtype=as_dtype(dtype, like), device=like.device)
        x = pxp.asarray(x, dtype=as_dtype(dtype))
    elif dtype is not None:
        x = astype(x, dtype)
    return x


def _holds_tensor(x):
    if isinstance(x, list | tuple):
        return any(_holds_tensor(v) for v in x)
    return isinstance(x, Tensor)


def arrays(xs):
    return [arr(x) for x in xs]


def xp_of(like):
    """The namespace of ``like``'s library (its backend's; polyad.xp's for a Python value or an abstract
    tensor), to create constants there (index arrays, fills) and name its dtypes: polyad.xp's creation
    functions pick the default backend for a device name two libraries share ("cpu")."""
    backend = dispatch.backend_of_array(bottom(like)) if like is not None else None
    return backend.xp if backend is not None else pxp


def default_dtype(kind, like=None):
    """The default dtype of ``kind`` ("real floating", "integral", "complex floating") of ``like``'s library
    (the default backend's without ``like``)."""
    return xp_of(like).__array_namespace_info__().default_dtypes()[kind]


_PYTHON_TYPES = {float: "real floating", int: "integral", complex: "complex floating"}


def as_dtype(spec, like=None):
    """A dtype as NumPy's functions take it (a dtype, a scalar type ``np.float32``, a Python type ``float``,
    a string ``"float32"`` or ``"f8"``) as the dtype of that name of ``like``'s library (the default
    backend's without ``like``); None stays None."""
    if spec is None:
        return None
    ns = xp_of(like)
    if spec is bool:
        return ns.bool
    if spec in _PYTHON_TYPES:
        return default_dtype(_PYTHON_TYPES[spec], like)
    for dtype in ns.__array_namespace_info__().dtypes().values():  # already one of the library's
        if type(dtype) is type(spec) and dtype == spec:
            return spec
    name = None
    if isinstance(spec, str) or getattr(spec, "__module__", None) == "numpy":
        try:
            name = host_np.dtype(spec).name
        except TypeError:
            name = None
    if name is None:
        name = getattr(spec, "name", None) or str(spec)
    name = {"bool_": "bool"}.get(name, name)
    try:
        return getattr(ns, name)
    except AttributeError:
        raise TypeError(
            f"dtype {spec!r} has no counterpart among polyad's dtypes ({', '.join(_NAMES)})"
        ) from None


_NAMES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32",
          "float64", "complex64", "complex128")  # fmt: skip


def astype(x, dtype):
    dtype = as_dtype(dtype, x)
    return x if x.dtype == dtype else pxp.astype(x, dtype)


_KIND_NAMES = {"b": "bool", "i": "integral", "f": "real floating", "c": "complex floating"}


def kind_of(x):
    """The kind of an array's dtype: "bool", "integral", "real floating" or "complex floating"."""
    return _KIND_NAMES[dtype_kind(x.dtype)]


def floating(x):
    """``x`` as NumPy's floating functions see it: booleans and integers in the default float dtype (NumPy
    computes ``np.sqrt`` of integers in float64), floats and complex numbers unchanged."""
    if not isinstance(x, Tensor) and not is_array(x):
        x = arr(x)
    if dtype_kind(x.dtype) in "bi":  # the hot path of np.exp(t) and the like: one cached lookup
        return pxp.astype(x, default_dtype("real floating", x))
    return x


def is_complex(x):
    return dtype_kind(x.dtype) == "c"


def flat_or(x, axis):
    """NumPy's ``axis=None``: ``(x flattened, 0)``; else ``(x, axis)``."""
    if axis is None:
        return pxp.reshape(x, (-1,)), 0
    return x, axis


def axis_arg(axis):
    """An ``axis`` argument as the standard takes it (a tuple where NumPy allows a list)."""
    return tuple(axis) if isinstance(axis, list) else axis


def no_out(name, out):
    """NumPy's ``out=`` on a function that polyad computes out of place: only ``None`` is taken here (the
    callers that support ``out=`` write into it themselves)."""
    if out is not None:
        raise TypeError(
            f"np.{name}(..., out=...): polyad computes out of place; assign the result instead (out = ...)"
        )


def write_out(out, result):
    """NumPy's ``out=``: write ``result`` into ``out`` (a polyad tensor, through its functionalised
    ``__setitem__``, the path every in-place write takes) and return ``out``; None returns ``result``."""
    if out is None:
        return result
    if isinstance(out, tuple):
        if len(out) != 1:
            raise TypeError(f"out= takes one array here, got a tuple of {len(out)}")
        out = out[0]
    if not isinstance(out, Tensor):
        raise TypeError(
            f"out= names a {type(out).__name__}, which cannot hold a value computed from a polyad tensor "
            "(its derivative or batch would be lost): assign the result instead (out = ...), or create "
            "the output with polyad (np.zeros_like(x), pa.xp.zeros(...)) so it is a polyad tensor"
        )
    out[...] = result
    return out


def sequence(values, name):
    """``values`` (a list or tuple of arrays, or one array split along its first axis, as NumPy's stacking
    functions take them) as a list of arrays."""
    if is_array(values):
        return [values[i, ...] for i in range(values.shape[0])]
    if not isinstance(values, list | tuple):
        raise TypeError(f"np.{name} takes a sequence of arrays, got {type(values).__name__}")
    return arrays(values)


def promote(*xs):
    """Arrays of mixed kinds (an integer array with a float one) brought to one dtype, as NumPy does: an
    operand of a lower kind takes the dtype of the highest-kind operand."""
    xs = arrays(xs)
    kinds = [kind_of(x) for x in xs]
    order = ("bool", "integral", "real floating", "complex floating")
    top = max(range(len(xs)), key=lambda i: order.index(kinds[i]))
    if all(k == kinds[top] for k in kinds):
        return xs
    dtype = xs[top].dtype
    return [x if kinds[i] == kinds[top] else pxp.astype(x, dtype) for i, x in enumerate(xs)]


def as_int(value, name):
    """A Python int from an argument NumPy wants an integer for (an int, a 0-d integer array)."""
    try:
        return int(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}") from None
