"""Abstract evaluation: ``eval_shape`` runs a function on abstract tensors through the ops'
``abstract_eval`` rules, computing no data."""

from collections.abc import Callable
from typing import Any

import optree

from polyad import dispatch
from polyad.core import ConcretizationError, FreshTensor, Interpreter, Tensor, new_level, rule_kind
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
    if type(x) is FreshTensor:
        x = x._value
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


def eval_shape(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
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


def fake_abstract_eval(name, fn):
    """Adapt a custom op's fake function to the ``abstract_eval(xp, *avals, **params)`` rule signature.

    The fake function runs at an abstract level of its own: its array arguments are ``AbstractTensor``s
    (shape, dtype, device, and ``polyad.xp`` as their namespace, so ``array_namespace`` of them is
    ``polyad.xp``), and the namespace's functions on them compute shapes only. Creation functions with
    no array argument (``xp.empty(shape)``) make real arrays, as inside ``eval_shape``; their shape and
    dtype are what counts.
    """

    def rule(xp, *avals, **params):
        device = next((a.device for a in avals if isinstance(a, ShapeDtype)), None)
        with new_level(AbstractInterpreter, dispatch.backend_of_device(device)) as interp:
            out = fn(
                *[AbstractTensor(a, interp) if isinstance(a, ShapeDtype) else a for a in avals], **params
            )
            leaves = out if isinstance(out, tuple) else (out,)
            conv = tuple(_abstract_output(o, interp, name) for o in leaves)
        return conv if isinstance(out, tuple) else conv[0]

    return rule


def _abstract_output(o, interp, name):
    if isinstance(o, Tensor) and o._interp is interp:
        return o._value
    if not hasattr(o, "shape") or not hasattr(o, "dtype"):
        raise TypeError(
            f"custom op {name!r}: its fake function must return abstract arrays (shape, dtype), "
            f"got {type(o).__name__}"
        )
    return ShapeDtype(tuple(o.shape), o.dtype, getattr(o, "device", None))
