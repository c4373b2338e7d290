"""Creation functions of the standard. Their outputs carry no derivative, except ``asarray`` of a tensor
(the identity), ``tril``/``triu`` (linear), and ``full_like``/``*_like`` which depend only on shape.

Functions without an array argument create on the backend that owns ``device`` (the default backend when
``device`` is None); the ``*_like`` functions follow the library and device of their argument.
"""

from polyad import dispatch
from polyad.core import Tensor, bind, fresh
from polyad.ops.common import ShapeDtype, define, move_to_front


def _creator(name, shape_rule):
    """An op with no array arguments, run on the backend that owns its ``device``."""

    def kernel(xp, *args, **params):
        return getattr(xp, name)(*args, **params)

    def abstract(xp, *args, dtype=None, device=None, **params):
        if dtype is None:
            dtype = _default_dtype(name, args, device)
        return ShapeDtype(shape_rule(*args, **params), dtype, device)

    op = define(name, kernel, abstract_eval=abstract, nondiff=True)
    op.from_device = True  # no array to read a backend from: the ``device`` parameter picks it
    return op


def _on_device(op, *args, **params):
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


def _shape_tuple(shape):
    return (shape,) if isinstance(shape, int) else tuple(shape)


_zeros = _creator("zeros", lambda shape: _shape_tuple(shape))
_ones = _creator("ones", lambda shape: _shape_tuple(shape))
_empty = _creator("empty", lambda shape: _shape_tuple(shape))
_full = _creator("full", lambda shape, fill_value: _shape_tuple(shape))


def zeros(shape, *, dtype=None, device=None):
    """An array of zeros of ``shape``."""
    return _on_device(_zeros, shape, dtype=dtype, device=device)


def ones(shape, *, dtype=None, device=None):
    """An array of ones of ``shape``."""
    return _on_device(_ones, shape, dtype=dtype, device=device)


def empty(shape, *, dtype=None, device=None):
    """An uninitialised array of ``shape``."""
    return _on_device(_empty, shape, dtype=dtype, device=device)


def full(shape, fill_value, *, dtype=None, device=None):
    """An array of ``shape`` filled with ``fill_value``. A 0-d array or tensor ``fill_value`` is broadcast
    (on its own library), so the result is differentiable in it."""
    if _is_array(fill_value):
        from polyad.ops.manipulation import broadcast_to

        out = broadcast_to(astype_like(fill_value, dtype), _shape_tuple(shape))
        return out if device is None else to_device(out, device)
    return _on_device(_full, shape, fill_value, dtype=dtype, device=device)


def _is_array(x):
    return isinstance(x, Tensor) or dispatch.backend_of_array(x) is not None


def astype_like(x, dtype):
    if dtype is None:
        return x
    from polyad.ops.dtypes import astype

    return astype(x, dtype)


def _arange_len(start, stop=None, step=1):
    import math

    if stop is None:
        start, stop = 0, start
    return (max(0, math.ceil((stop - start) / step)),)


_arange = _creator("arange", _arange_len)
_linspace = _creator("linspace", lambda start, stop, num, endpoint=True: (num,))
_eye = _creator("eye", lambda n_rows, n_cols=None, k=0: (n_rows, n_rows if n_cols is None else n_cols))


def arange(start, /, stop=None, step=1, *, dtype=None, device=None):
    """Evenly spaced values in ``[start, stop)``."""
    return _on_device(_arange, start, stop, step, dtype=dtype, device=device)


def linspace(start, stop, /, num, *, dtype=None, device=None, endpoint=True):
    """``num`` evenly spaced values from ``start`` to ``stop``."""
    return _on_device(_linspace, start, stop, num, dtype=dtype, device=device, endpoint=endpoint)


def eye(n_rows, n_cols=None, /, *, k=0, dtype=None, device=None):
    """A 2-D array with ones on the ``k``-th diagonal."""
    return _on_device(_eye, n_rows, n_cols, k=k, dtype=dtype, device=device)


# ------------------------------------------------------------------------------ *_like


def _like(name, from_shape):
    """A ``*_like`` op; ``from_shape(xp, shape, dtype, **params)`` builds its output without its input
    (the ``shape_only`` marker, used where only the shape was recorded)."""

    def abstract(xp, x, *args, dtype=None, device=None, **params):
        return ShapeDtype(
            x.shape, dtype if dtype is not None else x.dtype, x.device if device is None else device
        )

    op = define(name, abstract_eval=abstract, nondiff=True)
    op.rules["batch"] = lambda info, dims, x, *args, **params: (bind(op, x, *args, **params), dims[0])
    op.shape_only = from_shape
    return op


_zeros_like = _like("zeros_like", lambda xp, shape, dtype, device=None: xp.zeros(shape, dtype=dtype))
_ones_like = _like("ones_like", lambda xp, shape, dtype, device=None: xp.ones(shape, dtype=dtype))
_empty_like = _like("empty_like", lambda xp, shape, dtype, device=None: xp.empty(shape, dtype=dtype))
_full_like = _like(
    "full_like",
    lambda xp, shape, dtype, fill_value, device=None: xp.full(shape, fill_value, dtype=dtype),
)


def _other_library(x, device):
    """The backend owning ``device`` when it is not ``x``'s library (a ``*_like`` then creates there)."""
    if device is None:
        return None
    own = dispatch.backend_of_array(_bottom(x))
    if own is None or dispatch.owns_device(own, device):
        return None
    return dispatch.owner_of_device(device)


def _like_elsewhere(backend, x, dtype, device, fill=None):
    dtype = dtype if dtype is not None else getattr(backend.xp, _dtype_name(x.dtype))
    if fill is None:
        return _on_device(_zeros, tuple(x.shape), dtype=dtype, device=device)
    return _on_device(_full, tuple(x.shape), fill, dtype=dtype, device=device)


def zeros_like(x, /, *, dtype=None, device=None):
    """Zeros with the shape of ``x``, on ``x``'s library and device and with its dtype unless given."""
    other = _other_library(x, device)
    if other is not None:
        return _like_elsewhere(other, x, dtype, device)
    return bind(_zeros_like, x, dtype=dtype, device=device)


def ones_like(x, /, *, dtype=None, device=None):
    """Ones with the shape of ``x``, on ``x``'s library and device and with its dtype unless given."""
    other = _other_library(x, device)
    if other is not None:
        return _like_elsewhere(other, x, dtype, device, fill=1)
    return bind(_ones_like, x, dtype=dtype, device=device)


def empty_like(x, /, *, dtype=None, device=None):
    """An uninitialised array with the shape of ``x``, on ``x``'s library and device and with its dtype
    unless given."""
    other = _other_library(x, device)
    if other is not None:
        return _like_elsewhere(other, x, dtype, device)
    return bind(_empty_like, x, dtype=dtype, device=device)


def full_like(x, /, fill_value, *, dtype=None, device=None):
    """``fill_value`` with the shape of ``x``, on ``x``'s library and device and with its dtype unless
    given. A 0-d array or tensor ``fill_value`` is broadcast, so the result is differentiable in it."""
    if _is_array(fill_value):
        from polyad.ops.manipulation import broadcast_to

        fill = astype_like(fill_value, dtype if dtype is not None else x.dtype)
        out = broadcast_to(fill, tuple(x.shape))
        return out if device is None else to_device(out, device)
    other = _other_library(x, device)
    if other is not None:
        return _like_elsewhere(other, x, dtype, device, fill=fill_value)
    return bind(_full_like, x, fill_value=fill_value, dtype=dtype, device=device)


# ------------------------------------------------------------------------------ asarray


def asarray(obj, /, *, dtype=None, device=None, copy=None):
    """Convert ``obj`` to an array.

    A tensor stays a tensor: moved to ``device``, cast to ``dtype`` and copied (``copy=True``) by
    differentiable ops. A (nested) list holding tensors is stacked, so ``asarray([x0, x1])`` of traced
    scalars is differentiable. Anything else is converted by the library of ``obj`` when it is an array,
    else by the backend owning ``device`` (the default backend when None).
    """
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
        if copy and x is obj:
            return bind(_copy, x)
        return x
    if isinstance(obj, list | tuple) and _contains_tensor(obj):
        from polyad.ops.manipulation import stack

        return astype_like(stack([asarray(o, device=device) for o in obj]), dtype)
    backend = dispatch.backend_of_array(obj) if device is None else dispatch.owner_of_device(device)
    if backend is None:
        backend = dispatch.backend_of_device(device)
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
        if isinstance(o, Tensor) or (isinstance(o, list | tuple) and _contains_tensor(o)):
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
    return bind(_tril, x, k=k)


def triu(x, /, *, k=0):
    """The upper triangle of ``x`` (last two axes) on and above diagonal ``k``."""
    return bind(_triu, x, k=k)


# ------------------------------------------------------------------------------ to_device, from_dlpack


def _same_device(a, b):
    try:
        return bool(a == b)
    except Exception:
        return False


def _dtype_name(dtype):
    return str(dtype).rsplit(".", 1)[-1]


def _bottom(x):
    while isinstance(x, Tensor):
        x = x._value
    return x


def _to_device_kernel(xp, x, *, device, stream=None):
    source = dispatch.backend_of_array(x)
    if source is None or dispatch.owns_device(source, device):
        import array_api_compat

        if stream is None:
            return array_api_compat.to_device(x, device)
        return array_api_compat.to_device(x, device, stream=stream)
    target = dispatch.owner_of_device(device) or dispatch.backend_of_device(device)
    try:
        return target.xp.from_dlpack(x, device=device, copy=True)
    except Exception:  # a library without DLPack import across devices: convert
        return target.xp.asarray(x, device=device)


def _to_device_abstract(xp, x, *, device, stream=None):
    dtype = x.dtype
    target = dispatch.owner_of_device(device)
    if target is not None and not _owns_dtype(target, dtype):
        dtype = getattr(target.xp, _dtype_name(dtype))
    return ShapeDtype(x.shape, dtype, device)


def _owns_dtype(backend, dtype):
    from polyad.ops.dtypes import _owns_dtype as owns

    return owns(backend, dtype)


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
    return fresh(backend.xp.from_dlpack(x, **kwargs))
