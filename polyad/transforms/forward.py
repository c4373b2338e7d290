"""Forward mode: the jvp level's tracer (a dual number) and its interpreter.

A ``DualTensor`` holds its primal (``_value``) and its tangent (``_aux``). The interpreter computes the
primal output through the levels below, then the op's ``jvp`` rule, which runs through polyad ops, so
enclosing levels differentiate or batch the tangent computation too. A tangent of None is a symbolic zero:
results without a derivative (comparisons, integer results, ops on constants only) are ``DualTensor``s
with a None tangent, so the namespace stays closed under the transform.
"""

from polyad.core import Interpreter, Tensor, all_none, bind, eval_raw, rule_kind, rule_of, split_args
from polyad.ops.fills import zeros_like
from polyad.transforms.lazy_tangents import concrete, know_rules, tangent


class DualTensor(Tensor):
    """A value at a jvp level: ``_value`` is the primal, ``_aux`` the tangent, which may be lazy: code
    outside this interpreter reads it through ``lazy_tangents.concrete(t._aux)`` (jvp's outputs, loop
    bodies', implicit functions')."""

    __slots__ = ()


def linear_jvp(op):
    """The JVP of an op linear in its arguments: the op applied to the tangents.

    ``op.linear`` is True (linear in every array argument jointly) or a tuple of the positions it is
    linear in; arguments at other positions (indices, conditions) pass through as they are.
    """
    positions = None if op.linear is True else frozenset(op.linear)

    def jvp(tangents, out, *primals, **params):
        args = []
        for i, (t, p) in enumerate(zip(tangents, primals)):
            if positions is not None and i not in positions:
                args.append(p)
            elif t is not None:
                args.append(t)
            else:
                args.append(zeros_like(p) if hasattr(p, "shape") else p)
        return bind(op, *args, **params)

    return jvp


def bilinear_jvp(op):
    """The JVP of an op linear in each of its two array arguments: ``op(t1, x2) + op(x1, t2)``."""

    def jvp(tangents, out, x1, x2, **params):
        t1, t2 = tangents
        a = None if t1 is None else bind(op, t1, x2, **params)
        if t2 is None:
            return a
        b = bind(op, x1, t2, **params)
        return b if a is None else a + b

    return jvp


def _derive(op):
    """A JVP from the op's markers: bilinear or linear; None for an op with neither."""
    if op.bilinear:
        return bilinear_jvp(op)
    if op.linear:
        return linear_jvp(op)
    return None


JVP = rule_kind(
    "jvp",
    "jvp(tangents, out, *primals, **params) -> tangent: tangents[i] None means zero (a rule marked "
    "computes_primal is called with out None and returns (out, tangent))",
    derive=_derive,
)


know_rules(JVP)


def jvp_rule(op):
    """The op's JVP rule (registered, or derived from its ``linear``/``bilinear`` marker)."""
    rule = rule_of(op, JVP)
    if rule is None:
        raise NotImplementedError(
            f"forward mode (jvp) is not implemented for op {op.name!r}: it has no JVP rule "
            "(for a custom op, register one with op.register_jvp)"
        )
    return rule


class ForwardInterpreter(Interpreter):
    rule_kind = JVP
    transform = "jvp (forward mode: jvp, jacfwd)"
    carries = "derivative (tangent)"
    differentiates = True

    def constant(self, value):
        """``value`` as a tensor of this level with a zero (None) tangent."""
        return DualTensor(value, self, None)

    def process(self, op, args, params):
        # tangents may be lazy (lazy_tangents.py): computed where a rule reads them, never if none does
        primals, tangents, lower = split_args(self, args)
        constant = op.nondiff or (tangents[0] is None and all_none(tangents))
        rule = None if constant or op.higher_order is None else jvp_rule(op)
        if rule is not None and getattr(rule, "computes_primal", False):
            # a rule that computes the output with its tangent (a loop runs once, not twice)
            out, t = rule(tuple(concrete(t) for t in tangents), None, *primals, **params)
        else:
            out = bind(op, *primals, **params) if lower else eval_raw(op, primals, params)
            # a result without a derivative is still a tensor of this level, with a symbolic zero tangent
            if constant:
                if op.multiple_results:
                    return type(out)(DualTensor(o, self, None) for o in out)
                return DualTensor(out, self, None)
            if op.multiple_results or op.higher_order is not None:
                t = jvp_rule(op)(tuple(concrete(t) for t in tangents), out, *primals, **params)
            else:
                t = tangent(op, jvp_rule(op), tangents, out, primals, params)
        if op.multiple_results:
            return type(out)(DualTensor(o, self, ti) for o, ti in zip(out, t))
        return DualTensor(out, self, t)
