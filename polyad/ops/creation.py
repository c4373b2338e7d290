"""Creation functions of the standard. Their outputs carry no derivative, except ``asarray`` of a tensor
(the identity), ``tril``/``triu`` (linear), and ``full_like``/``*like_op`` which depend only on shape.

Functions without an array argument create on the backend that owns ``device`` (the default backend when
``device`` is None); the ``*like_op`` functions follow the library and device of their argument.

``zeros``, ``arange``, ``zeros_like`` and ``ones_like`` live in ``ops.base`` (the transforms and the rules
of the base ops need them); they are importable from here.
"""

import math

import array_api_compat

import polyad.core.dispatch as dispatch
from polyad.core import Tensor, bind, fresh
from polyad.core.avals import (
    ShapeDtype,
    bottom,
    device_of,
    dtype_name,
    is_floating,
    ndim_of,
    same_named_dtype,
    shape_of,
    shape_tuple,
)
from polyad.core.tensor import reconnect
from polyad.ops.base import astype, broadcast_to, move_to_front, reshape, stack, unbroadcast, where
from polyad.ops.common import creation_op, define, on_device
from polyad.ops.dtypes import owns_dtype
from polyad.ops.fills import arange as _arange_values
from polyad.ops.fills import full_op, like_elsewhere, like_op, other_library
from polyad.ops.fills import ones_like as ones_like
from polyad.ops.fills import zeros as zeros
from polyad.ops.fills import zeros_like as zeros_like

_ones = creation_op("ones", lambda shape: shape_tuple(shape))
_empty = creation_op("empty", lambda shape: shape_tuple(shape))


def ones(shape, *, dtype=None, device=None):
    """An array of ones of ``shape``."""
    return on_device(_ones, shape, dtype=dtype, device=device)


def empty(shape, *, dtype=None, device=None):
    """An uninitialised array of ``shape``."""
    return on_device(_empty, shape, dtype=dtype, device=device)


def full(shape, fill_value, *, dtype=None, device=None):
    """An array of ``shape`` filled with ``fill_value``. A 0-d array or tensor ``fill_value`` is broadcast
    (on its own library), so the result is differentiable in it, as is a number taken from a traced value
    (``float(t)``)."""
    fill_value = reconnect(fill_value)
    if _is_array(fill_value):
        out = broadcast_to(astype_like(fill_value, dtype), shape_tuple(shape))
        return out if device is None else to_device(out, device)
    return on_device(full_op, shape, fill_value, dtype=dtype, device=device)


def _is_array(x):
    return isinstance(x, Tensor) or dispatch.backend_of_array(x) is not None


def astype_like(x, dtype):
    if dtype is None:
        return x
    return astype(x, dtype)


_linspace = creation_op("linspace", lambda start, stop, num, endpoint=True: (num,))
_eye = creation_op("eye", lambda n_rows, n_cols=None, k=0: (n_rows, n_rows if n_cols is None else n_cols))


def linspace(start, stop, /, num, *, dtype=None, device=None, endpoint=True):
    """``num`` evenly spaced values from ``start`` to ``stop``. A tensor ``start`` or ``stop`` (of any
    shape; the values then run along a new first axis) makes the result differentiable in it."""
    if _traced(start, stop):
        div = (num - 1) if endpoint else num
        start, stop = _floating(start), _floating(stop)
        i = _steps(num, start, stop)
        if div > 0:
            out = i * ((stop - start) / div) + start  # the backends' order of operations
            if endpoint and num > 1:  # the last value is exactly stop
                out = where(i == num - 1, stop + 0 * start, out)
        else:  # every value is start; stop still sets the shape and the transform (a zero derivative)
            out = where(i >= 0, i * 0 + start, stop)
        return _finish(out, dtype, device)
    return on_device(_linspace, start, stop, num, dtype=dtype, device=device, endpoint=endpoint)


def arange(start, /, stop=None, step=1, *, dtype=None, device=None):
    """Evenly spaced values in ``[start, stop)``. A tensor ``start`` or ``step`` makes the values
    differentiable in it (the length is read from the values, as a constant)."""
    tensors = [v for v in (start, stop, step) if isinstance(v, Tensor)]
    if tensors:  # the bounds read to the host on purpose (the length depends on them: a device's 0-d
        # arrays cannot be handed to its library's arange), the values made on the tensors' device
        device = device if device is not None else tensors[0].device
        bounds = [_host_number(v) if isinstance(v, Tensor) else v for v in (start, stop, step)]
        out = _arange_values(*bounds, dtype=dtype, device=device)
    else:
        out = _arange_values(start, stop, step, dtype=dtype, device=device)
    if not _traced(start, stop, step):
        return out
    if stop is None:
        start = 0.0
    i = astype(_arange_values(shape_of(out)[0], device=device_of(out)), _result_dtype(start, stop, step))
    return _finish(i * _floating(step) + _floating(start), dtype, device)


def _host_number(t):
    """A 0-d tensor's value as a Python number, through its backend's host copy (no derivative: the
    values are recomputed from the tensor where they carry one)."""
    array = bottom(t)
    backend = dispatch.backend_of_array(array)
    if backend is None or math.prod(array.shape) != 1:  # no value (pa.jit) or a batch (vmap): as given
        return t
    return backend.to_numpy(array).item()


def _traced(*values):
    """Whether a polyad tensor of a floating dtype is among ``values`` (creation is then differentiable)."""
    return any(isinstance(v, Tensor) and is_floating(v) for v in values)


def _floating(v):
    """A tensor as it is; a Python number or array as a tensor-compatible constant (floats only)."""
    return v if isinstance(v, Tensor) or not isinstance(v, int) or isinstance(v, bool) else float(v)


def _result_dtype(*values):
    """The dtype of the first floating tensor among ``values`` (the one the values are computed in)."""
    return next(v.dtype for v in values if isinstance(v, Tensor) and is_floating(v))


def _steps(n, *values):
    """The step counts ``0, 1, ..., n - 1`` in the floating dtype of ``values``, shaped to broadcast
    against their shapes along a new first axis."""
    ndim = max(len(shape_of(v)) for v in values)
    i = astype(_arange_values(n, device=device_of(values[0])), _result_dtype(*values))
    return reshape(i, (n,) + (1,) * ndim) if ndim else i


def _finish(out, dtype, device):
    out = astype_like(out, dtype)
    return out if device is None else to_device(out, device)


def eye(n_rows, n_cols=None, /, *, k=0, dtype=None, device=None):
    """A 2-D array with ones on the ``k``-th diagonal."""
    return on_device(_eye, n_rows, n_cols, k=k, dtype=dtype, device=device)


# ------------------------------------------------------------------------------ *like_op


_empty_like = like_op(
    "empty_like", lambda xp, shape, dtype, device=None: xp.empty(shape, dtype=dtype, device=device)
)
_full_like = like_op(
    "full_like",
    lambda xp, shape, dtype, fill_value, device=None: xp.full(shape, fill_value, dtype=dtype, device=device),
)


def empty_like(x, /, *, dtype=None, device=None):
    """An uninitialised array with the shape of ``x``, on ``x``'s library and device and with its dtype
    unless given."""
    other = other_library(x, device)
    if other is not None:
        return like_elsewhere(other, x, dtype, device)
    return bind(_empty_like, x, dtype=dtype, device=device)


def _full_like_array_batch(info, dims, x, fill):
    dx, df = dims
    shape = shape_of(x) if dx is None else shape_of(x)[:dx] + shape_of(x)[dx + 1 :]
    if df is not None:
        fill = move_to_front(fill, df)
        fill = reshape(
            fill, shape_of(fill)[:1] + (1,) * (len(shape) - ndim_of(fill) + 1) + shape_of(fill)[1:]
        )
    return broadcast_to(fill, (info.batch_size, *shape)), 0


# ``full_like`` with an array ``fill``: differentiable in ``fill``, a tensor of ``x``'s transforms too
_full_like_array = define(
    "full_like_array",
    lambda xp, x, fill: xp.broadcast_to(fill, x.shape),
    abstract_eval=lambda xp, x, fill: ShapeDtype(x.shape, fill.dtype, fill.device),
    vjp=lambda g, y, x, fill: (None, lambda: unbroadcast(g, fill)),
    linear=(1,),
    batch=_full_like_array_batch,
)


def full_like(x, /, fill_value, *, dtype=None, device=None):
    """``fill_value`` with the shape of ``x``, on ``x``'s library and device and with its dtype unless
    given. A 0-d array or tensor ``fill_value`` is broadcast, so the result is differentiable in it (a
    number taken from a traced value, ``float(t)``, too)."""
    fill_value = reconnect(fill_value)
    if _is_array(fill_value):
        fill = astype_like(fill_value, dtype if dtype is not None else x.dtype)
        out = bind(_full_like_array, x, fill)
        return out if device is None else to_device(out, device)
    other = other_library(x, device)
    if other is not None:
        return like_elsewhere(other, x, dtype, device, fill=fill_value)
    return bind(_full_like, x, fill_value=fill_value, dtype=dtype, device=device)


# ------------------------------------------------------------------------------ asarray


def asarray(obj, /, *, dtype=None, device=None, copy=None):
    """Convert ``obj`` to an array.

    A tensor stays a tensor: moved to ``device``, cast to ``dtype`` and copied (``copy=True``) by
    differentiable ops. A (nested) list holding tensors is stacked, so ``asarray([x0, x1])`` of traced
    scalars is differentiable; a number taken from a traced value (``float(t)``, ``t.item()``,
    ``t.tolist()``) is its tensor again. Anything else is converted by the library of ``obj`` when it is an
    array, else by the backend owning ``device`` (the default backend when None).
    """
    obj = reconnect(obj)
    if isinstance(obj, Tensor):
        x = obj
        if device is not None and not _same_device(x.device, device):
            if copy is False:
                raise ValueError("asarray(copy=False) of a tensor on another device needs a copy")
            x = to_device(x, device)
        if dtype is not None and dtype != x.dtype:
            if copy is False:
                raise ValueError(f"asarray(copy=False) cannot cast {x.dtype} to {dtype} without a copy")
            return astype_like(x, dtype)
        if (copy or getattr(x, "weakly_typed", False)) and x is obj:
            # a copy; of a traced Python float (pa.jit), an array like eager asarray's, no longer weak
            return bind(_copy, x)
        return x
    if isinstance(obj, list | tuple) and _contains_tensor(obj):
        return astype_like(stack([asarray(o, device=device) for o in obj]), dtype)
    backend = dispatch.backend_of_array(obj) if device is None else dispatch.owner_of_device(device)
    if backend is None:
        backend = dispatch.backend_of_device(device)
    if dtype is not None and not owns_dtype(backend, dtype):  # polyad.xp's dtype, for another library
        dtype = same_named_dtype(backend.xp, dtype)
    kwargs = {"dtype": dtype, "copy": copy}
    if device is not None:
        kwargs["device"] = device
    return fresh(backend.xp.asarray(obj, **kwargs))


_copy = define(
    "asarray_copy",
    lambda xp, x: xp.asarray(x, copy=True),
    abstract_eval=lambda xp, x: ShapeDtype(x.shape, x.dtype, x.device),
    vjp=lambda g, y, x: (g,),
    linear=True,
    batch=lambda info, dims, x: (bind(_copy, x), dims[0]),
)


def _contains_tensor(obj):
    for o in obj:
        if (
            isinstance(o, Tensor)
            or reconnect(o) is not o
            or (isinstance(o, list | tuple) and _contains_tensor(o))
        ):
            return True
    return False


# ------------------------------------------------------------------------------ tril / triu (linear)


def _tri(name):
    def batch(info, dims, x, k=0):
        return bind(op, move_to_front(x, dims[0]), k=k), 0

    op = define(
        name,
        abstract_eval=lambda xp, x, k=0: ShapeDtype(x.shape, x.dtype, x.device),
        vjp=lambda g, y, x, k=0: (bind(op, g, k=k),),
        linear=True,
        batch=batch,
    )
    return op


_tril = _tri("tril")
_triu = _tri("triu")


def tril(x, /, *, k=0):
    """The lower triangle of ``x`` (last two axes) on and below diagonal ``k``."""
    return bind(_tril, _matrices("tril", x), k=k)


def triu(x, /, *, k=0):
    """The upper triangle of ``x`` (last two axes) on and above diagonal ``k``."""
    return bind(_triu, _matrices("triu", x), k=k)


def _matrices(name, x):
    # the standard's rule (NumPy would read a 1-D x as a matrix of repeated rows)
    if len(shape_of(x)) < 2:
        raise ValueError(f"{name}: x must have at least 2 dimensions, got shape {tuple(shape_of(x))}")
    return x


# ------------------------------------------------------------------------------ to_device, from_dlpack


def _same_device(a, b):
    try:
        return bool(a == b)
    except Exception:
        return False


def _to_device_kernel(xp, x, *, device, stream=None):
    source = dispatch.backend_of_array(x)
    if source is None or dispatch.owns_device(source, device):
        if stream is None:
            return array_api_compat.to_device(x, device)
        return array_api_compat.to_device(x, device, stream=stream)
    target = dispatch.owner_of_device(device) or dispatch.backend_of_device(device)
    try:
        return target.xp.from_dlpack(x, device=device, copy=True)
    except Exception:  # no DLPack import across these devices (CuPy exports to its own): through the host
        return target.xp.asarray(source.to_numpy(x), device=device)


def _to_device_abstract(xp, x, *, device, stream=None):
    dtype = x.dtype
    target = dispatch.owner_of_device(device)
    if target is not None and not owns_dtype(target, dtype):
        dtype = getattr(target.xp, dtype_name(dtype))
    return ShapeDtype(x.shape, dtype, device)


_to_device = define(
    "to_device",
    _to_device_kernel,
    abstract_eval=_to_device_abstract,
    # the cotangent goes back to where the input lives
    vjp=lambda g, y, x, *, device, stream=None: (to_device(g, x.device),),
    linear=True,
    batch=lambda info, dims, x, **params: (bind(_to_device, x, **params), dims[0]),
)


def to_device(x, device, /, *, stream=None):
    """``x`` on ``device`` (of its own library, or of another backend's: then converted through DLPack);
    differentiable, the cotangent moves back. ``Tensor.to_device`` calls this."""
    if device is None or _same_device(getattr(x, "device", None), device):
        return x
    return bind(_to_device, x, device=device, stream=stream)


def from_dlpack(x, /, *, device=None, copy=None):
    """An array of this library from an object with ``__dlpack__``. A tensor stays a tensor (moved or
    copied by differentiable ops, as ``asarray``); a raw array is imported by its own library, or by
    the backend owning ``device`` when given."""
    if isinstance(x, Tensor):
        return asarray(x, device=device, copy=copy)
    if not hasattr(x, "__dlpack__") and dispatch.backend_of_array(x) is not None:
        return asarray(x, device=device, copy=copy)  # a NumPy scalar (np.float64) has no __dlpack__
    backend = None
    if device is not None:
        backend = dispatch.owner_of_device(device)
    if backend is None:
        backend = dispatch.backend_of_array(x) or dispatch.backend_of_device(device)
    kwargs = {}
    if device is not None:
        kwargs["device"] = device
    if copy is not None:
        kwargs["copy"] = copy
    try:
        return fresh(backend.xp.from_dlpack(x, **kwargs))
    except BufferError:  # CuPy copies by DLPack only to the host: import, then copy in the library
        if not copy:
            raise
        kwargs.pop("copy")
        return fresh(backend.xp.asarray(backend.xp.from_dlpack(x, **kwargs), copy=True))
