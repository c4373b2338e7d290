"""The base ops: the ones the transform interpreters and the rules shared by every family are made of
(JAX's ``ad_util`` plays this role).

- The transforms: ``zeros_like`` and ``add`` (reverse mode's zero and accumulated cotangents, forward
  mode's zero tangents), ``stack`` and ``take_index`` (vmap's loop over examples).
- The shared rules: ``unbroadcast`` (``sum``, ``real``, ``reshape``), ``move_to_front`` (``moveaxis``),
  ``broadcast_batch_args`` (``reshape``), the reduction rules that come with ``sum``, and the helpers
  that define element-wise ops (``unary``, ``binary``).
- The ops the rules of these ops call, so that the file is closed: ``broadcast_to`` and ``sum`` are each
  other's transpose, as are ``stack`` and ``unstack``; ``astype``, ``conj``, ``where``, ``expand_dims``,
  ``zeros`` and ``arange`` serve their rules. ``permute_dims`` is here for ``indexing``'s rules
  (``manipulation`` comes after ``indexing``: ``repeat``'s VJP scatters).

This file imports only the core and ``ops.common``; every family builds on it and re-exports the ops of
its own that live here, so ``polyad.ops.manipulation.reshape`` is this file's ``reshape``.
"""

import math
from typing import NamedTuple

from polyad import dispatch
from polyad.core import bind
from polyad.ops.common import (
    _REAL,
    _SAME,
    ShapeDtype,
    _abstract,
    _abstract_from,
    _bottom,
    _creator,
    _device,
    _dtype_name,
    _dtype_same,
    _kind,
    _norm,
    _on_device,
    _shape_tuple,
    define,
    is_complex,
    is_floating,
    namespace_function,
    ndim_of,
    shape_of,
    unary_batch,
)

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
    if _kind(g.dtype) == "c" and hasattr(x, "dtype") and _kind(x.dtype) != "c":
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


def _batch_all_front(dims, values):
    """Every value with its batch dimension at 0; unbatched ones broadcast along a new batch axis."""
    size = next(v.shape[d] for v, d in zip(values, dims) if d is not None)
    out = []
    for v, d in zip(values, dims):
        if d is None:
            out.append(broadcast_to(expand_dims(v, axis=0), (size, *shape_of(v))))
        else:
            out.append(move_to_front(v, d))
    return out


# ------------------------------------------------------------------------------ element-wise: definition


def _conj_if_complex(d):
    return conj(d) if is_complex(d) else d


# Symbolic ones. Reverse mode knows when a cotangent is all ones (the seed of a scalar loss, ``sum``'s
# broadcast of it, ``add`` passing it on); an op's VJP rule may then carry a ``ones`` attribute, a rule of
# the same signature called instead of it for such a cotangent, which skips the product with the ones.
# What it hands back may be marked: ``KnownOnes`` (all ones again: the next rule may skip too) or
# ``Borrowed`` (an array that is not the rule's own, a primal: copied if it reaches the caller). A rule
# replaced by ``override`` or ``register_rule`` has no ``ones`` attribute, so the override is what runs.


class KnownOnes(NamedTuple):
    """A cotangent, from a ``vjp.ones`` rule, that is all ones."""

    value: object


class Borrowed(NamedTuple):
    """A cotangent, from a ``vjp.ones`` rule, that is a primal itself (not a new array)."""

    value: object


def with_ones_rule(vjp, ones):
    """``vjp`` with ``ones`` attached: the rule reverse mode calls when the cotangent is all ones."""
    vjp.ones = ones
    return vjp


def times_ones(g, d, x, fresh):
    """``unbroadcast(g * conj(d), x)`` for an all-ones ``g``: ``d`` itself when it is real with ``g``'s shape
    and dtype (``Borrowed`` unless ``fresh``: ``d`` was made by the rule), else the product."""
    if (
        hasattr(d, "shape")
        and d.dtype == g.dtype
        and tuple(d.shape) == tuple(g.shape)
        and _kind(d.dtype) == "f"
    ):
        r = unbroadcast(d, x)
        return Borrowed(d) if r is d and not fresh else r
    return unbroadcast(g * _cj_value(d), x)


def passes_ones(r, g):
    """``r``, the cotangent handed on from an all-ones ``g``, marked all ones when it is ``g`` itself."""
    return KnownOnes(r) if r is g else r


def _cj_value(d):
    if isinstance(d, complex):
        return d.conjugate()
    return conj(d) if hasattr(d, "dtype") and is_complex(d) else d


def _unary_vjp(deriv):
    def vjp(g, y, x):
        return (g * _conj_if_complex(deriv(x, y)),)

    def vjp_ones(g, y, x):
        d = deriv(x, y)
        return (times_ones(g, d, x, fresh=d is not x and d is not y),)

    return with_ones_rule(vjp, vjp_ones)


def unary(name, deriv=None, *, abstract_eval=_SAME, **rules):
    """A one-array element-wise op. ``deriv(x, y)`` is ``f'(x)`` given input ``x`` and output ``y``; from it
    come the VJP ``g * conj(f'(x))`` and the JVP ``t * f'(x)``."""
    if deriv is not None:
        if "vjp" not in rules:
            rules["vjp"] = _unary_vjp(deriv)
        rules.setdefault("jvp", lambda ts, y, x: ts[0] * deriv(x, y))
    op = define(name, abstract_eval=abstract_eval, **rules)
    op.rules["batch"] = unary_batch(op)
    return namespace_function(op, arity=1)


def binary(name, *, abstract_eval=_SAME, **rules):
    """A two-array broadcasting element-wise op (Python scalars allowed on either side)."""
    op = define(name, abstract_eval=abstract_eval, **rules)
    op.rules["batch"] = broadcast_batch(op)
    return namespace_function(op, arity=2)


def _broadcast_to_out(t, y):
    """Tangent ``t`` broadcast to the shape of the output ``y`` (a tangent of a broadcast input)."""
    return t if tuple(t.shape) == tuple(y.shape) else broadcast_to(t, tuple(y.shape))


# ------------------------------------------------------------------------------ conj, real, add, where

conj = unary("conj", vjp=lambda g, y, x: (conj(g),), linear=True)
real = unary("real", vjp=lambda g, y, x: (_complex_like(g, x),), linear=True, abstract_eval=_REAL)


def _complex_like(g, x):
    # real/imag of a complex input: the cotangent goes back as a complex array
    return g * (1 + 0j) if is_complex(x) else g


def _add_jvp(ts, y, a, b):
    ta, tb = ts
    if tb is None:
        return _broadcast_to_out(ta, y)
    if ta is None:
        return _broadcast_to_out(tb, y)
    return ta + tb


add = binary(
    "add",
    vjp=with_ones_rule(
        lambda g, y, a, b: (lambda: unbroadcast(g, a), lambda: unbroadcast(g, b)),
        lambda g, y, a, b: (
            lambda: passes_ones(unbroadcast(g, a), g),
            lambda: passes_ones(unbroadcast(g, b), g),
        ),
    ),
    jvp=_add_jvp,
)


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
    return _broadcast_to_out(where(c, ta, tb), y)


def _where_kernel(xp, c, a, b):
    if not hasattr(a, "shape") and not hasattr(b, "shape"):
        a = xp.asarray(a, device=c.device)  # the standard allows at most one scalar
    return xp.where(c, a, b)


_where_op = define(
    "where",
    _where_kernel,
    abstract_eval=_abstract(lambda xp, c, a, b: _dtype_same(xp, a, b)),
    vjp=_where_vjp,
    jvp=_where_jvp,
)
_where_op.rules["batch"] = broadcast_batch(_where_op)


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
    abstract_eval=_abstract_from(_reshape_shape),
    vjp=lambda g, y, x, shape, copy=None: (reshape(g, shape_of(x)),),
    linear=True,
    batch=_reshape_batch,
)


def reshape(x, /, shape, *, copy=None):
    """Reshape ``x`` to ``shape`` (one entry may be -1)."""
    return bind(_reshape, x, shape=tuple(shape), copy=copy)


reshape.op = _reshape


def _inverse(perm):
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def _permute_batch(info, dims, x, axes):
    x = move_to_front(x, dims[0])
    n = len(axes)
    return permute_dims(x, (0, *(_norm(a, n) + 1 for a in axes))), 0


_permute_dims = define(
    "permute_dims",
    abstract_eval=_abstract_from(lambda s, axes: tuple(s[a] for a in axes)),
    vjp=lambda g, y, x, axes: (permute_dims(g, _inverse([_norm(a, len(axes)) for a in axes])),),
    linear=True,
    batch=_permute_batch,
)


def permute_dims(x, /, axes):
    """Permute the axes of ``x``."""
    return bind(_permute_dims, x, axes=tuple(axes))


permute_dims.op = _permute_dims

# ------------------------------------------------------------------------------ moveaxis


def _as_tuple(a):
    return tuple(a) if isinstance(a, tuple | list) else (a,)


def _moveaxis_shape(s, source, destination):
    n = len(s)
    src = [_norm(a, n) for a in _as_tuple(source)]
    dst = [_norm(a, n) for a in _as_tuple(destination)]
    order = [i for i in range(n) if i not in src]
    for d, sidx in sorted(zip(dst, src)):
        order.insert(d, sidx)
    return order


def _moveaxis_batch(info, dims, x, source, destination):
    x = move_to_front(x, dims[0])
    n = ndim_of(x) - 1
    src = tuple(_norm(a, n) + 1 for a in _as_tuple(source))
    dst = tuple(_norm(a, n) + 1 for a in _as_tuple(destination))
    return moveaxis(x, src, dst), 0


_moveaxis = define(
    "moveaxis",
    lambda xp, x, *, source, destination: xp.moveaxis(x, source, destination),
    abstract_eval=_abstract_from(
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
    out = {_norm(a, ndim + len(axes)) for a in axes}
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
    abstract_eval=_abstract_from(_expand_shape),
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
    abstract_eval=_abstract_from(lambda s, shape: tuple(shape)),
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


def _sum_dtype(xp, x):
    """The dtype of ``sum``/``prod``/``cumulative_*`` with ``dtype=None``: small integers and bool widen
    to the default integer (unsigned ones to the unsigned integer of its width), others are kept."""
    kind = _kind(x.dtype)
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


def _cast_to(v, like):
    """``v`` cast to the dtype of ``like`` when they differ (a ``dtype=`` argument widened the output)."""
    if v.dtype == like.dtype:
        return v
    return astype(v, like.dtype)


def _axis_tuple(axis):
    return tuple(axis) if isinstance(axis, list) else axis


def _sum_vjp(g, y, x, *, axis=None, dtype=None, keepdims=False):
    return (_cast_to(broadcast_to(expand_reduced(g, shape_of(x), axis, keepdims), shape_of(x)), x),)


def _sum_vjp_ones(g, y, x, **params):
    return (KnownOnes(_sum_vjp(g, y, x, **params)[0]),)  # a broadcast (or cast) of ones is all ones


_sum = define(
    "sum",
    abstract_eval=reduction_abstract(_sum_dtype),
    vjp=with_ones_rule(_sum_vjp, _sum_vjp_ones),
    linear=True,
)
_sum.rules["batch"] = reduction_batch(_sum)


def sum(x, /, *, axis=None, dtype=None, keepdims=False):
    """Sum of ``x`` over ``axis`` (all axes when None)."""
    return bind(_sum, x, axis=_axis_tuple(axis), dtype=dtype, keepdims=keepdims)


sum.op = _sum

# ------------------------------------------------------------------------------ astype


def _astype_kernel(xp, x, *, dtype, copy=True, device=None):
    if device is None:
        return xp.astype(x, dtype, copy=copy)
    return xp.astype(x, dtype, copy=copy, device=device)


def _astype_vjp(g, y, x, *, dtype, copy=True, device=None):
    if not (is_floating(x) and is_floating(y)):
        return (None,)
    if _kind(y.dtype) == "c" and _kind(x.dtype) != "c":
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
_astype.rules["batch"] = lambda info, dims, x, **params: (bind(_astype, x, **params), dims[0])


def astype(x, dtype, /, *, copy=True, device=None):
    """``x`` cast to ``dtype``; differentiable between floating dtypes (real to complex included: the
    cotangent of a real input is the real part), constant into integers and bool."""
    return bind(_astype, x, dtype=dtype, copy=copy, device=device)


# ------------------------------------------------------------------------------ stack, unstack


def _stack_shape(s, n, axis):
    a = _norm(axis, len(s) + 1)
    return tuple(s[:a]) + (n,) + tuple(s[a:])


def _stack_batch(info, dims, *arrays, axis=0):
    arrays = _batch_all_front(dims, arrays)
    return stack(arrays, axis=_norm(axis, ndim_of(arrays[0])) + 1), 0


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
    return bind(_stack, *arrays, axis=_norm(axis, ndim_of(arrays[0]) + 1))


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
    return bind(_unstack, x, axis=_norm(axis, ndim_of(x)))


unstack.op = _unstack

# ------------------------------------------------------------------------------ take_index (internal)


def _take_index_kernel(xp, x, index, axis):
    return x[(slice(None),) * axis + (index, ...)]


def _take_index_vjp(g, y, x, index, axis):
    n = shape_of(x)[axis]
    mask = reshape(arange(n, device=_device(g)) == index, (n,) + (1,) * (ndim_of(x) - axis - 1))
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
    abstract_eval=_abstract_from(lambda s, index, axis: s[:axis] + s[axis + 1 :]),
    vjp=_take_index_vjp,
    linear=(0,),
    batch=_take_index_batch,
)


def take_index(x, index, *, axis=0):
    """``x[..., index, ...]`` with the Python int ``index`` at non-negative ``axis`` (used by rules)."""
    return bind(_take_index, x, index=index, axis=_norm(axis, ndim_of(x)))


# ------------------------------------------------------------------------------ creation: zeros, arange


def _arange_len(start, stop=None, step=1):
    if stop is None:
        start, stop = 0, start
    return (max(0, math.ceil((stop - start) / step)),)


_zeros = _creator("zeros", lambda shape: _shape_tuple(shape))
_full = _creator("full", lambda shape, fill_value: _shape_tuple(shape))  # ``full`` is in creation.py
_arange = _creator("arange", _arange_len)


def zeros(shape, *, dtype=None, device=None):
    """An array of zeros of ``shape``."""
    return _on_device(_zeros, shape, dtype=dtype, device=device)


def arange(start, /, stop=None, step=1, *, dtype=None, device=None):
    """Evenly spaced values in ``[start, stop)``."""
    return _on_device(_arange, start, stop, step, dtype=dtype, device=device)


# ------------------------------------------------------------------------------ zeros_like, ones_like


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


def _other_library(x, device):
    """The backend owning ``device`` when it is not ``x``'s library (a ``*_like`` then creates there)."""
    if device is None:
        return None
    own = dispatch.backend_of_array(_bottom(x))
    if own is None or dispatch.owns_device(own, device):
        return None
    return dispatch.owner_of_device(device)


def _like_elsewhere(backend, x, dtype, device, fill=None):
    """A ``*_like`` of ``x`` created on ``backend`` (another library than ``x``'s)."""
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
