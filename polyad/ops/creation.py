"""Creation functions of the standard. Their outputs carry no derivative, except ``asarray`` of a tensor
(the identity), ``tril``/``triu`` (linear), and ``full_like``/``*_like`` which depend only on shape.

Functions without an array argument create on the backend that owns ``device`` (the default backend when
``device`` is None); the ``*_like`` functions follow the library and device of their argument.
"""

from polyad import dispatch
from polyad.core import Tensor, bind
from polyad.ops.common import ShapeDtype, define, move_to_front


def _creator(name, shape_rule):
    """An op with no array arguments, run on the backend that owns its ``device``."""

    def kernel(xp, *args, **params):
        return getattr(xp, name)(*args, **params)

    def abstract(xp, *args, dtype=None, device=None, **params):
        return ShapeDtype(shape_rule(*args, **params), dtype, device)

    op = define(name, kernel, abstract_eval=abstract, nondiff=True)
    op.from_device = True  # no array to read a backend from: the ``device`` parameter picks it
    return op


def _on_device(op, *args, **params):
    return bind(op, *args, **params)


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
    """An array of ``shape`` filled with ``fill_value``."""
    if isinstance(fill_value, Tensor):
        from polyad.ops.manipulation import broadcast_to

        return broadcast_to(astype_like(fill_value, dtype), _shape_tuple(shape))
    return _on_device(_full, shape, fill_value, dtype=dtype, device=device)


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


def _like(name):
    def abstract(xp, x, *args, dtype=None, device=None, **params):
        return ShapeDtype(x.shape, dtype if dtype is not None else x.dtype, x.device)

    op = define(name, abstract_eval=abstract, nondiff=True)
    op.batch = lambda dims, x, *args, **params: (bind(op, x, *args, **params), dims[0])
    return op


_zeros_like = _like("zeros_like")
_ones_like = _like("ones_like")
_empty_like = _like("empty_like")
_full_like = _like("full_like")


def zeros_like(x, /, *, dtype=None, device=None):
    """Zeros with the shape of ``x`` (and its dtype and device unless given)."""
    return bind(_zeros_like, x, dtype=dtype, device=device)


def ones_like(x, /, *, dtype=None, device=None):
    """Ones with the shape of ``x``."""
    return bind(_ones_like, x, dtype=dtype, device=device)


def empty_like(x, /, *, dtype=None, device=None):
    """An uninitialised array with the shape of ``x``."""
    return bind(_empty_like, x, dtype=dtype, device=device)


def full_like(x, /, fill_value, *, dtype=None, device=None):
    """``fill_value`` with the shape of ``x``."""
    if isinstance(fill_value, Tensor):
        from polyad.ops.manipulation import broadcast_to

        return broadcast_to(astype_like(fill_value, dtype or x.dtype), tuple(x.shape))
    return bind(_full_like, x, fill_value=fill_value, dtype=dtype, device=device)


# ------------------------------------------------------------------------------ asarray


def asarray(obj, /, *, dtype=None, device=None, copy=None):
    """Convert ``obj`` to an array. A tensor stays a tensor (cast if ``dtype`` differs); a list of tensors
    is stacked, so ``asarray([x0, x1])`` of traced scalars is differentiable."""
    if isinstance(obj, Tensor):
        return astype_like(obj, dtype) if dtype is not None and dtype != obj.dtype else obj
    if isinstance(obj, list | tuple) and _contains_tensor(obj):
        from polyad.ops.manipulation import stack

        return astype_like(stack([asarray(o) for o in obj]), dtype)
    backend = dispatch.backend_of_array(obj) if device is None else None
    if backend is None:
        backend = dispatch.backend_of_device(device)
    kwargs = {"dtype": dtype, "copy": copy}
    if device is not None:
        kwargs["device"] = device
    return backend.xp.asarray(obj, **kwargs)


def _contains_tensor(obj):
    for o in obj:
        if isinstance(o, Tensor) or (isinstance(o, list | tuple) and _contains_tensor(o)):
            return True
    return False


# ------------------------------------------------------------------------------ tril / triu (linear)


def _tri(name):
    def batch(dims, x, k=0):
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
