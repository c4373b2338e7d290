"""Views: NumPy's aliasing for polyad's tensors, so that a write through a view reaches its base.

In NumPy ``part = ret[..., :k]; part += overlap`` changes ``ret``: the slice is a view of ``ret``'s memory.
polyad's values are immutable (a write computes the updated tensor out of place, then the written object
becomes it: ``Tensor._become``), so it keeps the aliasing as a record instead, the idea of torch's
functionalisation: a view remembers its **base** (the tensor that owns the memory) and the **steps** that
made it from the base; a base remembers its live views (weak references). Then

- a write to a view (``v += w``, ``v[...] = w``) is written back into the base through the steps (the
  inverse of each, last first: ``index_update`` for an index, ``reshape`` back, the inverse permutation)
  and the base becomes the result;
- after any write to a base or one of its views, every live view is made again from the base by its
  steps, so each sees the write, as NumPy's views do.

Everything is polyad ops, so derivatives and batching follow under every transform and ``pa.jit``.

What makes a view, as in NumPy: a basic index (ints, slices, None, Ellipsis; not one that names a single
element with an int per axis, which NumPy copies into a scalar), ``reshape`` where NumPy can reshape
without a copy (decided from the strides the steps give, the base taken C-contiguous), ``permute_dims``,
``matrix_transpose``, ``.T``, ``.mT``, ``moveaxis``, ``expand_dims``, ``squeeze``, ``flip`` and the
members of ``unstack``. An advanced index, a reshape NumPy must copy and every other function make a new
base. A view of a view has the first view's base.

A write that NumPy refuses is refused here too, before anything changes (an in-place result of another
shape, a cast across kinds). The cost to code that never writes through a view is a record per view
made (a small object and a weak reference) and one attribute test per in-place write.
"""

from weakref import ref as _ref

from polyad.core import Tensor, bind
from polyad.core.avals import dtype_kind, normalize_axis
from polyad.ops import indexing
from polyad.ops.base import astype, inverse_permutation
from polyad.ops.base import expand_dims as _expand_dims
from polyad.ops.base import moveaxis as _moveaxis
from polyad.ops.base import permute_dims as _permute_dims
from polyad.ops.base import reshape as _reshape
from polyad.ops.base import unstack as _unstack_all
from polyad.ops.linalg.products import matrix_transpose as _matrix_transpose
from polyad.ops.manipulation import flip as _flip
from polyad.ops.manipulation import squeeze as _squeeze

# ------------------------------------------------------------------------------ the records


class Views(list):
    """On a base tensor (``_alias``): weak references to the views made of it (dead ones pruned as the
    list grows). A view's ``_alias`` is the tuple ``(base, steps)``: the steps that make it from the
    base (``("index", key)``, ``("reshape", in_shape, out_shape)``, ``("permute", axes)``, ``("flip",
    axes)``). Plain list and tuple: recording a view is on the path of every slice."""

    __slots__ = ("limit",)

    def live(self):
        out = []
        for r in self:
            t = r()
            if t is not None:
                out.append(t)
        return out


def base_and_steps(x):
    """``(base, steps)`` of a tensor: its base and steps if it is a view, else itself and no steps."""
    link = x._alias
    if type(link) is tuple:
        return link
    return x, ()


def _record(x, out, step):
    """``out``, made from tensor ``x`` by ``step``, remembered as a view of ``x``'s base."""
    if out is x or not isinstance(out, Tensor):
        return out
    link = x._alias
    if type(link) is tuple:  # a view of a view: of the same base
        base = link[0]
        out._alias = (base, link[1] + (step,))
        views = base._alias
    else:
        out._alias = (x, (step,))
        views = link
        if views is None:
            views = x._alias = Views()
            views.limit = 8
    views.append(_ref(out))
    if len(views) > views.limit:  # prune the dead: amortised, the list stays about twice the live ones
        views[:] = [r for r in views if r() is not None]
        views.limit = 2 * len(views) + 8
    return out


# ------------------------------------------------------------------------------ replaying steps


def _replay(step, value):
    kind = step[0]
    if kind == "index":
        return bind(indexing.getitem_op, value, key=step[1])
    if kind == "reshape":
        return _reshape(value, step[2])
    if kind == "permute":
        return _permute_dims(value, step[1])
    return _flip(value, axis=step[1])


def _replay_all(base, steps):
    v = base
    for step in steps:
        v = _replay(step, v)
    return v


def _write_step(step, parent, new):
    """The value before ``step`` once its result is ``new`` (``parent``: the value before, for an index)."""
    kind = step[0]
    if kind == "index":
        key = step[1]
        if None in key:
            new, key = indexing.without_new_axes(new, tuple(parent.shape), key)
        return bind(indexing.index_update_op, parent, new, key=key)
    if kind == "reshape":
        return _reshape(new, step[1])
    if kind == "permute":
        return _permute_dims(new, inverse_permutation(step[1]))
    return _flip(new, axis=step[1])


def _written_back(base, steps, new):
    """The base's new value once the view its ``steps`` make holds ``new``."""
    last_index = max((i for i, s in enumerate(steps) if s[0] == "index"), default=-1)
    parents = [base]  # the values an index step writes into, made again from the base
    for step in steps[:last_index]:
        parents.append(_replay(step, parents[-1]))
    for i in range(len(steps) - 1, -1, -1):
        new = _write_step(steps[i], parents[i] if i <= last_index else None, new)
    return new


def _refresh(base, views):
    """Each of ``views`` made again from ``base`` (which was written)."""
    for v in views:
        v._become(_replay_all(base, v._alias[1]))


# ------------------------------------------------------------------------------ writes


_KIND_ORDER = {"b": 0, "i": 1, "u": 1, "f": 2, "c": 3}


def _check_write(t, new, what):
    """Refuse what NumPy refuses when ``new`` is to be stored in ``t``'s memory: another shape, or a dtype
    of a higher kind; returns ``new`` in ``t``'s dtype."""
    if tuple(new.shape) != tuple(t.shape):
        raise ValueError(
            f"{what}: the result has shape {tuple(new.shape)} but the array written has shape "
            f"{tuple(t.shape)}, and it shares memory with other arrays (a view or a base of views): as in "
            "NumPy, an in-place operation cannot change the shape (non-broadcastable output operand)"
        )
    if new.dtype != t.dtype:
        if _KIND_ORDER.get(dtype_kind(new.dtype), 9) > _KIND_ORDER.get(dtype_kind(t.dtype), 9):
            raise TypeError(
                f"{what}: cannot store a result of dtype {new.dtype} in an array of dtype {t.dtype} that "
                "shares memory with other arrays (NumPy's 'same_kind' casting rule); cast explicitly first"
            )
        new = astype(new, t.dtype)
    return new


# how many in-place writes tensors have taken (any thread): a trace compares it before and after to learn
# whether a function writes in place at all (a loop body that does gets tensors for its arrays)
WRITES = [0]


def write(t, new, what):
    """Make tensor ``t`` hold ``new`` (the outcome of an in-place operation or item assignment on ``t``),
    and every tensor sharing memory with it see the write, as NumPy's views do. Returns ``t``."""
    WRITES[0] += 1
    link = t._alias
    if link is None:
        return t._become(new)
    if type(link) is tuple:
        new = _check_write(t, new, what)
        base = link[0]
        base._become(_written_back(base, link[1], new))
        views = base._alias.live()
    else:
        views = link.live()
        if not views:  # its views are gone: a plain tensor again
            t._alias = None
            return t._become(new)
        new = _check_write(t, new, what)
        base = t._become(new)
    _refresh(base, views)
    return t


def setitem(x, key, value):
    """``x[key] = value`` (``Tensor.__setitem__``): functional, written through ``x``'s views and base."""
    structure, arrays = indexing.split_key(key)
    if not arrays and isinstance(value, Tensor) and _is_view_at(value, x, structure):
        return  # ``x[k] += y`` stores back the view it wrote through: nothing left to do, as in NumPy
    write(x, bind(indexing.index_update_op, x, value, *arrays, key=structure), "x[key] = value")


def _is_view_at(value, x, structure):
    link = value._alias
    if type(link) is not tuple:
        return False
    base, steps = base_and_steps(x)
    return link[0] is base and link[1] == steps + (("index", structure),)


# ------------------------------------------------------------------------------ functions that make views


def _is_element(structure, x):
    """Whether a basic key names one element of ``x`` with an int per axis (NumPy returns a scalar copy)."""
    for k in structure:
        if type(k) is not int:
            return False
    return len(structure) == x.ndim


def getitem(x, key):
    """``x[key]`` (``Tensor.__getitem__``): a basic index of a tensor is a view of it."""
    structure, arrays = indexing.split_key(key)
    out = bind(indexing.getitem_op, x, *arrays, key=structure)
    if arrays or not isinstance(x, Tensor) or _is_element(structure, x):
        return out
    return _record(x, out, ("index", structure))


def reshape(x, /, shape, *, copy=None):
    """Reshape ``x`` to ``shape`` (one entry may be -1); a view of ``x`` where NumPy's would be one."""
    if copy or not isinstance(x, Tensor):
        return _reshape(x, shape, copy=copy)
    if type(x._alias) is not tuple:  # a base (taken C-contiguous): every reshape is a view of it
        out = _reshape(x, shape, copy=copy)
        return _record(x, out, ("reshape", x.shape, out.shape))
    new_shape = _resolved(tuple(shape), x.size)
    if not _reshapes_in_place(x, new_shape):
        if copy is False:
            raise ValueError(
                f"reshape(copy=False): a view of shape {tuple(x.shape)} with these strides cannot be "
                f"reshaped to {new_shape} without a copy (as in NumPy)"
            )
        return _reshape(x, shape, copy=copy)
    out = _reshape(x, shape, copy=copy)
    return _record(x, out, ("reshape", tuple(x.shape), tuple(out.shape)))


def _resolved(shape, size):
    """``shape`` with its -1 entry (if any) computed from ``size``."""
    if -1 not in shape:
        return shape
    known = 1
    for d in shape:
        if d != -1:
            known *= d
    return tuple((size // known if known else 0) if d == -1 else d for d in shape)


def permute_dims(x, /, axes):
    """Permute the axes of ``x`` (a view of ``x``)."""
    out = _permute_dims(x, axes)
    if not isinstance(x, Tensor):
        return out
    axes = tuple(axes)
    if min(axes, default=0) < 0:
        n = len(axes)  # a permutation names every axis
        axes = tuple(normalize_axis(a, n) for a in axes)
    return _record(x, out, ("permute", axes))


def matrix_transpose(x, /):
    """Transpose the last two axes of ``x`` (a view of ``x``)."""
    out = _matrix_transpose(x)
    if not isinstance(x, Tensor):
        return out
    n = x.ndim
    return _record(x, out, ("permute", (*range(n - 2), n - 1, n - 2)))


def moveaxis(x, source, destination, /):
    """Move axes ``source`` of ``x`` to positions ``destination`` (a view of ``x``)."""
    out = _moveaxis(x, source, destination)
    if not isinstance(x, Tensor):
        return out
    n = x.ndim
    src = [normalize_axis(a, n) for a in (source if isinstance(source, tuple | list) else (source,))]
    dst = [
        normalize_axis(a, n)
        for a in (destination if isinstance(destination, tuple | list) else (destination,))
    ]
    order = [i for i in range(n) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return _record(x, out, ("permute", tuple(order)))


def expand_dims(x, /, axis=0):
    """Insert a size-1 axis at ``axis`` (a view of ``x``)."""
    out = _expand_dims(x, axis=axis)
    if not isinstance(x, Tensor):
        return out
    return _record(x, out, ("reshape", tuple(x.shape), tuple(out.shape)))


def squeeze(x, /, axis):
    """Remove size-1 axes ``axis`` (a view of ``x``)."""
    out = _squeeze(x, axis)
    if not isinstance(x, Tensor):
        return out
    return _record(x, out, ("reshape", tuple(x.shape), tuple(out.shape)))


def flip(x, /, *, axis=None):
    """``x`` with the order of elements along ``axis`` (every axis when None) reversed (a view of ``x``)."""
    out = _flip(x, axis=axis)
    if not isinstance(x, Tensor):
        return out
    n = x.ndim
    axes = tuple(range(n)) if axis is None else (axis if isinstance(axis, tuple | list) else (axis,))
    return _record(x, out, ("flip", tuple(sorted({normalize_axis(a, n) for a in axes}))))


def unstack(x, /, *, axis=0):
    """The slices of ``x`` along ``axis``, as a tuple of views of ``x``."""
    out = _unstack_all(x, axis=axis)
    if not isinstance(x, Tensor):
        return out
    a = normalize_axis(axis, x.ndim)
    return tuple(_record(x, o, ("index", (slice(None),) * a + (i, Ellipsis))) for i, o in enumerate(out))


# the namespace functions this module replaces (``polyad.xp``)
NAMESPACE = {
    "reshape": reshape,
    "permute_dims": permute_dims,
    "matrix_transpose": matrix_transpose,
    "moveaxis": moveaxis,
    "expand_dims": expand_dims,
    "squeeze": squeeze,
    "flip": flip,
    "unstack": unstack,
}


# ------------------------------------------------------------------------------ NumPy's view-or-copy rule


def _reshapes_in_place(x, new_shape):
    """Whether NumPy reshapes ``x`` to ``new_shape`` without a copy: always for a base (taken
    C-contiguous); for a view, where the strides its steps give allow it."""
    base, steps = base_and_steps(x)
    if not steps:
        return True
    shape, strides = tuple(base.shape), _c_strides(tuple(base.shape))
    for step in steps:
        shape, strides = _step_layout(step, shape, strides)
    return reshaped_strides(shape, strides, new_shape) is not None


def _c_strides(shape):
    strides, acc = [0] * len(shape), 1
    for i in range(len(shape) - 1, -1, -1):
        strides[i] = acc
        acc *= shape[i]
    return tuple(strides)


def _step_layout(step, shape, strides):
    """``(shape, strides)`` (in elements) after ``step``."""
    kind = step[0]
    if kind == "permute":
        return tuple(shape[a] for a in step[1]), tuple(strides[a] for a in step[1])
    if kind == "flip":
        return shape, tuple(-s if i in step[1] else s for i, s in enumerate(strides))
    if kind == "reshape":
        return step[2], reshaped_strides(shape, strides, step[2])
    key = step[1]
    used = sum(1 for k in key if k is not None and k is not Ellipsis)
    if Ellipsis in key:
        i = key.index(Ellipsis)
        key = key[:i] + (slice(None),) * (len(shape) - used) + key[i + 1 :]
    else:
        key = key + (slice(None),) * (len(shape) - used)
    out_shape, out_strides, dim = [], [], 0
    for k in key:
        if k is None:
            out_shape.append(1)
            out_strides.append(0)
        elif isinstance(k, slice):
            start, stop, step_ = k.indices(shape[dim])
            out_shape.append(len(range(start, stop, step_)))
            out_strides.append(strides[dim] * step_)
            dim += 1
        else:
            dim += 1
    return tuple(out_shape), tuple(out_strides)


def reshaped_strides(shape, strides, new_shape):
    """The strides of ``new_shape`` over the elements an array of ``shape`` and ``strides`` holds, in C
    order, or None where no strides can (NumPy then copies).

    Axes of length 1 are set aside; the others are matched in runs of equal product, and each run of old
    axes must be contiguous (every stride the next axis's stride times its length) to merge or split.

    Example:
        >>> reshaped_strides((2, 3), (3, 1), (6,)), reshaped_strides((3, 2), (1, 3), (6,))
        ((1,), None)
    """
    if 0 in shape:
        return _c_strides(new_shape)
    old = [(d, s) for d, s in zip(shape, strides) if d != 1]
    new = [i for i, d in enumerate(new_shape) if d != 1]
    out = [0] * len(new_shape)
    i = j = 0
    while i < len(old) and j < len(new):
        run_old, run_new = [i], [new[j]]
        p_old, p_new = old[i][0], new_shape[new[j]]
        i, j = i + 1, j + 1
        while p_old != p_new:
            if p_old < p_new:
                p_old *= old[i][0]
                run_old.append(i)
                i += 1
            else:
                p_new *= new_shape[new[j]]
                run_new.append(new[j])
                j += 1
        for a, b in zip(run_old, run_old[1:]):
            if old[a][1] != old[b][0] * old[b][1]:
                return None
        stride = old[run_old[-1]][1]
        for k in reversed(run_new):
            out[k] = stride
            stride *= new_shape[k]
    return tuple(out)
