"""Data type functions of the standard: ``astype`` (an op) and the dtype queries (plain functions that
answer from the backend of their arguments, or the default backend)."""

from polyad import dispatch
from polyad.core import Tensor, bind
from polyad.ops.common import ShapeDtype, _bottom, define, is_floating


def _backend_for(*xs):
    arrays = []
    for x in xs:
        x = _bottom(x)
        if dispatch.backend_of_array(x) is not None:
            arrays.append(x)
    return dispatch.backend_of(arrays) if arrays else dispatch.default_backend()


def _dtype_arg(x):
    return x.dtype if isinstance(x, Tensor) else x


def _astype_kernel(xp, x, *, dtype, copy=True, device=None):
    if device is None:
        return xp.astype(x, dtype, copy=copy)
    return xp.astype(x, dtype, copy=copy, device=device)


def _astype_vjp(g, y, x, *, dtype, copy=True, device=None):
    return (astype(g, x.dtype) if is_floating(x) else None,)


def _astype_jvp(ts, y, x, *, dtype, copy=True, device=None):
    if not is_floating(y):
        return None
    return astype(ts[0], dtype)


_astype = define(
    "astype",
    _astype_kernel,
    abstract_eval=lambda xp, x, *, dtype, copy=True, device=None: ShapeDtype(x.shape, dtype, x.device),
    vjp=_astype_vjp,
    jvp=_astype_jvp,
)
_astype.batch = lambda dims, x, **params: (bind(_astype, x, **params), dims[0])


def astype(x, dtype, /, *, copy=True, device=None):
    """``x`` cast to ``dtype``; differentiable between floating dtypes, constant into integers and bool."""
    return bind(_astype, x, dtype=dtype, copy=copy, device=device)


def can_cast(from_, to, /):
    """Whether ``from_`` (a dtype or array) casts to ``to`` under the standard's promotion rules."""
    return _backend_for(from_).xp.can_cast(_dtype_arg(from_), to)


def finfo(type, /):
    """Machine limits of a floating dtype (or of an array's dtype)."""
    return _backend_for(type).xp.finfo(_dtype_arg(type))


def iinfo(type, /):
    """Machine limits of an integer dtype (or of an array's dtype)."""
    return _backend_for(type).xp.iinfo(_dtype_arg(type))


def isdtype(dtype, kind):
    """Whether ``dtype`` is of ``kind`` ("real floating", "integral", ... or a dtype or tuple of them)."""
    return (
        dispatch.default_backend().xp.isdtype(dtype, kind)
        if not _is_foreign(dtype)
        else (_backend_of_dtype(dtype).xp.isdtype(dtype, kind))
    )


def result_type(*arrays_and_dtypes):
    """The dtype the standard's promotion rules give for the arguments (arrays, dtypes, Python scalars)."""
    args = [_dtype_arg(a) for a in arrays_and_dtypes]
    backend = _backend_for(*arrays_and_dtypes)
    if all(not hasattr(a, "shape") for a in arrays_and_dtypes):
        backend = _backend_of_dtype(next((a for a in args if not isinstance(a, int | float | complex)), None))
    return backend.xp.result_type(*args)


def _is_foreign(dtype):
    return _backend_of_dtype(dtype) is not dispatch.default_backend()


def _backend_of_dtype(dtype):
    default = dispatch.default_backend()
    if dtype is None:
        return default
    for b in [default, *dispatch._LOADED.values()]:
        try:
            if any(dtype == d for d in b.compat.__array_namespace_info__().dtypes().values()):
                return b
        except TypeError:
            continue
    return default
