"""Shared pieces for defining ops: the ``define`` helper, abstract values, and rules shared by families.

Family rules (one per family, used by many ops):
- ``unary_batch``: ops that act element by element on one array keep its batch dimension;
- ``broadcast_batch``: n-ary broadcasting ops move batch dimensions to the front and align ranks;
- ``unbroadcast``: sums a cotangent back to the shape of an input that was broadcast.
"""

from polyad import dispatch
from polyad.core import Op, Tensor, bind


class ShapeDtype:
    """An abstract array: shape, dtype and device, no data. Returned by ``eval_shape``."""

    __slots__ = ("shape", "dtype", "device")

    def __init__(self, shape, dtype, device=None):
        self.shape = tuple(shape)
        self.dtype = dtype
        self.device = device

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    def __eq__(self, other):
        return isinstance(other, ShapeDtype) and (self.shape, self.dtype) == (other.shape, other.dtype)

    __hash__ = None

    def __repr__(self):
        return f"ShapeDtype(shape={self.shape}, dtype={self.dtype})"


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

        def f(x, /):
            return bind(op, x)

    elif arity == 2:

        def f(x1, x2, /):
            return bind(op, x1, x2)

    f.__name__ = f.__qualname__ = name or op.name.split(".")[-1]
    f.__doc__ = doc
    f.op = op
    return f


# --------------------------------------------------------------------------------------------- dtypes


def xp_of(*xs):
    """The backend Array API namespace of the arrays underneath ``xs`` (for dtype questions only)."""
    return dispatch.backend_of([_bottom(x) for x in xs]).xp


def _bottom(x):
    while isinstance(x, Tensor):
        x = x._value
    return x


_NUMPY_KINDS = {"c": "c", "f": "f", "b": "b"}  # NumPy-style dtype.kind letters; others are integers
_KINDS = {}  # (type(dtype), dtype) -> kind, for dtypes without .kind; the type keeps libraries apart


def _kind(dtype):
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
    return _kind(x.dtype) == "c"


def is_floating(x):
    """True for real or complex floating arrays: the dtypes that carry derivatives."""
    return _kind(x.dtype) in "fc"


# --------------------------------------------------------------------------------------------- helpers


def ndim_of(x):
    return len(x.shape) if hasattr(x, "shape") else 0


def shape_of(x):
    return tuple(x.shape) if hasattr(x, "shape") else ()


def unbroadcast(g, x):
    """Sum cotangent ``g`` down to the shape of ``x`` (which was broadcast against other inputs)."""
    xd = getattr(x, "dtype", None)
    if xd is g.dtype and g.shape == x.shape:  # nothing to do: the common case, kept cheap
        return g
    from polyad.ops.reductions import sum as _sum

    xs = shape_of(x)
    if xd is not None and xd is not g.dtype and _kind(g.dtype) == "c" and _kind(xd) != "c":
        from polyad.ops.elementwise import real

        g = real(g)  # a real input's cotangent is the real part (complex convention of elementwise.py)
    gs = g.shape
    if tuple(gs) == xs:
        return g
    lead = len(gs) - len(xs)
    axes = tuple(range(lead)) + tuple(i + lead for i, s in enumerate(xs) if s == 1 and gs[i + lead] != 1)
    out = _sum(g, axis=axes, keepdims=True) if axes else g
    if lead:
        from polyad.ops.manipulation import reshape

        out = reshape(out, xs)
    return out


def move_to_front(v, d):
    """Value ``v`` with its batch dimension ``d`` moved to axis 0 (no-op when already there)."""
    if d == 0:
        return v
    from polyad.ops.manipulation import moveaxis

    return moveaxis(v, d, 0)


def broadcast_batch_args(dims, values):
    """Move every batch dimension to the front and pad batched values so ranks align for broadcasting."""
    from polyad.ops.manipulation import reshape

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


def unary_batch(op):
    return lambda info, dims, x, **params: (bind(op, x, **params), dims[0])


def broadcast_batch(op):
    """Batching rule of an n-ary broadcasting op."""

    def rule(info, dims, *values, **params):
        return bind(op, *broadcast_batch_args(dims, values), **params), 0

    return rule
