"""The array vocabulary every layer speaks: abstract arrays (``ShapeDtype``), dtype kinds and names, item
sizes, shapes, axes and devices of any backend's arrays and of tensors. It reads arrays and answers
questions about them; it defines no op (``polyad.ops.common`` holds what op definitions share).

Example:
    >>> import numpy as np
    >>> from polyad.core.avals import ShapeDtype, is_floating, itemsize, broadcast_shape
    >>> is_floating(np.ones(2)), itemsize(np.dtype("complex64"), np), broadcast_shape((3, 1), (4,))
    (True, 8, (3, 4))
    >>> ShapeDtype((2,), np.dtype("float32"))
    ShapeDtype(shape=(2,), dtype=float32)
"""

import math

import polyad.core.dispatch as dispatch
from polyad.core.tensor import Tensor


class ShapeDtype:
    """An abstract array: shape, dtype and device, no data. Returned by ``eval_shape``. ``weak_type``: it
    stands for a Python number (``eval_shape`` of a function returning one), whose dtype gives way to an
    array's in arithmetic, as JAX's weakly typed values do."""

    __slots__ = ("shape", "dtype", "device", "weak_type")

    def __init__(self, shape, dtype, device=None, weak_type=False):
        self.shape = tuple(shape)
        self.dtype = dtype
        self.device = device
        self.weak_type = weak_type

    @classmethod
    def of(cls, x):
        """The shape, dtype and device of array ``x`` (a backend array or anything with them)."""
        return cls(x.shape, x.dtype, getattr(x, "device", None))

    # derived from the shape as a tensor's are; ``array_namespace`` of an abstract array is polyad's
    ndim = Tensor.ndim
    size = Tensor.size
    __array_namespace__ = Tensor.__array_namespace__

    def __eq__(self, other):
        return isinstance(other, ShapeDtype) and (self.shape, self.dtype, self.weak_type) == (
            other.shape,
            other.dtype,
            other.weak_type,
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self):
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapeDtype(shape={self.shape}, dtype={self.dtype}{weak})"


def is_array(x):
    """Whether ``x`` is an array rather than a Python value: a ``Tensor`` or an Array API library's array
    (it has ``__array_namespace__``; CuPy's and Dask's do not: ``dispatch.backend_of_array`` knows them).

    Args:
        x: anything.

    Returns:
        bool.

    Example:
        >>> import polyad as pa
        >>> is_array(pa.xp.ones(2)), is_array(1.0), is_array([1.0])
        (True, False, False)
    """
    return isinstance(x, Tensor) or hasattr(x, "__array_namespace__")


def xp_of(*xs):
    """The backend Array API namespace of the arrays underneath ``xs`` (for dtype questions only)."""
    return dispatch.backend_of([bottom(x) for x in xs]).xp


def bottom(x):
    while isinstance(x, Tensor):
        x = x._value
    return x


def read_only(x):
    """``x``, a raw array, marked read-only where its library has the flag (NumPy); None where it cannot
    be (a tensor, CuPy, array_api_strict). Marks an array that shares memory it must not write to (a view
    of the caller's array, a cached constant), so that a transform copies it before handing it out
    (``polyad.api.jacobians``); where it cannot be marked, make a copy instead."""
    flags = None if isinstance(x, Tensor) else getattr(x, "flags", None)
    if flags is None or not hasattr(flags, "writeable"):
        return None
    try:
        flags.writeable = False
    except (ValueError, AttributeError, TypeError):
        return None
    return x


def is_read_only(x):
    """Whether the raw array underneath ``x`` is marked read-only (see ``read_only``)."""
    flags = getattr(bottom(x), "flags", None)
    return flags is not None and getattr(flags, "writeable", True) is False


_NUMPY_KINDS = {"c": "c", "f": "f", "b": "b"}  # NumPy-style dtype.kind letters; others are integers


_KINDS = {}  # (type(dtype), dtype) -> kind, for dtypes without .kind; the type keeps libraries apart


def dtype_kind(dtype):
    """ "c", "f", "b" or "i" for a dtype of any backend."""
    k = getattr(dtype, "kind", None)  # NumPy and CuPy dtypes
    if k is not None:
        return _NUMPY_KINDS.get(k, "i")
    key = (type(dtype), dtype)
    kind = _KINDS.get(key)
    if kind is None:
        s = str(dtype)
        kind = _KINDS[key] = "c" if "complex" in s else "f" if "float" in s else "b" if "bool" in s else "i"
    return kind


def is_complex(x):
    return dtype_kind(x.dtype) == "c"


def is_floating(x):
    """True for real or complex floating arrays: the dtypes that carry derivatives."""
    return dtype_kind(x.dtype) in "fc"


def ndim_of(x):
    return len(x.shape) if hasattr(x, "shape") else 0


def shape_of(x):
    return tuple(x.shape) if hasattr(x, "shape") else ()


def broadcast_shape(*shapes):
    """The broadcast shape of ``shapes`` (the standard's rules)."""
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(-ndim, 0):
        dims = {s[i] for s in shapes if len(s) >= -i and s[i] != 1}
        if len(dims) > 1:
            raise ValueError(f"shapes {shapes} cannot be broadcast together")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def normalize_axis(axis, ndim):
    """``axis`` as a non-negative index into ``ndim`` axes (0 for a 0-d array)."""
    if not -ndim <= axis < max(ndim, 1):
        raise ValueError(f"axis {axis} is out of bounds for an array of dimension {ndim}")
    return axis % ndim if ndim else 0


def device_of(x):
    """The device of the array underneath ``x`` (None for a Python scalar)."""
    return getattr(bottom(x), "device", None)


_DTYPE_NAMES = {}


def dtype_name(dtype):
    """``dtype``'s name ("float64"), cached: ``str`` of a NumPy dtype costs microseconds."""
    key = (type(dtype), dtype)  # the type first: dtypes of two libraries are never compared (they warn)
    try:
        return _DTYPE_NAMES[key]
    except KeyError:
        name = _DTYPE_NAMES[key] = str(dtype).rsplit(".", 1)[-1]
        return name
    except TypeError:  # an unhashable dtype object
        return str(dtype).rsplit(".", 1)[-1]


def same_named_dtype(xp, dtype):
    """The dtype of namespace ``xp`` named as ``dtype``, a dtype (or NumPy scalar type) of another library:
    a value made without a device (``polyad.xp.int64`` on the numpy default backend) used with another
    library's arrays stands for it."""
    name = dtype.__name__ if isinstance(dtype, type) else dtype_name(dtype)
    return getattr(xp, name)


def itemsize(dtype, xp):
    """Bytes per element of ``dtype``, any library's: from its name ("complex128": 16), else through
    ``xp``'s finfo/iinfo. (``xp`` may be polyad's namespace, whose dtypes are the default backend's: a
    comparison with them would not recognise another library's bool.)"""
    name = dtype_name(dtype)
    if name == "bool":
        return 1
    digits = "".join(c for c in name if c.isdigit())
    if digits:
        return int(digits) // 8
    if xp.isdtype(dtype, "complex floating"):
        return 2 * xp.finfo(dtype).bits // 8
    if xp.isdtype(dtype, "real floating"):
        return xp.finfo(dtype).bits // 8
    return xp.iinfo(dtype).bits // 8


def nbytes(avals, xp):
    """Total bytes of a list of arrays or ShapeDtypes."""
    return sum(math.prod(a.shape) * itemsize(a.dtype, xp) for a in avals)


def shape_tuple(shape):
    return (shape,) if isinstance(shape, int) else tuple(shape)
