"""Abstract evaluation: ``eval_shape`` runs a function on abstract tensors through the ops'
``abstract_eval`` rules, computing no data."""

import optree

from polyad import dispatch
from polyad.core import ConcretizationError, Interpreter, Tensor, new_level, rule_kind
from polyad.ops.common import ShapeDtype

ABSTRACT_EVAL = rule_kind(
    "abstract_eval",
    "abstract_eval(xp, *avals, **params) -> aval | tuple: output shapes and dtypes (ShapeDtype), no data",
)


class AbstractTensor(Tensor):
    """A tensor whose ``_value`` is a ShapeDtype: shape, dtype and device, no data."""

    __slots__ = ()

    def _scalar(self, what):
        raise ConcretizationError(f"{what}() of an abstract tensor inside eval_shape: it has no value")

    def concrete(self):
        self._scalar("a concrete value")


def _aval(x, interp):
    if isinstance(x, Tensor) and x._interp is interp:
        return x._value
    if dispatch.backend_of_array(x) is not None:
        return ShapeDtype(tuple(x.shape), x.dtype, getattr(x, "device", None))
    return x


class AbstractInterpreter(Interpreter):
    transforms_bodies = False  # a higher-order op is one op here, evaluated by its abstract_eval rule
    transform = "eval_shape"
    carries = "abstract shape (it has no data)"

    def __init__(self, level, backend):
        super().__init__(level)
        self.backend = backend

    def process(self, op, args, params):
        rule = op.rules.get("abstract_eval")
        if rule is None:
            raise NotImplementedError(
                f"eval_shape: op {op.name!r} has no abstract evaluation rule "
                "(for a custom op, register one with op.register_fake)"
            )
        out = rule(self.backend.xp, *[_aval(a, self) for a in args], **params)
        if op.multiple_results:
            return tuple(AbstractTensor(o, self) for o in out)
        return AbstractTensor(out, self)


def eval_shape(func, *args, **kwargs):
    """Output shapes and dtypes of ``func(*args)`` without computing anything.

    Args:
        func: a function of arrays.
        *args: arrays or ShapeDtype objects (pytrees allowed).

    Returns:
        The output pytree with each array replaced by a ``ShapeDtype``.

    Example:
        >>> import numpy as np, polyad as pa
        >>> pa.eval_shape(lambda x: pa.xp.sum(x, axis=0), np.ones((3, 4)))
        ShapeDtype(shape=(4,), dtype=float64)
    """
    if not callable(func):
        raise TypeError(f"eval_shape(func, ...): func must be callable, got {type(func).__name__}")
    flat, tree = optree.tree_flatten(args, none_is_leaf=False)
    backend = dispatch.backend_of([x for x in flat if not isinstance(x, ShapeDtype)])
    with new_level(AbstractInterpreter, backend) as interp:
        ins = [
            AbstractTensor(x, interp)
            if isinstance(x, ShapeDtype)
            else AbstractTensor(ShapeDtype(tuple(x.shape), x.dtype, getattr(x, "device", None)), interp)
            if dispatch.backend_of_array(x) is not None
            else x
            for x in flat
        ]
        out = func(*optree.tree_unflatten(tree, ins), **kwargs)
        return optree.tree_map(lambda o: _output_aval(o, interp), out, none_is_leaf=False)


def _output_aval(o, interp):
    """What ``eval_shape`` returns for output leaf ``o``: its ShapeDtype; a Python number as it is."""
    if isinstance(o, Tensor) and o._interp is interp:
        return o._value
    if isinstance(o, int | float | complex):
        return o  # known without computing anything, like the non-array inputs passed through
    if not hasattr(o, "shape") or not hasattr(o, "dtype"):
        kind = type(o).__name__
        raise TypeError(
            f"eval_shape: func must return arrays, Python numbers or pytrees of them; got a {kind}"
        )
    return ShapeDtype(tuple(o.shape), o.dtype, getattr(o, "device", None))


# ------------------------------------------------------------------------------ fake arrays (custom ops)


class FakeArray(ShapeDtype):
    """An abstract array handed to a custom op's ``register_fake`` function: shape, dtype, device, and a
    namespace (``__array_namespace__()``) whose creation functions build abstract outputs."""

    __slots__ = ()

    def __array_namespace__(self, api_version=None):
        return FAKE_NAMESPACE


class _FakeNamespace:
    """Creation functions that return FakeArrays; dtypes of the default backend."""

    def empty(self, shape, *, dtype=None, device=None):
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        return FakeArray(shape, dtype if dtype is not None else self.float64, device)

    zeros = ones = empty

    def full(self, shape, fill_value, *, dtype=None, device=None):
        return self.empty(shape, dtype=dtype, device=device)

    def empty_like(self, x, *, dtype=None, device=None):
        return FakeArray(x.shape, dtype if dtype is not None else x.dtype, device or x.device)

    zeros_like = ones_like = empty_like

    def __getattr__(self, name):
        return getattr(dispatch.default_backend().xp, name)  # dtypes, finfo, result_type, ...


FAKE_NAMESPACE = _FakeNamespace()


def fake_abstract_eval(name, fn):
    """Adapt a custom op's fake function to the ``abstract_eval(xp, *avals, **params)`` rule signature."""

    def to_fake(a):
        return FakeArray(a.shape, a.dtype, a.device) if isinstance(a, ShapeDtype) else a

    def rule(xp, *avals, **params):
        out = fn(*[to_fake(a) for a in avals], **params)
        leaves = out if isinstance(out, tuple) else (out,)
        for o in leaves:
            if not hasattr(o, "shape") or not hasattr(o, "dtype"):
                raise TypeError(
                    f"custom op {name!r}: its fake function must return abstract arrays (shape, dtype), "
                    f"got {type(o).__name__}"
                )
        conv = tuple(ShapeDtype(tuple(o.shape), o.dtype, getattr(o, "device", None)) for o in leaves)
        return conv if isinstance(out, tuple) else conv[0]

    return rule
