"""NumPy's array methods and attributes on every polyad tensor: ``x.sum()``, ``u.copy()``, ``A.dot(v)``,
``x.reshape(2, 3)``, ``x.astype(np.float32)``, ``x.real``, ``x.sort()``... with NumPy's signatures and
semantics, each the NumPy function of the same name (polyad's implementation of it) or a composition of
ops, so every transform follows it.

The in-place methods (``sort``, ``fill``, ``put``, ``partition``) write through the tensor's own
``__setitem__`` (``x[...] = value``), the functionalised write every in-place update takes. The ndarray
attributes that describe memory (``strides``, ``flags``, ``ctypes``, ``view()``...) have no meaning for a
value inside a transform: reaching one raises an AttributeError that says what to use instead.
"""

import polyad.xp as pxp
from polyad.backends.host import np as host_np
from polyad.core.avals import dtype_name
from polyad.interop.numpy import indexing, linear, maths, shapes
from polyad.interop.numpy.common import (
    EXACT,
    FUNCTIONS,
    NONE_DISCRETE,
    NONE_METADATA,
    Entry,
    arr,
    as_dtype,
    dispatched_on,
)

METHODS: dict[str, Entry] = {}  # ndarray method or attribute name -> entry


def _method(name, impl, derivative=EXACT, how=""):
    METHODS[name] = Entry("ndarray." + name, impl, derivative, how or f"np.{name}")


def _shape_args(args):
    """``x.reshape(2, 3)`` and ``x.reshape((2, 3))`` alike (likewise ``transpose``)."""
    if len(args) == 1 and (args[0] is None or isinstance(args[0], tuple | list)):
        return args[0]
    return tuple(args)


def reshape(self, *shape, order="C", copy=None):
    return shapes.reshape(self, _shape_args(shape), order=order)


def transpose(self, *axes):
    axes = _shape_args(axes)
    return shapes.transpose(self, None if axes in ((), None) else axes)


def copy(self, order="C"):
    return pxp.asarray(self, copy=True)


def astype(self, dtype, order="K", casting="unsafe", subok=True, copy=True):
    dtype = as_dtype(dtype, self)
    return pxp.astype(self, dtype, copy=copy)


def flatten(self, order="C"):
    return pxp.asarray(shapes.ravel(self, order), copy=True)


def sort(self, axis=-1, kind=None, order=None, *, stable=None):
    self[...] = maths.sort(self, axis)


def partition(self, kth, axis=-1, kind="introselect", order=None):
    self[...] = maths.sort(self, axis)  # a sorted array is a valid partition


def fill(self, value):
    self[...] = value


def put(self, indices, values, mode="raise"):
    flat = pxp.reshape(self, (-1,))
    index = pxp.reshape(arr(indices), (-1,))
    n = flat.shape[0]
    if mode == "wrap":
        index = pxp.remainder(index, n)
    elif mode == "clip":
        index = pxp.clip(index, 0, n - 1)
    flat[index] = shapes.resize(arr(values), index.shape)
    self[...] = pxp.reshape(flat, self.shape)


def dot(self, b, out=None):
    return linear.dot(self, b, out)


def _real(self):
    return maths.real(self)


def _imag(self):
    return maths.imag(self)


def _itemsize(self):
    size = getattr(self.dtype, "itemsize", None)
    return size if size is not None else host_np.dtype(dtype_name(self.dtype)).itemsize


def _contains(self, value):
    return bool(pxp.any(self == value))


def _self_first(function):
    def method(self, *args, **kwargs):
        with dispatched_on(self):
            return function(self, *args, **kwargs)

    return method


# the methods that are NumPy's function of the same name with the array first
_SAME_AS_FUNCTION = {
    "sum": maths.sum_, "prod": maths.prod, "mean": maths.mean_, "std": maths.std, "var": maths.var,
    "min": maths.np_min, "max": maths.np_max, "cumsum": "cumsum", "cumprod": "cumprod", "clip": maths.clip,
    "round": maths.round_, "diagonal": shapes.diagonal, "trace": shapes.trace, "repeat": shapes.repeat,
    "take": indexing.take, "ravel": shapes.ravel, "squeeze": shapes.squeeze, "swapaxes": shapes.swapaxes,
    "compress": lambda self, condition, axis=None, out=None: indexing.compress(condition, self, axis, out),
}  # fmt: skip
_DISCRETE = {
    "argmin": "argmin", "argmax": "argmax", "any": "any", "all": "all", "nonzero": indexing.nonzero,
    "argsort": maths.argsort, "argpartition": maths.argpartition, "searchsorted": maths.searchsorted,
}  # fmt: skip


def _function(name_or_function):
    """A function of the table by its NumPy name, or the function itself."""
    if isinstance(name_or_function, str):
        return FUNCTIONS[("numpy", name_or_function)].impl
    return name_or_function


for _name, _f in _SAME_AS_FUNCTION.items():
    _method(_name, _self_first(_function(_f)))
for _name, _f in _DISCRETE.items():
    _method(_name, _self_first(_function(_f)), NONE_DISCRETE)
_OWN = {"reshape": reshape, "transpose": transpose, "copy": copy, "astype": astype, "flatten": flatten,
        "dot": dot, "conj": pxp.conj, "conjugate": pxp.conj}  # fmt: skip
_HOW = {"copy": "xp.asarray(copy=True)", "conj": "xp.conj", "conjugate": "xp.conj", "astype": "xp.astype"}
for _name, _f in _OWN.items():
    _method(_name, _f, how=_HOW.get(_name, ""))
for _name, _f in (("sort", sort), ("partition", partition), ("fill", fill), ("put", put)):
    _method(_name, _f, how="a functionalised write (x[...] = ...)")
_method("real", property(_real), how="xp.real (a real tensor itself)")
_method("imag", property(_imag), how="xp.imag (zeros for a real tensor)")
_method("itemsize", property(_itemsize), NONE_METADATA, how="the dtype's size")
_method("nbytes", property(lambda self: self.size * _itemsize(self)), NONE_METADATA, how="size * itemsize")
_method("__contains__", _contains, NONE_DISCRETE, how="bool(xp.any(x == value))")
for _name in ("shape", "dtype", "ndim", "size", "device"):
    METHODS[_name] = Entry("ndarray." + _name, None, NONE_METADATA, how="polyad.Tensor's own")
for _name in ("T", "mT", "item", "tolist"):
    METHODS[_name] = Entry("ndarray." + _name, None, EXACT, how="polyad.Tensor's own")

# ndarray attributes with no meaning for a value inside a transform: what to use instead
UNSUPPORTED = {
    "view": "a view reinterprets memory; use x.astype(dtype) for a conversion, or x itself",
    "flat": "use x.ravel() to read the elements in order, x.reshape(-1) to write through indices",
    "resize": "it resizes in place; use np.resize(x, shape), which returns the resized array",
    "strides": "a polyad value has no memory layout; its shape is x.shape",
    "flags": "a polyad value has no memory layout",
    "ctypes": "a polyad value has no memory to hand to C",
    "data": "a polyad value has no buffer; compute on it with NumPy or polyad functions",
    "base": "a polyad value owns no memory",
    "tobytes": "bytes cannot carry a derivative or a batch",
    "tofile": "writing a file drops the derivative or batch; write the result of the transform",
    "dump": "pickling drops the derivative or batch; save the result of the transform",
    "dumps": "pickling drops the derivative or batch; save the result of the transform",
    "byteswap": "a polyad value has no byte order",
    "newbyteorder": "a polyad value has no byte order",
    "setflags": "a polyad value has no memory flags",
    "getfield": "a polyad value has no fields",
    "setfield": "a polyad value has no fields",
    "itemset": "write with x[index] = value",
    "choose": "use np.select or np.where",
    "ptp": "NumPy 2 removed the method; use np.ptp(x)",
}


def missing_attribute(self, name):
    """``Tensor.__getattr__``: called only when an attribute is not found, to say what fits instead of a
    NumPy attribute a polyad tensor has not."""
    why = UNSUPPORTED.get(name) if not name.startswith("_") else None
    if why is None:
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
    raise AttributeError(
        f"'{type(self).__name__}' object has no attribute '{name}' (NumPy's ndarray.{name}): {why}"
    )


def tensor_methods():
    """The methods and properties ``Tensor`` gets: ``{name: function or property}``."""
    out = {name: entry.impl for name, entry in METHODS.items() if entry.impl is not None}
    out["__getattr__"] = missing_attribute
    return out
