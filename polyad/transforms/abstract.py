"""Abstract evaluation: a function run on abstract tensors (shape, dtype, device; no data) through the
ops' ``abstract_eval`` rules (``eval_abstract``, behind ``pa.eval_shape``), and custom ops' fake functions
adapted to that rule kind."""

import optree

import polyad.core.dispatch as dispatch
from polyad.core import ConcretizationError, FreshTensor, Interpreter, Tensor, new_level, rule_kind, rule_of
from polyad.core.avals import ShapeDtype

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
        return ShapeDtype.of(x)
    return x


def abstract_rule(op, where):
    """``op``'s abstract evaluation rule, or a NotImplementedError naming ``where`` (eval_shape, pa.jit)."""
    rule = rule_of(op, ABSTRACT_EVAL)
    if rule is None:
        raise NotImplementedError(
            f"{where}: op {op.name!r} has no abstract evaluation rule, so it cannot be evaluated abstractly "
            "(for a custom op, register one with op.register_fake)"
        )
    return rule


class AbstractInterpreter(Interpreter):
    rule_kind = ABSTRACT_EVAL
    transforms_bodies = False  # a higher-order op is one op here, evaluated by its abstract_eval rule
    transform = "eval_shape"
    carries = "abstract shape (it has no data)"

    def __init__(self, level, backend):
        super().__init__(level)
        self.backend = backend

    def process(self, op, args, params):
        out = abstract_rule(op, "eval_shape")(self.backend.xp, *[_aval(a, self) for a in args], **params)
        if op.multiple_results:
            return tuple(AbstractTensor(o, self) for o in out)
        return AbstractTensor(out, self)


def eval_abstract(func, *args, **kwargs):
    """``func(*args, **kwargs)`` evaluated on abstract values: the output pytree with each array replaced
    by a ``ShapeDtype`` (``args`` may hold arrays, ShapeDtypes and other values)."""
    flat, tree = optree.tree_flatten(args, none_is_leaf=False)
    backend = dispatch.backend_of([x for x in flat if not isinstance(x, ShapeDtype)])
    with new_level(AbstractInterpreter, backend) as interp:
        ins = [
            AbstractTensor(x, interp)
            if isinstance(x, ShapeDtype)
            else AbstractTensor(ShapeDtype.of(x), interp)
            if dispatch.backend_of_array(x) is not None
            else x
            for x in flat
        ]
        out = func(*optree.tree_unflatten(tree, ins), **kwargs)
        return optree.tree_map(lambda o: _output_aval(o, interp, backend), out, none_is_leaf=False)


_NUMBER_KINDS = ((bool, None), (int, "integral"), (float, "real floating"), (complex, "complex floating"))


def _output_aval(o, interp, backend):
    """What ``eval_shape`` returns for output leaf ``o``: its ShapeDtype; for a Python number, a weakly
    typed 0-d one of the backend's default dtype of its kind (as JAX's ``eval_shape`` gives)."""
    if isinstance(o, Tensor) and o._interp is interp:
        return o._value
    if isinstance(o, int | float | complex):
        kind = next(k for t, k in _NUMBER_KINDS if isinstance(o, t))
        if kind is None:  # a bool: the dtype of the backend's bool arrays
            return ShapeDtype((), backend.xp.empty((0,), dtype=backend.xp.bool).dtype)
        dtype = backend.xp.__array_namespace_info__().default_dtypes()[kind]
        return ShapeDtype((), dtype, weak_type=True)
    if not hasattr(o, "shape") or not hasattr(o, "dtype"):
        kind = type(o).__name__
        raise TypeError(
            f"eval_shape: func must return arrays, Python numbers or pytrees of them; got a {kind}"
        )
    return ShapeDtype.of(o)


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
    return ShapeDtype.of(o)
