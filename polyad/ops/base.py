"""The base ops: the ones the transform interpreters and the rules shared by every family are made of
(JAX's ``ad_util`` plays this role), closed under their own rules.

- The transforms: ``add`` (reverse mode's accumulated cotangents), ``stack`` and ``take_index`` (vmap's
  loop over examples).
- The shared rules: ``unbroadcast`` (``sum``, ``real``, ``reshape``), ``move_to_front`` (``moveaxis``),
  ``broadcast_batch_args`` and ``broadcast_batch`` (``reshape``), ``conj_if_complex`` (the complex
  convention), and the reduction rules that come with ``sum``.
- The ops the rules of these ops call, so that the file is closed: ``broadcast_to`` and ``sum`` are each
  other's transpose, as are ``stack`` and ``unstack``; ``astype``, ``conj``, ``real``, ``where`` and
  ``expand_dims`` serve their rules. ``permute_dims`` is here for ``indexing``'s rules (``manipulation``
  comes after ``indexing``: ``repeat``'s VJP scatters).

This file imports only the core, ``ops.common``, ``ops.fills`` and ``ops.known_ones``; every family builds
on it and re-exports the ops of its own that live here, so ``polyad.ops.manipulation.reshape`` is this
file's ``reshape``.
"""

from polyad.core import bind
from polyad.core.avals import (
    ShapeDtype,
    device_of,
    dtype_kind,
    is_complex,
    is_floating,
    ndim_of,
    normalize_axis,
    same_named_dtype,
    shape_of,
)
from polyad.ops.common import (
    ABSTRACT_REAL,
    ABSTRACT_SAME,
    define,
    elementwise_abstract,
    namespace_function,
    same_dtype,
    shape_abstract,
    unary_batch,
)
from polyad.ops.fills import arange
from polyad.ops.known_ones import KnownOnes, passes_ones, with_ones_rule

# ------------------------------------------------------------------------------ rules shared by families


def unbroadcast(g, x):
    """Sum cotangent ``g`` down to the shape of ``x`` (which was broadcast against other inputs)."""
    xd = getattr(x, "dtype", None)
    if xd is g.dtype and g.shape == x.shape:  # nothing to do: the common case, kept cheap
        return g
    xs = shape_of(x)
    if xd is not None and xd is not g.dtype:
        g = real_part_for(g, x)
    gs = g.shape
    if tuple(gs) == xs:
        return g
    lead = len(gs) - len(xs)
    axes = tuple(range(lead)) + tuple(i + lead for i, s in enumerate(xs) if s == 1 and gs[i + lead] != 1)
    out = sum(g, axis=axes, keepdims=True) if axes else g
    if lead:
        out = reshape(out, xs)
    return out


def real_part_for(g, x):
    """Cotangent ``g`` of input ``x``: its real part when ``x`` is real and ``g`` complex (a real input of
    an op with a complex output, as in ``real * complex``: the complex convention of elementwise.py)."""
    if dtype_kind(g.dtype) == "c" and hasattr(x, "dtype") and dtype_kind(x.dtype) != "c":
        return real(g)
    return g


def move_to_front(v, d):
    """Value ``v`` with its batch dimension ``d`` moved to axis 0 (no-op when already there)."""
    if d == 0:
        return v
    return moveaxis(v, d, 0)


def broadcast_batch_args(dims, values):
    """Move every batch dimension to the front and pad batched values so ranks align for broadcasting."""
    rank = max(ndim_of(v) - (d is not None) for v, d in zip(values, dims))
    out = []
    for v, d in zip(values, dims):
        if d is None:
            out.append(v)
            continue
        v = move_to_front(v, d)
        r = ndim_of(v) - 1
        if r < rank:
            s = shape_of(v)
            v = reshape(v, (s[0],) + (1,) * (rank - r) + s[1:])
        out.append(v)
    return out


def broadcast_batch(op):
    """Batching rule of an n-ary broadcasting op."""

    def rule(info, dims, *values, **params):
        return bind(op, *broadcast_batch_args(dims, values), **params), 0

    return rule


def batch_all_front(dims, values):
    """Every value with its batch dimension at 0; unbatched ones broadcast along a new batch axis."""
    size = next(v.shape[d] for v, d in zip(values, dims) if d is not None)
    out = []
    for v, d in zip(values, dims):
        if d is None:
            out.append(broadcast_to(expand_dims(v, axis=0), (size, *shape_of(v))))
        else:
            out.append(move_to_front(v, d))
    return out


# ------------------------------------------------------------------------------ the complex convention


def conj_if_complex(x):
    """``conj(x)`` for a complex array or a Python complex, else ``x`` itself: the factor of the complex
    convention ``g * conj(f'(x))`` (a real factor, the common case, is not touched)."""
    if isinstance(x, complex):
        return x.conjugate()
    return conj(x) if hasattr(x, "dtype") and is_complex(x) else x


def broadcast_to_out(t, y):
    """Tangent ``t`` broadcast to the shape of the output ``y`` (a tangent of a broadcast input)."""
    return t if tuple(t.shape) == tuple(y.shape) else broadcast_to(t, tuple(y.shape))


# ------------------------------------------------------------------------------ conj, real, add, where

_conj = define("conj", abstract_eval=ABSTRACT_SAME, vjp=lambda g, y, x: (conj(g),), linear=True)
_conj.register_rule("batch", unary_batch(_conj))
conj = namespace_function(_conj, arity=1)
_real = define("real", abstract_eval=ABSTRACT_REAL, vjp=lambda g, y, x: (complex_like(g, x),), linear=True)
_real.register_rule("batch", unary_batch(_real))
real = namespace_function(_real, arity=1)


def complex_like(g, x):
    # real/imag of a complex input: the cotangent goes back as a complex array
    return g * (1 + 0j) if is_complex(x) else g


def _add_jvp(ts, y, a, b):
    ta, tb = ts
    if tb is None:
        return broadcast_to_out(ta, y)
    if ta is None:
        return broadcast_to_out(tb, y)
    return ta + tb


_add = define(
    "add",
    abstract_eval=ABSTRACT_SAME,
    deferrable=True,
    vjp=with_ones_rule(
        lambda g, y, a, b: (lambda: unbroadcast(g, a), lambda: unbroadcast(g, b)),
        lambda g, y, a, b: (
            lambda: passes_ones(unbroadcast(g, a), g),
            lambda: passes_ones(unbroadcast(g, b), g),
        ),
    ),
    jvp=_add_jvp,
)
_add.register_rule("batch", broadcast_batch(_add))
add = namespace_function(_add, arity=2)


def _where_vjp(g, y, c, a, b):
    return (
        None,
        lambda: unbroadcast(where(c, g, 0.0), a),
        lambda: unbroadcast(where(c, 0.0, g), b),
    )


def _where_jvp(ts, y, c, a, b):
    _, ta, tb = ts
    ta = 0.0 if ta is None else ta
    tb = 0.0 if tb is None else tb
    return broadcast_to_out(where(c, ta, tb), y)


def _where_kernel(xp, c, a, b):
    if not hasattr(a, "shape") and not hasattr(b, "shape"):
        a = xp.asarray(a, device=c.device)  # the standard allows at most one scalar
    return xp.where(c, a, b)


_where_op = define(
    "where",
    _where_kernel,
    abstract_eval=elementwise_abstract(lambda xp, c, a, b: same_dtype(xp, a, b)),
    vjp=_where_vjp,
    jvp=_where_jvp,
)
_where_op.register_rule("batch", broadcast_batch(_where_op))


def where(condition, x1, x2, /):
    """Elements of ``x1`` where ``condition`` is true, else of ``x2`` (broadcasting)."""
    return bind(_where_op, condition, x1, x2)


where.op = _where_op

# ------------------------------------------------------------------------------ reshape, permute_dims


def _reshape_shape(s, shape, copy=None):
    shape = tuple(shape)
    n = 1
    for d in s:
        n *= d
    if -1 in shape:
        known = 1
        for d in shape:
            if d != -1:
                known *= d
        shape = tuple((n // known if known else 0) if d == -1 else d for d in shape)
    return shape


def _reshape_batch(info, dims, x, shape, copy=None):
    x = move_to_front(x, dims[0])
    return reshape(x, (x.shape[0], *shape)), 0


_reshape = define(
    "reshape",
    abstract_eval=shape_abstract(_reshape_shape),
    vjp=lambda g, y, x, shape, copy=None: (reshape(g, shape_of(x)),),
    linear=True,
    batch=_reshape_batch,
)


def reshape(x, /, shape, *, copy=None):
    """Reshape ``x`` to ``shape`` (one entry may be -1)."""
    return bind(_reshape, x, shape=tuple(shape), copy=copy)


reshape.op = _reshape


def inverse_permutation(perm):
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def _permute_batch(info, dims, x, axes):
    x = move_to_front(x, dims[0])
    n = len(axes)
    return permute_dims(x, (0, *(normalize_axis(a, n) + 1 for a in axes))), 0


_permute_dims = define(
    "permute_dims",
    abstract_eval=shape_abstract(lambda s, axes: tuple(s[a] for a in axes)),
    vjp=lambda g, y, x, axes: (
        permute_dims(g, inverse_permutation([normalize_axis(a, len(axes)) for a in axes])),
    ),
    linear=True,
    batch=_permute_batch,
)


def permute_dims(x, /, axes):
    """Permute the axes of ``x``."""
    return bind(_permute_dims, x, axes=tuple(axes))


permute_dims.op = _permute_dims

# ------------------------------------------------------------------------------ moveaxis


def as_tuple(a):
    return tuple(a) if isinstance(a, tuple | list) else (a,)


def _moveaxis_shape(s, source, destination):
    n = len(s)
    src = [normalize_axis(a, n) for a in as_tuple(source)]
    dst = [normalize_axis(a, n) for a in as_tuple(destination)]
    order = [i for i in range(n) if i not in src]
    for d, sidx in sorted(zip(dst, src)):
        order.insert(d, sidx)
    return order


def _moveaxis_batch(info, dims, x, source, destination):
    x = move_to_front(x, dims[0])
    n = ndim_of(x) - 1
    src = tuple(normalize_axis(a, n) + 1 for a in as_tuple(source))
    dst = tuple(normalize_axis(a, n) + 1 for a in as_tuple(destination))
    return moveaxis(x, src, dst), 0


_moveaxis = define(
    "moveaxis",
    lambda xp, x, *, source, destination: xp.moveaxis(x, source, destination),
    abstract_eval=shape_abstract(
        lambda s, source, destination: tuple(s[i] for i in _moveaxis_shape(s, source, destination))
    ),
    vjp=lambda g, y, x, source, destination: (moveaxis(g, destination, source),),
    linear=True,
    batch=_moveaxis_batch,
)


def moveaxis(x, source, destination, /):
    """Move axes ``source`` of ``x`` to positions ``destination``."""
    if isinstance(source, list):
        source = tuple(source)
    if isinstance(destination, list):
        destination = tuple(destination)
    return bind(_moveaxis, x, source=source, destination=destination)


moveaxis.op = _moveaxis

# ------------------------------------------------------------------------------ expand_dims, broadcast_to


def _expand_positions(axis, ndim):
    """The new axes' positions in the result (``axis``: one, or a tuple as in the 2025.12 standard)."""
    axes = axis if isinstance(axis, tuple) else (axis,)
    out = {normalize_axis(a, ndim + len(axes)) for a in axes}
    if len(out) != len(axes):
        raise ValueError(f"expand_dims: axis {axis} repeats a position")
    return out


def _expand_shape(s, axis=0):
    new, rest = _expand_positions(axis, len(s)), iter(s)
    return tuple(1 if i in new else next(rest) for i in range(len(s) + len(new)))


def _expand_batch(info, dims, x, axis=0):
    x = move_to_front(x, dims[0])
    new = tuple(sorted(a + 1 for a in _expand_positions(axis, ndim_of(x) - 1)))
    return expand_dims(x, axis=new if isinstance(axis, tuple) else new[0]), 0


_expand_dims = define(
    "expand_dims",
    abstract_eval=shape_abstract(_expand_shape),
    vjp=lambda g, y, x, axis=0: (reshape(g, shape_of(x)),),
    linear=True,
    batch=_expand_batch,
)


def expand_dims(x, /, axis=0):
    """Insert a size-1 axis at ``axis``, or one at each position of a tuple ``axis`` (2025.12)."""
    return bind(_expand_dims, x, axis=axis)


expand_dims.op = _expand_dims


def _broadcast_to_batch(info, dims, x, shape):
    x = move_to_front(x, dims[0])
    s = shape_of(x)
    pad = len(shape) - (len(s) - 1)
    if pad:
        x = reshape(x, (s[0],) + (1,) * pad + s[1:])
    return broadcast_to(x, (s[0], *shape)), 0


_broadcast_to = define(
    "broadcast_to",
    abstract_eval=shape_abstract(lambda s, shape: tuple(shape)),
    vjp=lambda g, y, x, shape: (unbroadcast(g, x),),
    linear=True,
    batch=_broadcast_to_batch,
)


def broadcast_to(x, /, shape):
    """Broadcast ``x`` to ``shape``."""
    return bind(_broadcast_to, x, shape=tuple(shape))


broadcast_to.op = _broadcast_to

# ------------------------------------------------------------------------------ sum, and the reduction rules


def reduced_axes(axis, ndim):
    """The reduced axes as a sorted tuple of non-negative ints."""
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, tuple | list) else (axis,)
    out = []
    for a in axes:
        if not -ndim <= a < max(ndim, 1):
            raise ValueError(f"axis {a} is out of bounds for an array of dimension {ndim}")
        out.append(a % ndim if ndim else 0)
    return tuple(sorted(out))


def reduction_shape(shape, axis=None, keepdims=False):
    axes = reduced_axes(axis, len(shape))
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def reduction_abstract(dtype_rule=None):
    def rule(xp, x, *, axis=None, keepdims=False, dtype=None, **params):
        out_dtype = dtype if dtype is not None else (dtype_rule(xp, x) if dtype_rule else x.dtype)
        return ShapeDtype(reduction_shape(x.shape, axis, keepdims), out_dtype, x.device)

    return rule


def reduction_batch(op):
    """Batching rule of a reduction: batch dimension to the front, reduced axes shifted past it."""

    def rule(info, dims, x, *, axis=None, **params):
        x = move_to_front(x, dims[0])
        n = ndim_of(x) - 1
        if n == 0 and axis is not None and axis != ():
            return NotImplemented  # what axis 0 of a 0-d array means differs by op and backend: loop
        axes = tuple(a + 1 for a in reduced_axes(axis, n))
        return bind(op, x, axis=axes, **params), 0

    return rule


def expand_reduced(g, x_shape, axis, keepdims):
    """Reshape a reduction's cotangent so it broadcasts against the input of shape ``x_shape``."""
    if keepdims:
        return g
    axes = reduced_axes(axis, len(x_shape))
    return reshape(g, tuple(1 if i in axes else d for i, d in enumerate(x_shape)))


def sum_dtype(xp, x):
    """The dtype of ``sum``/``prod``/``cumulative_*`` with ``dtype=None``: small integers and bool widen
    to the default integer (unsigned ones to the unsigned integer of its width), others are kept."""
    kind = dtype_kind(x.dtype)
    if kind in "fc":
        return x.dtype
    default = xp.__array_namespace_info__().default_dtypes()["integral"]
    bits = xp.iinfo(default).bits
    if kind == "b":
        return default
    if xp.iinfo(x.dtype).bits >= bits:
        return x.dtype
    if xp.iinfo(x.dtype).min == 0:
        return getattr(xp, f"uint{bits}")
    return default


def cast_to(v, like):
    """``v`` cast to the dtype of ``like`` when they differ (a ``dtype=`` argument widened the output)."""
    if v.dtype == like.dtype:
        return v
    return astype(v, like.dtype)


def axis_tuple(axis):
    return tuple(axis) if isinstance(axis, list) else axis


def _sum_vjp(g, y, x, *, axis=None, dtype=None, keepdims=False):
    return (cast_to(broadcast_to(expand_reduced(g, shape_of(x), axis, keepdims), shape_of(x)), x),)


def _sum_vjp_ones(g, y, x, **params):
    return (KnownOnes(_sum_vjp(g, y, x, **params)[0]),)  # a broadcast (or cast) of ones is all ones


_sum = define(
    "sum",
    abstract_eval=reduction_abstract(sum_dtype),
    deferrable=True,
    vjp=with_ones_rule(_sum_vjp, _sum_vjp_ones),
    linear=True,
)
_sum.register_rule("batch", reduction_batch(_sum))


def sum(x, /, *, axis=None, dtype=None, keepdims=False):
    """Sum of ``x`` over ``axis`` (all axes when None)."""
    return bind(_sum, x, axis=axis_tuple(axis), dtype=dtype, keepdims=keepdims)


sum.op = _sum

# ------------------------------------------------------------------------------ astype


def _astype_kernel(xp, x, *, dtype, copy=True, device=None):
    where = {} if device is None else {"device": device}
    try:
        return xp.astype(x, dtype, copy=copy, **where)
    except (TypeError, ValueError, AttributeError):  # another library's dtype (polyad.xp's on the default
        # backend, for array_api_strict's arrays): the dtype of that name
        return xp.astype(x, same_named_dtype(xp, dtype), copy=copy, **where)


def _astype_vjp(g, y, x, *, dtype, copy=True, device=None):
    if not (is_floating(x) and is_floating(y)):
        return (None,)
    if dtype_kind(y.dtype) == "c" and dtype_kind(x.dtype) != "c":
        g = real(g)  # the cotangent of a real input is the real part
    return (astype(g, x.dtype),)


def _astype_jvp(ts, y, x, *, dtype, copy=True, device=None):
    if ts[0] is None or not (is_floating(x) and is_floating(y)):
        return None
    return astype(ts[0], dtype)


_astype = define(
    "astype",
    _astype_kernel,
    abstract_eval=lambda xp, x, *, dtype, copy=True, device=None: ShapeDtype(
        x.shape, dtype, x.device if device is None else device
    ),
    vjp=_astype_vjp,
    jvp=_astype_jvp,
)
_astype.register_rule("batch", lambda info, dims, x, **params: (bind(_astype, x, **params), dims[0]))


def astype(x, dtype, /, *, copy=True, device=None):
    """``x`` cast to ``dtype``; differentiable between floating dtypes (real to complex included: the
    cotangent of a real input is the real part), constant into integers and bool."""
    return bind(_astype, x, dtype=dtype, copy=copy, device=device)


# ------------------------------------------------------------------------------ stack, unstack


def _stack_shape(s, n, axis):
    a = normalize_axis(axis, len(s) + 1)
    return tuple(s[:a]) + (n,) + tuple(s[a:])


def _stack_batch(info, dims, *arrays, axis=0):
    arrays = batch_all_front(dims, arrays)
    return stack(arrays, axis=normalize_axis(axis, ndim_of(arrays[0])) + 1), 0


_stack = define(
    "stack",
    lambda xp, *arrays, axis=0: xp.stack(arrays, axis=axis),
    abstract_eval=lambda xp, *avals, axis=0: ShapeDtype(
        _stack_shape(avals[0].shape, len(avals), axis),
        xp.result_type(*[a.dtype for a in avals]),
        avals[0].device,
    ),
    vjp=lambda g, y, *arrays, axis=0: tuple(map(real_part_for, unstack(g, axis=axis), arrays)),
    linear=True,
    batch=_stack_batch,
)


def stack(arrays, /, *, axis=0):
    """Join a sequence of same-shape arrays along a new axis ``axis``."""
    arrays = tuple(arrays)
    return bind(_stack, *arrays, axis=normalize_axis(axis, ndim_of(arrays[0]) + 1))


stack.op = _stack


def _unstack_abstract(xp, x, *, axis=0):
    s = tuple(x.shape)
    return tuple(ShapeDtype(s[:axis] + s[axis + 1 :], x.dtype, x.device) for _ in range(s[axis]))


def _unstack_batch(info, dims, x, *, axis=0):
    x = move_to_front(x, dims[0])
    out = unstack(x, axis=axis + 1)
    return out, (0,) * len(out)


_unstack = define(
    "unstack",
    lambda xp, x, *, axis=0: tuple(xp.unstack(x, axis=axis)),
    abstract_eval=_unstack_abstract,
    vjp=lambda g, ys, x, *, axis=0: (stack(g, axis=axis),),
    linear=True,
    batch=_unstack_batch,
    multiple_results=True,
)


def unstack(x, /, *, axis=0):
    """The slices of ``x`` along ``axis``, as a tuple (the inverse of ``stack``)."""
    return bind(_unstack, x, axis=normalize_axis(axis, ndim_of(x)))


unstack.op = _unstack

# ------------------------------------------------------------------------------ take_index (internal)


def _take_index_kernel(xp, x, index, axis):
    return x[(slice(None),) * axis + (index, ...)]


def _take_index_vjp(g, y, x, index, axis):
    n = shape_of(x)[axis]
    mask = reshape(arange(n, device=device_of(g)) == index, (n,) + (1,) * (ndim_of(x) - axis - 1))
    return (where(mask, expand_dims(g, axis=axis), 0.0),)


def _take_index_batch(info, dims, x, index, axis):
    d = dims[0]
    # the batch dimension moves past the removed axis or stays
    if d <= axis:
        return take_index(x, index, axis=axis + 1), d
    return take_index(x, index, axis=axis), d - 1


_take_index = define(
    "take_index",
    _take_index_kernel,
    abstract_eval=shape_abstract(lambda s, index, axis: s[:axis] + s[axis + 1 :]),
    vjp=_take_index_vjp,
    linear=(0,),
    batch=_take_index_batch,
)


def take_index(x, index, *, axis=0):
    """``x[..., index, ...]`` with the Python int ``index`` at non-negative ``axis`` (used by rules)."""
    return bind(_take_index, x, index=index, axis=normalize_axis(axis, ndim_of(x)))
