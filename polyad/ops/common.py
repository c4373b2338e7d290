"""Shared pieces for defining ops: the ``define`` helper and the abstract-evaluation rules families share.
The array vocabulary they are written in (``ShapeDtype``, dtype kinds, shapes) is ``polyad.core.avals``.

Nothing here binds an op by name, so every op file can import it (``ops.base`` holds the ops that the
shared rules need: ``unbroadcast``, ``move_to_front``, ``broadcast_batch``, ...).

- ``elementwise_abstract`` (``ABSTRACT_SAME``, ``ABSTRACT_BOOL``, ``ABSTRACT_REAL``): element-wise ops
  broadcast their inputs;
- ``shape_abstract``: shape-only ops, from a function of the input shapes;
- ``creation_op``: ops with no array argument, run on the backend that owns their ``device``;
- ``unary_batch``: ops that act element by element on one array keep its batch dimension.
"""

import polyad.core.dispatch as dispatch
from polyad.core import Op, bind, fresh
from polyad.core.avals import ShapeDtype, broadcast_shape, same_named_dtype


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

        def f(x, /):  # type: ignore[misc]
            return bind(op, x)

    elif arity == 2:

        def f(x1, x2, /):  # type: ignore[misc]
            return bind(op, x1, x2)

    f.__name__ = f.__qualname__ = name or op.name.split(".")[-1]
    f.__doc__ = doc
    f.op = op
    return f


def unary_batch(op):
    return lambda info, dims, x, **params: (bind(op, x, **params), dims[0])


# --------------------------------------------------------------------------------------------- abstract rules


def _shape(a):
    return a.shape if hasattr(a, "shape") else ()


def _aval_device(avals):
    return next((a.device for a in avals if hasattr(a, "shape")), None)


def same_dtype(xp, *avals):
    if not any(hasattr(a, "shape") for a in avals):  # Python numbers only (``where(c, 1.0, 0.0)``): the
        # default dtype of the widest kind, as NumPy gives (array_api_strict's result_type needs an array)
        kinds = (bool, int, float, complex)
        widest = max((kinds.index(type(a)) for a in avals if type(a) in kinds), default=2)
        return (xp.bool, xp.int64, xp.float64, xp.complex128)[widest]
    return xp.result_type(*[a.dtype if hasattr(a, "shape") else a for a in avals])


def _dtype_bool(xp, *avals):
    return xp.bool


def real_dtype_rule(xp, *avals):
    d = avals[0].dtype
    if d == xp.complex128:
        return xp.float64
    if d == xp.complex64:
        return xp.float32
    return d


def elementwise_abstract(dtype_rule):
    """Abstract evaluation of an element-wise op: the broadcast shape, the dtype ``dtype_rule`` gives."""

    def rule(xp, *avals, **params):
        return ShapeDtype(broadcast_shape(*map(_shape, avals)), dtype_rule(xp, *avals), _aval_device(avals))

    return rule


ABSTRACT_SAME = elementwise_abstract(same_dtype)
ABSTRACT_BOOL = elementwise_abstract(_dtype_bool)
ABSTRACT_REAL = elementwise_abstract(real_dtype_rule)


def shape_abstract(fn):
    """Abstract evaluation of a shape-only op from a function of (input shapes, params) -> output shape."""

    def rule(xp, *avals, **params):
        a = avals[0]
        return ShapeDtype(fn(*[x.shape for x in avals], **params), a.dtype, a.device)

    return rule


# --------------------------------------------------------------------------------------------- creation


def creation_op(name, shape_rule):
    """An op with no array arguments, run on the backend that owns its ``device``."""

    def kernel(xp, *args, **params):
        try:
            return getattr(xp, name)(*args, **params)
        except (TypeError, ValueError, AttributeError):
            if params.get("dtype") is None:
                raise
            # another library's dtype (polyad.xp's on the default backend, for a device of another): by name
            return getattr(xp, name)(*args, **{**params, "dtype": same_named_dtype(xp, params["dtype"])})

    def abstract(xp, *args, dtype=None, device=None, **params):
        if dtype is None:
            dtype = _default_dtype(name, args, device)
        return ShapeDtype(shape_rule(*args, **params), dtype, device)

    # no array to read a backend from: the ``device`` parameter picks it
    return define(name, kernel, abstract_eval=abstract, nondiff=True, from_device=True)


def on_device(op, *args, **params):
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
