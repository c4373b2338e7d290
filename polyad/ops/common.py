"""Shared pieces for defining ops: the ``define`` helper, abstract values and the abstract-evaluation rules
families share, dtype kinds, and small helpers on shapes, axes and devices.

Nothing here binds an op by name, so every op file can import it (``ops.base`` holds the ops that the
shared rules need: ``unbroadcast``, ``move_to_front``, ``broadcast_batch``, ...).

- ``elementwise_abstract`` (``ABSTRACT_SAME``, ``ABSTRACT_BOOL``, ``ABSTRACT_REAL``): element-wise ops
  broadcast their inputs;
- ``shape_abstract``: shape-only ops, from a function of the input shapes;
- ``creation_op``: ops with no array argument, run on the backend that owns their ``device``;
- ``unary_batch``: ops that act element by element on one array keep its batch dimension.
"""

import math

import polyad.dispatch as dispatch
from polyad.core import Op, Tensor, bind, fresh


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


def backend_kernel(path):
    """The generic kernel that calls the backend namespace function at ``path`` ("sin", "linalg.inv").

    It carries ``backend_path`` so ``Op.resolve`` can bind the backend function itself, with no wrapper.
    """
    parts = tuple(path.split("."))

    def kernel(xp, *args, **params):
        f = xp
        for part in parts:
            f = getattr(f, part)
        return f(*args, **params)

    kernel.backend_path = parts
    return kernel


def define(name, generic=None, **rules):
    """Register an op and return it. ``generic`` defaults to the backend function of the same name."""
    return Op(name, generic if generic is not None else backend_kernel(name), **rules)


def namespace_function(op, doc=None, name=None, arity=None):
    """A public function with positional arrays that binds ``op`` (carries the standard's name)."""

    def f(*args, **params):
        return bind(op, *args, **params)

    if arity == 1:  # the common shapes skip a level of argument packing

        def f(x, /):  # type: ignore[misc]
            return bind(op, x)

    elif arity == 2:

        def f(x1, x2, /):  # type: ignore[misc]
            return bind(op, x1, x2)

    f.__name__ = f.__qualname__ = name or op.name.split(".")[-1]
    f.__doc__ = doc
    f.op = op
    return f


# --------------------------------------------------------------------------------------------- dtypes


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


# --------------------------------------------------------------------------------------------- helpers


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


def unary_batch(op):
    return lambda info, dims, x, **params: (bind(op, x, **params), dims[0])


# --------------------------------------------------------------------------------------------- abstract rules


def _shape(a):
    return a.shape if hasattr(a, "shape") else ()


def _aval_device(avals):
    return next((a.device for a in avals if hasattr(a, "shape")), None)


def same_dtype(xp, *avals):
    if not any(hasattr(a, "shape") for a in avals):  # Python numbers only (``where(c, 1.0, 0.0)``): the
        # default dtype of the widest kind, as NumPy gives (array_api_strict's result_type needs an array)
        kinds = (bool, int, float, complex)
        widest = max((kinds.index(type(a)) for a in avals if type(a) in kinds), default=2)
        return (xp.bool, xp.int64, xp.float64, xp.complex128)[widest]
    return xp.result_type(*[a.dtype if hasattr(a, "shape") else a for a in avals])


def _dtype_bool(xp, *avals):
    return xp.bool


def real_dtype_rule(xp, *avals):
    d = avals[0].dtype
    if d == xp.complex128:
        return xp.float64
    if d == xp.complex64:
        return xp.float32
    return d


def elementwise_abstract(dtype_rule):
    """Abstract evaluation of an element-wise op: the broadcast shape, the dtype ``dtype_rule`` gives."""

    def rule(xp, *avals, **params):
        return ShapeDtype(broadcast_shape(*map(_shape, avals)), dtype_rule(xp, *avals), _aval_device(avals))

    return rule


ABSTRACT_SAME = elementwise_abstract(same_dtype)
ABSTRACT_BOOL = elementwise_abstract(_dtype_bool)
ABSTRACT_REAL = elementwise_abstract(real_dtype_rule)


def shape_abstract(fn):
    """Abstract evaluation of a shape-only op from a function of (input shapes, params) -> output shape."""

    def rule(xp, *avals, **params):
        a = avals[0]
        return ShapeDtype(fn(*[x.shape for x in avals], **params), a.dtype, a.device)

    return rule


# --------------------------------------------------------------------------------------------- creation


def creation_op(name, shape_rule):
    """An op with no array arguments, run on the backend that owns its ``device``."""

    def kernel(xp, *args, **params):
        try:
            return getattr(xp, name)(*args, **params)
        except (TypeError, ValueError, AttributeError):
            if params.get("dtype") is None:
                raise
            # another library's dtype (polyad.xp's on the default backend, for a device of another): by name
            return getattr(xp, name)(*args, **{**params, "dtype": same_named_dtype(xp, params["dtype"])})

    def abstract(xp, *args, dtype=None, device=None, **params):
        if dtype is None:
            dtype = _default_dtype(name, args, device)
        return ShapeDtype(shape_rule(*args, **params), dtype, device)

    # no array to read a backend from: the ``device`` parameter picks it
    return define(name, kernel, abstract_eval=abstract, nondiff=True, from_device=True)


def on_device(op, *args, **params):
    # inside a transform a new array is a FreshTensor, so that ``x[i] = traced`` can functionalise
    return fresh(bind(op, *args, **params))


def _default_dtype(name, args, device):
    """The dtype a creation function gives when ``dtype`` is None (for its abstract evaluation)."""
    backend = dispatch.backend_of_device(device)
    defaults = backend.compat.__array_namespace_info__().default_dtypes(device=device)
    if name == "full":
        values = [args[1]]
    elif name == "arange":
        values = [v for v in args if v is not None]
    elif name == "linspace":
        values = [0.0, *args[:2]]
    else:  # zeros, ones, empty, eye
        values = [0.0]
    if any(isinstance(v, complex) for v in values):
        return defaults["complex floating"]
    if any(isinstance(v, float) for v in values):
        return defaults["real floating"]
    if all(isinstance(v, bool) for v in values):
        return backend.xp.bool
    return defaults["integral"]


def shape_tuple(shape):
    return (shape,) if isinstance(shape, int) else tuple(shape)
