"""A custom rule called on an enclosing vmap's values, as an op of its own: ``FWD_CALL`` (a VJP rule's
``fwd``) and ``JVP_CALL`` (a JVP rule), used by ``polyad.custom.derivatives`` when the values a
rule receives are batched by a vmap outside the transform that calls it (``vmap(grad(f))``).

As ops, they reach that vmap, whose batch rule runs the user's rule once on the whole batch (at a new vmap
level) or, when the rule needs one example's values (a SciPy call, ``float`` of a value that differs
between examples), returns ``NotImplemented``: vmap then runs the op once per example, with its
``LoopFallbackWarning``. Other transforms run the rule on their own tensors (the op's body), so an
enclosing ``grad`` differentiates ``fwd`` itself, as JAX does.

A ``fwd``'s residuals are any pytree: the op's outputs are the function's outputs and then the residuals'
arrays; ``Layout`` keeps the rest (the tree, the leaves that are not arrays) from the first run.
"""

import optree

from polyad.control.bodies import function_op
from polyad.core import ConcretizationError, Tensor, bind, new_level, plain
from polyad.core.avals import ShapeDtype, is_array, shape_of
from polyad.ops.base import broadcast_to, expand_dims, move_to_front
from polyad.ops.creation import asarray
from polyad.ops.fills import zeros_like
from polyad.transforms.batching import BatchedTensor, BatchInterpreter


class CustomDerivativeError(TypeError):
    """A custom rule returned something polyad cannot use as a derivative, or a derivative was asked
    that the rules do not give (with respect to a closed-over value; forward mode of a VJP-only
    function)."""


def has_batched(values):
    """Whether a vmap's tensor is among ``values`` at any depth (a value of a transform below a vmap)."""
    for v in values:
        while isinstance(v, Tensor):
            if isinstance(v, BatchedTensor):
                return True
            v = v._value
    return False


class Layout:
    """The residuals' structure, learnt from the first run of ``fwd``: ``tree``, the positions of the
    array leaves, the other leaves, and the outputs' abstract values (for ``pa.jit``'s tracing)."""

    def __init__(self):
        self.tree = self.arrays = self.static = self.avals = None

    def split(self, residuals, where):
        leaves, tree = optree.tree_flatten(residuals, none_is_leaf=False)
        # a Python number may differ between examples (float() of each one's value): it travels as an
        # array, batched like the others (bwd gets a 0-d array)
        leaves = [asarray(r) if isinstance(r, int | float | complex) and not isinstance(r, bool) else r
                  for r in leaves]  # fmt: skip
        arrays = tuple(k for k, r in enumerate(leaves) if is_array(r))
        static = tuple(None if k in arrays else r for k, r in enumerate(leaves))
        if self.tree is None:
            self.tree, self.arrays, self.static = tree, arrays, static
        elif tree != self.tree or arrays != self.arrays or not _same(static, self.static):
            raise CustomDerivativeError(
                f"{where}'s fwd returned residuals that differ between the examples of a vmap in what is not "
                "an array; return what differs as arrays"
            )
        return [leaves[k] for k in arrays]

    def join(self, arrays):
        leaves = list(self.static)
        for k, r in zip(self.arrays, arrays):
            leaves[k] = r
        return optree.tree_unflatten(self.tree, leaves)


def _same(a, b):
    try:
        return all(x is y or bool(x == y) for x, y in zip(a, b))
    except Exception:  # noqa: BLE001  (an object without a plain equality: not known to be the same)
        return False


def _front(o, interp, size):
    if isinstance(o, Tensor) and o._interp is interp:
        return move_to_front(o._value, o._aux)
    return broadcast_to(expand_dims(o, axis=0), (size, *shape_of(o)))


# ------------------------------------------------------------------------------ fwd


def _run_fwd(*values, rules, layout):
    outs, residuals = rules.fwd(list(values))
    out = tuple(outs) + tuple(layout.split(residuals, rules.where))
    if layout.avals is None:
        layout.avals = [ShapeDtype(tuple(shape_of(o)), o.dtype) for o in out]
    return out


def _abstract(xp_, *avals, layout, **params):
    if layout.avals is None:
        raise ConcretizationError("a custom rule that has not run yet cannot be evaluated abstractly")
    device = next((a.device for a in avals if isinstance(a, ShapeDtype)), None)
    return tuple(ShapeDtype(a.shape, a.dtype, device) for a in layout.avals)


def _batch_rule(run):
    def batch(info, dims, *values, **params):
        try:
            with new_level(BatchInterpreter, info.batch_size, info.randomness) as interp:
                wrapped = [
                    v if d is None else BatchedTensor(plain(v), interp, d) for v, d in zip(values, dims)
                ]
                outs = run(*wrapped, **params)
                outs = tuple(_front(o, interp, info.batch_size) for o in outs)
        except CustomDerivativeError:
            raise
        except TypeError:  # a rule that needs one example's values: vmap's per-example loop
            return NotImplemented
        return outs, (0,) * len(outs)

    return batch


FWD_CALL = function_op(
    "custom_derivative_fwd", _run_fwd, abstract_eval=_abstract, batch=_batch_rule(_run_fwd)
)


def call_fwd(rules, values):
    """``(outputs, residuals)`` of ``rules.fwd`` through ``FWD_CALL``."""
    layout = Layout()
    out = bind(FWD_CALL, *values, rules=rules, layout=layout)
    n_out = len(out) - len(layout.arrays)
    return list(out[:n_out]), layout.join(list(out[n_out:]))


# ------------------------------------------------------------------------------ jvp


def _run_jvp(*args, rules, n_values):
    values, tangents = args[:n_values], args[n_values:]
    outs, touts = rules.jvp(list(values), list(tangents))
    return tuple(outs) + tuple(zeros_like(o) if t is None else t for o, t in zip(outs, touts))


def _jvp_abstract(xp_, *avals, rules, n_values):
    device = next((a.device for a in avals if isinstance(a, ShapeDtype)), None)
    outs = [ShapeDtype(a.shape, a.dtype, device) for a in rules.out_avals]
    return tuple(outs + outs)


JVP_CALL = function_op(
    "custom_derivative_jvp", _run_jvp, abstract_eval=_jvp_abstract, batch=_batch_rule(_run_jvp)
)


def call_jvp(rules, values, tangents):
    """``(outputs, output tangents)`` of ``rules.jvp`` through ``JVP_CALL`` (zero tangents as zeros)."""
    n = rules.n_args
    ts = [zeros_like(v) if t is None else t for v, t in zip(values[:n], tangents)]
    out = bind(JVP_CALL, *values, *ts, rules=rules, n_values=len(values))
    half = len(out) // 2
    return list(out[:half]), list(out[half:])
