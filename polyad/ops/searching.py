"""Searching, sorting and set functions of the standard: argmax, argmin, nonzero, searchsorted, sort,
argsort and the four ``unique_*`` functions, each with its rules.

Derivatives. Indices, counts and positions carry none (``nondiff``). ``sort`` is differentiable: its output
is ``take_along_axis(x, p)`` for the sorting permutation ``p``, so its JVP gathers the tangent through ``p``
and its VJP gathers the cotangent through the inverse permutation. Ties take the stable permutation (equal
elements keep their order), one of the one-sided derivatives at a tie. The ``values`` of the ``unique_*``
functions are differentiable too: each unique value is the common value of its occurrences, its tangent
the mean of their tangents, and its cotangent is shared equally among them (the rule ``maximum`` uses at
ties). Where no element repeats this is the exact derivative (a permutation, as for ``sort``).

Data-dependent shapes. ``nonzero`` and the ``unique_*`` functions return arrays whose length depends on the
values. ``eval_shape`` reports those dimensions as None (the standard's convention for unknown sizes), and
``vmap`` computes them per batch element: where every element's results have the same lengths they are
stacked, else it raises a ``ConcretizationError`` (the results cannot be stacked into one array; JAX
refuses them always unless given a static size).
"""

from collections import namedtuple

from polyad.core import ConcretizationError, bind
from polyad.core.avals import ShapeDtype, device_of, ndim_of, normalize_axis, shape_of, xp_of
from polyad.ops.base import astype, broadcast_to, move_to_front, reduction_shape, reshape, stack, take_index
from polyad.ops.base import sum as _sum
from polyad.ops.common import define
from polyad.ops.fills import zeros
from polyad.ops.indexing import scatter_add, take, take_along_axis


def _index_dtype(xp):
    return xp.__array_namespace_info__().default_dtypes()["indexing"]


def _data_dependent_batch(op):
    """The batching rule of ``op``, whose output shape depends on the data: computed per batch element and
    stacked when every element's results have the same shapes (the common case of examples that agree),
    else a clear error."""
    name = op.name

    def rule(info, dims, *values, **params):
        per = [
            bind(op, *[v if d is None else take_index(v, i, axis=d) for v, d in zip(values, dims)], **params)
            for i in range(info.batch_size)
        ]
        shapes = {tuple(shape_of(o) for o in (r if op.multiple_results else (r,))) for r in per}
        if len(shapes) != 1:
            raise ConcretizationError(
                f"vmap: {name} returns arrays whose length depends on the values, which differ per batch "
                f"element (shapes {sorted(shapes)}), so the per-element results cannot be stacked into one "
                f"batched array. Call {name} outside vmap, or use a fixed-size formulation (for example a "
                "boolean mask with xp.where)."
            )
        if not op.multiple_results:
            return stack(per), 0
        n = len(per[0])
        return tuple(stack([r[k] for r in per]) for k in range(n)), (0,) * n

    return rule


# ------------------------------------------------------------------------------ argmax / argmin


def _arg_reduce_abstract(xp, x, *, axis=None, keepdims=False):
    return ShapeDtype(reduction_shape(x.shape, axis, keepdims), _index_dtype(xp), x.device)


def _arg_reduce_batch(op):
    def rule(info, dims, x, *, axis=None, keepdims=False):
        x = move_to_front(x, dims[0])
        n = ndim_of(x) - 1
        if n == 0 and axis is not None:
            return NotImplemented  # NumPy takes axis 0 of a 0-d array: the loop gives what eager gives
        if axis is None:
            size = shape_of(x)[0]
            out = bind(op, reshape(x, (size, -1)), axis=1, keepdims=False)
            return (reshape(out, (size,) + (1,) * n) if keepdims else out), 0
        return bind(op, x, axis=normalize_axis(axis, n) + 1, keepdims=keepdims), 0

    return rule


def _arg_reduce(name):
    op = define(name, abstract_eval=_arg_reduce_abstract, nondiff=True)
    op.register_rule("batch", _arg_reduce_batch(op))
    return op


_argmax = _arg_reduce("argmax")
_argmin = _arg_reduce("argmin")


def argmax(x, /, *, axis=None, keepdims=False):
    """Indices of the maxima of ``x`` along ``axis`` (of the flattened array when None); first on ties."""
    return bind(_argmax, x, axis=axis, keepdims=keepdims)


def argmin(x, /, *, axis=None, keepdims=False):
    """Indices of the minima of ``x`` along ``axis`` (of the flattened array when None); first on ties."""
    return bind(_argmin, x, axis=axis, keepdims=keepdims)


argmax.op = _argmax
argmin.op = _argmin

# ------------------------------------------------------------------------------ nonzero


_nonzero = define(
    "nonzero",
    lambda xp, x: tuple(xp.nonzero(x)),
    abstract_eval=lambda xp, x: tuple(ShapeDtype((None,), _index_dtype(xp), x.device) for _ in x.shape),
    nondiff=True,
    multiple_results=True,
)
_nonzero.register_rule("batch", _data_dependent_batch(_nonzero))


def nonzero(x, /):
    """A tuple of index arrays, one per axis of ``x``, of its non-zero (true) elements in row-major order.

    The length of the arrays depends on the data: not batchable by ``vmap``; ``x`` must not be 0-d.
    """
    if ndim_of(x) == 0:
        raise ValueError("nonzero does not accept a 0-d array (the standard leaves it undefined); reshape it")
    return bind(_nonzero, x)


nonzero.op = _nonzero

# ------------------------------------------------------------------------------ searchsorted


def _searchsorted_kernel(xp, x1, x2, sorter, *, side):
    return xp.searchsorted(x1, x2, side=side, sorter=sorter)


def _searchsorted_abstract(xp, x1, x2, sorter, *, side):
    return ShapeDtype(x2.shape, _index_dtype(xp), x2.device)


def _searchsorted_batch(info, dims, x1, x2, sorter, *, side):
    d1, d2, ds = dims
    if d1 is None and ds is None:  # only the needles are batched: their shape is the output's
        return bind(_searchsorted, x1, x2, sorter, side=side), d2
    # A batched sorted sequence: the insertion index of v into a sorted x1 is the number of elements of
    # x1 below v (side "left") or not above it ("right"); a count does not depend on the order, so the
    # sorter is not needed. Costs len(x1) comparisons per needle.
    if d1 is None:
        size = shape_of(x2)[d2] if d2 is not None else shape_of(sorter)[ds]
        x1 = reshape(x1, (1, -1))
    else:
        x1 = move_to_front(x1, d1)
        size = shape_of(x1)[0]
    if d2 is None:
        x2 = reshape(x2, (1,) + shape_of(x2))
    else:
        x2 = move_to_front(x2, d2)
    r = ndim_of(x2) - 1
    s1 = shape_of(x1)
    x1 = reshape(x1, (s1[0],) + (1,) * r + (s1[1],))
    x2 = reshape(x2, shape_of(x2) + (1,))
    hits = (x1 < x2) if side == "left" else (x1 <= x2)
    out = _sum(astype(hits, _index_dtype(xp_of(x2))), axis=-1)
    if shape_of(out)[0] != size:
        out = broadcast_to(out, (size,) + shape_of(out)[1:])
    return out, 0


_searchsorted = define(
    "searchsorted",
    _searchsorted_kernel,
    abstract_eval=_searchsorted_abstract,
    batch=_searchsorted_batch,
    nondiff=True,
)


def searchsorted(x1, x2, /, *, side="left", sorter=None):
    """Indices at which the elements of ``x2`` would be inserted into the 1-D ``x1`` to keep it sorted
    (``x1`` ascending, or ascending as ``x1[sorter]``); ``side`` picks the first or last such place."""
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    if ndim_of(x1) != 1:
        raise ValueError(f"searchsorted: x1 must be 1-D, got {ndim_of(x1)}-D")
    return bind(_searchsorted, x1, x2, sorter, side=side)


searchsorted.op = _searchsorted

# ------------------------------------------------------------------------------ sort / argsort


def _sort_batch(op):
    def rule(info, dims, x, *, axis=-1, **params):
        d = dims[0]
        a = normalize_axis(axis, ndim_of(x) - 1)
        return bind(op, x, axis=a + 1 if a >= d else a, **params), d

    return rule


def _same_abstract(xp, x, **params):
    return ShapeDtype(x.shape, x.dtype, x.device)


def _permutation(x, axis, descending):
    # the stable sorting permutation: ties keep their order, the same whether or not ``sort`` was stable
    return argsort(x, axis=axis, descending=descending, stable=True)


def _sort_jvp(ts, y, x, *, axis=-1, descending=False, stable=True):
    return take_along_axis(ts[0], _permutation(x, axis, descending), axis=axis)


def _sort_vjp(g, y, x, *, axis=-1, descending=False, stable=True):
    # the transpose of gathering through a permutation is gathering through its inverse
    inverse = argsort(_permutation(x, axis, descending), axis=axis)
    return (take_along_axis(g, inverse, axis=axis),)


_sort = define("sort", abstract_eval=_same_abstract, vjp=_sort_vjp, jvp=_sort_jvp)
_sort.register_rule("batch", _sort_batch(_sort))
_argsort = define(
    "argsort",
    abstract_eval=lambda xp, x, **params: ShapeDtype(x.shape, _index_dtype(xp), x.device),
    nondiff=True,
)
_argsort.register_rule("batch", _sort_batch(_argsort))


def _check_sortable(name, x, axis):
    if ndim_of(x) == 0:
        raise ValueError(f"{name} needs an array of at least one dimension, got a 0-d array")
    return normalize_axis(axis, ndim_of(x))


def sort(x, /, *, axis=-1, descending=False, stable=True):
    """``x`` sorted along ``axis`` (ascending unless ``descending``); differentiable through the sorting
    permutation (ties take the stable one)."""
    axis = _check_sortable("sort", x, axis)
    return bind(_sort, x, axis=axis, descending=descending, stable=stable)


def argsort(x, /, *, axis=-1, descending=False, stable=True):
    """The indices that sort ``x`` along ``axis`` (equal elements keep their order when ``stable``)."""
    axis = _check_sortable("argsort", x, axis)
    return bind(_argsort, x, axis=axis, descending=descending, stable=stable)


sort.op = _sort
argsort.op = _argsort

# ------------------------------------------------------------------------------ unique_*

UniqueAllResult = namedtuple("UniqueAllResult", ["values", "indices", "inverse_indices", "counts"])
UniqueCountsResult = namedtuple("UniqueCountsResult", ["values", "counts"])
UniqueInverseResult = namedtuple("UniqueInverseResult", ["values", "inverse_indices"])

_UNIQUE_FIELDS = {
    "unique_all": UniqueAllResult._fields,
    "unique_counts": UniqueCountsResult._fields,
    "unique_inverse": UniqueInverseResult._fields,
    "unique_values": ("values",),
}


def _unique_abstract(name):
    fields = _UNIQUE_FIELDS[name]

    def rule(xp, x):
        idx = _index_dtype(xp)
        avals = {
            "values": ShapeDtype((None,), x.dtype, x.device),
            "indices": ShapeDtype((None,), idx, x.device),
            "inverse_indices": ShapeDtype(x.shape, idx, x.device),
            "counts": ShapeDtype((None,), idx, x.device),
        }
        out = tuple(avals[f] for f in fields)
        return out if len(out) > 1 else out[0]

    return rule


def _unique_kernel(name):
    if name == "unique_values":
        return lambda xp, x: xp.unique_values(x)
    return lambda xp, x: tuple(getattr(xp, name)(x))


def _inverse_and_counts(name, out, x):
    """The flat inverse indices of ``x`` and the counts of the unique values: from the forward outputs
    where they are among them, else from ``unique_all`` (a constant to the derivative)."""
    fields = _UNIQUE_FIELDS[name]
    if not ("inverse_indices" in fields and "counts" in fields):
        out = bind(_unique_ops["unique_all"], x)
        fields = _UNIQUE_FIELDS["unique_all"]
    inverse = out[fields.index("inverse_indices")]
    counts = out[fields.index("counts")]
    return reshape(inverse, (-1,)), counts


def _unique_rules(name):
    multiple = name != "unique_values"

    def vjp(g, out, x):
        gv = g[0] if multiple else g
        inverse, counts = _inverse_and_counts(name, out, x)
        # each occurrence receives an equal share of its unique value's cotangent
        share = gv / astype(counts, gv.dtype)
        return (reshape(take(share, inverse, axis=0), shape_of(x)),)

    def jvp(ts, out, x):
        t = ts[0]
        values = out[0] if multiple else out
        inverse, counts = _inverse_and_counts(name, out, x)
        total = scatter_add(
            zeros(shape_of(values), dtype=t.dtype, device=device_of(t)), inverse, reshape(t, (-1,)), axis=0
        )
        tv = total / astype(counts, t.dtype)  # the mean tangent of the occurrences
        if not multiple:
            return tv
        return (tv,) + (None,) * (len(_UNIQUE_FIELDS[name]) - 1)

    return vjp, jvp


def _unique_op(name):
    vjp, jvp = _unique_rules(name)
    op = define(
        name,
        _unique_kernel(name),
        abstract_eval=_unique_abstract(name),
        vjp=vjp,
        jvp=jvp,
        multiple_results=name != "unique_values",
    )
    op.register_rule("batch", _data_dependent_batch(op))
    return op


_unique_ops = {name: _unique_op(name) for name in _UNIQUE_FIELDS}


def unique_all(x, /):
    """The unique elements of ``x`` (flattened), the index of the first occurrence of each, the inverse
    indices (shaped like ``x``) that rebuild ``x`` from them, and their counts.

    Only ``values`` is differentiable (a mean over each value's occurrences); lengths depend on the data,
    so not batchable by ``vmap``.
    """
    return UniqueAllResult(*bind(_unique_ops["unique_all"], x))


def unique_counts(x, /):
    """The unique elements of ``x`` (flattened) and how often each occurs (``values`` differentiable)."""
    return UniqueCountsResult(*bind(_unique_ops["unique_counts"], x))


def unique_inverse(x, /):
    """The unique elements of ``x`` (flattened) and the inverse indices, shaped like ``x``, that rebuild
    ``x`` from them (``values`` differentiable)."""
    return UniqueInverseResult(*bind(_unique_ops["unique_inverse"], x))


def unique_values(x, /):
    """The unique elements of ``x`` (flattened); differentiable, each value's cotangent shared equally
    among its occurrences."""
    return bind(_unique_ops["unique_values"], x)


for _name in _UNIQUE_FIELDS:
    globals()[_name].op = _unique_ops[_name]
