"""The element-wise families: ``unary`` and ``binary`` define an element-wise op from its derivative or
its rules, with the family's batching rule and a namespace function. From ``deriv(x, y) = f'(x)`` come
the VJP ``g * conj(f'(x))`` (and its ``ones`` form, which skips the product with an all-ones cotangent:
``polyad.ops.known_ones``) and the JVP ``t * f'(x)``.
"""

from polyad.core.avals import dtype_kind
from polyad.ops.base import broadcast_batch, conj_if_complex, unbroadcast
from polyad.ops.common import ABSTRACT_SAME, define, namespace_function, unary_batch
from polyad.ops.known_ones import Borrowed, with_ones_rule
from polyad.ops.zero_safe import zero_safe_multiply


def times_ones(g, d, x, fresh):
    """``unbroadcast(g * conj(d), x)`` for an all-ones ``g``: ``d`` itself when it is real with ``g``'s shape
    and dtype (``Borrowed`` unless ``fresh``: ``d`` was made by the rule), else the product."""
    if (
        hasattr(d, "shape")
        and d.dtype == g.dtype
        and tuple(d.shape) == tuple(g.shape)
        and dtype_kind(d.dtype) == "f"
    ):
        r = unbroadcast(d, x)
        return Borrowed(d) if r is d and not fresh else r
    return unbroadcast(g * conj_if_complex(d), x)


def _unary_vjp(deriv, singular):
    def vjp(g, y, x):
        if singular:  # a zero cotangent stays zero where f' is infinite (polyad.ops.zero_safe)
            return (zero_safe_multiply(g, conj_if_complex(deriv(x, y))),)
        return (g * conj_if_complex(deriv(x, y)),)

    def vjp_ones(g, y, x):
        d = deriv(x, y)
        return (times_ones(g, d, x, fresh=d is not x and d is not y),)

    return with_ones_rule(vjp, vjp_ones)


def unary(name, deriv=None, *, abstract_eval=ABSTRACT_SAME, singular=False, **rules):
    """A one-array element-wise op. ``deriv(x, y)`` is ``f'(x)`` given input ``x`` and output ``y``; from it
    come the VJP ``g * conj(f'(x))`` and the JVP ``t * f'(x)``. ``singular``: ``f'`` can be infinite at a
    finite input (sqrt at 0, exp on overflow), so the products are ``zero_safe_multiply``: an element whose
    cotangent or tangent is 0 gets 0, not NaN."""
    if deriv is not None:
        if "vjp" not in rules:
            rules["vjp"] = _unary_vjp(deriv, singular)
        if singular:
            rules.setdefault("jvp", lambda ts, y, x: zero_safe_multiply(ts[0], deriv(x, y)))
        rules.setdefault("jvp", lambda ts, y, x: ts[0] * deriv(x, y))
    op = define(name, abstract_eval=abstract_eval, **rules)
    op.register_rule("batch", unary_batch(op))
    return namespace_function(op, arity=1)


def binary(name, *, abstract_eval=ABSTRACT_SAME, **rules):
    """A two-array broadcasting element-wise op (Python scalars allowed on either side)."""
    op = define(name, abstract_eval=abstract_eval, **rules)
    op.register_rule("batch", broadcast_batch(op))
    return namespace_function(op, arity=2)
