"""Data type functions of the standard: ``astype`` (an op, in ``ops.base``: the rules of ``sum`` need it)
and the dtype queries.

The queries (``can_cast``, ``finfo``, ``iinfo``, ``isdtype``, ``result_type``) are plain functions: they
answer from the backend that owns their arguments, found from an array (or tensor) among them, else from a
dtype (NumPy's and array_api_strict's dtypes are distinct objects), else the default backend. Python
scalars are accepted by ``result_type`` as the standard allows.
"""

import polyad.core.dispatch as dispatch
from polyad.core import Tensor
from polyad.core.avals import bottom
from polyad.ops.base import astype as astype

# ------------------------------------------------------------------------------ which backend answers


_DTYPE_TYPES = {}  # backend name -> tuple of the types of its dtype objects


def _dtype_types(backend):
    types = _DTYPE_TYPES.get(backend.name)
    if types is None:
        dts = backend.compat.__array_namespace_info__().dtypes().values()
        types = _DTYPE_TYPES[backend.name] = tuple({type(d) for d in dts})
    return types


def owns_dtype(backend, dtype):
    if isinstance(dtype, type):  # NumPy's scalar types (np.float64) stand for dtypes
        return issubclass(dtype, backend.array_types)
    return isinstance(dtype, _dtype_types(backend))


def _backend_of_dtype(dtype):
    """The loaded backend whose dtype ``dtype`` is (the default backend first), or None."""
    return dispatch.find_backend(lambda b: owns_dtype(b, dtype))


def _backend_for(*xs):
    """The backend of the arrays among ``xs``; else of the first dtype among them; else the default."""
    arrays = [bottom(x) for x in xs if isinstance(x, Tensor) or dispatch.backend_of_array(x) is not None]
    if arrays:
        return dispatch.backend_of(arrays)
    for x in xs:
        if isinstance(x, bool | int | float | complex | str | tuple) or x is None:
            continue
        b = _backend_of_dtype(x)
        if b is not None:
            return b
    return dispatch.default_backend()


def _dtype_arg(x):
    """A tensor's dtype (the backend functions take raw arrays or dtypes, not tensors)."""
    return x.dtype if isinstance(x, Tensor) else x


# ------------------------------------------------------------------------------ queries


class finfo_object(tuple):  # noqa: N801 (the standard's name)
    """Machine limits of a floating dtype: ``bits`` (int); ``eps``, ``max``, ``min``, ``smallest_normal``
    (Python floats); ``dtype`` (the real floating dtype described: float32 for complex64). Also a tuple of
    the numbers, so that it compares and converts like one."""

    def __new__(cls, bits, eps, max, min, smallest_normal, dtype):
        self = super().__new__(cls, (int(bits), float(eps), float(max), float(min), float(smallest_normal)))
        self.dtype = dtype
        return self

    bits = property(lambda self: self[0])
    eps = property(lambda self: self[1])
    max = property(lambda self: self[2])
    min = property(lambda self: self[3])
    smallest_normal = property(lambda self: self[4])

    def __repr__(self):
        return (f"finfo_object(bits={self.bits}, eps={self.eps}, max={self.max}, min={self.min}, "
                f"smallest_normal={self.smallest_normal}, dtype={self.dtype})")  # fmt: skip


class iinfo_object(tuple):  # noqa: N801 (the standard's name)
    """Machine limits of an integer dtype: ``bits``, ``max``, ``min`` (Python ints) and ``dtype``. Also a
    tuple of the numbers."""

    def __new__(cls, bits, max, min, dtype):
        self = super().__new__(cls, (int(bits), int(max), int(min)))
        self.dtype = dtype
        return self

    bits = property(lambda self: self[0])
    max = property(lambda self: self[1])
    min = property(lambda self: self[2])

    def __repr__(self):
        return f"iinfo_object(bits={self.bits}, max={self.max}, min={self.min}, dtype={self.dtype})"


def can_cast(from_, to, /):
    """Whether ``from_`` (a dtype, array or tensor) casts to ``to`` under the standard's promotion rules."""
    return bool(_backend_for(from_, to).xp.can_cast(_dtype_arg(from_), to))


def finfo(type, /):
    """Machine limits of a floating dtype (or of an array's dtype), as a ``finfo_object`` of Python
    numbers."""
    f = _backend_for(type).xp.finfo(_dtype_arg(type))
    return finfo_object(f.bits, f.eps, f.max, f.min, f.smallest_normal, f.dtype)


def iinfo(type, /):
    """Machine limits of an integer dtype (or of an array's dtype), as an ``iinfo_object`` of ints."""
    i = _backend_for(type).xp.iinfo(_dtype_arg(type))
    return iinfo_object(i.bits, i.max, i.min, i.dtype)


def isdtype(dtype, kind):
    """Whether ``dtype`` is of ``kind``: a kind name ("bool", "signed integer", "unsigned integer",
    "integral", "real floating", "complex floating", "numeric"), a dtype, or a tuple of them."""
    return bool(_backend_for(dtype).xp.isdtype(dtype, kind))


def result_type(*arrays_and_dtypes):
    """The dtype the standard's promotion rules give for the arguments: arrays, tensors, dtypes and Python
    scalars (at least one array or dtype)."""
    backend = _backend_for(*arrays_and_dtypes)
    return backend.xp.result_type(*(_dtype_arg(a) for a in arrays_and_dtypes))
