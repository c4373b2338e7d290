"""Lazy tangents for eager forward mode (``jvp``, ``jacfwd``, the forward half of ``hessian``): a tangent
is computed when something reads it, and a tangent nothing reads is never computed.

Eager forward mode used to compute every op's tangent with its primal. Two things went to waste, most in
``jacfwd`` and ``hessian``, where a tangent is a whole batch of them (256 x 256 where the primal is 256):
tangents no one reads (the loss's and those of the last steps before it: forward-over-reverse only reads
the gradient's), and one pass over the batch per element-wise op, where the product of the ops' factors
could be formed on the (small) primals first. So a tangent at the jvp level (``DualTensor._aux``) may be:

- ``Scaled``: ``sum(coefficient_i * base_i)``, where each base is a computed tangent and each coefficient
  a value of the primal's shape (or a number, or one). An element-wise op whose tangent is its inputs'
  tangents times factors (a unary op's ``f'(x)``, ``add``, ``subtract``, ``multiply``, ``divide``,
  ``negative``, ``positive``, with no broadcasting of a tangent) multiplies coefficients, not tangents:
  the chain ``exp -> add -> log`` over a batch of tangents of ``z`` is ``(e / s) * t_z``, one pass when
  read, none when not;
- ``Deferred``: an op's JVP rule and its arguments, run when the tangent is read. Linear and bilinear ops
  (``sum``, ``reshape``, ``matmul``...) defer their rule; a chain of deferred rules is at most
  ``MAX_DEPTH`` long (the next one runs at once), so what they keep alive stays bounded;
- anything else: the tangent itself (other ops' rules run at once, on concrete tangents).

``concrete(t)`` computes a lazy tangent, once (the result is kept for the next reader). The forward
interpreter calls it where a rule needs its inputs' tangents; ``jvp`` and loop bodies call it on their
outputs. Values are those of the eager rules up to the order of the products (a product of factors
rounds differently from a product of products: ulps, as any reassociation).
"""

import math

from polyad.core import OPS, Tensor, rule_of
from polyad.ops.zero_safe import zero_safe_multiply

MAX_DEPTH = 8  # deferred rules in a chain before the next one runs at once (bounds what they keep alive)
MAX_TERMS = 4  # terms of a Scaled tangent beyond which it is computed (a sum of many tangents)
_UNSET = object()


class Scaled:
    """A tangent ``sum(coefficient * base)`` over ``terms`` ``((base, coefficient or None for one, safe),
    ...)``; ``safe``: a factor of the coefficient came from a zero-safe rule (``polyad.ops.zero_safe``), so
    the product is zero-safe too: where the base is 0 the term is 0, whatever the coefficient."""

    __slots__ = ("terms", "value")

    def __init__(self, terms):
        self.terms = terms
        self.value = _UNSET


class Deferred:
    """A tangent to compute by ``rule(tangents, out, *primals, **params)`` when it is read."""

    __slots__ = ("rule", "tangents", "out", "primals", "params", "depth", "value")

    def __init__(self, rule, tangents, out, primals, params, depth):
        self.rule, self.tangents, self.out, self.primals, self.params = rule, tangents, out, primals, params
        self.depth = depth
        self.value = _UNSET


def concrete(t):
    """The tangent ``t`` stands for: a lazy one computed (once), anything else as it is."""
    cls = type(t)
    if cls is Scaled:
        if t.value is _UNSET:
            total = None
            for base, coef, safe in t.terms:
                term = base if coef is None else zero_safe_multiply(base, coef) if safe else base * coef
                total = term if total is None else total + term
            t.value, t.terms = total, ()
        return t.value
    if cls is Deferred:
        if t.value is _UNSET:
            tangents = tuple(concrete(x) for x in t.tangents)
            out = None
            if any(x is not None for x in tangents):
                out = t.rule(tangents, t.out, *t.primals, **t.params)
            t.value = out
            t.rule = t.tangents = t.out = t.primals = t.params = None  # let go of what it kept
        return t.value
    return t


def _frozen(x):
    """``x`` as it is now: a tensor object can become another value later (an in-place write, ``_become``;
    a closed-over value standing in for another while a loop body runs), so a lazy tangent keeps a new
    object with its present fields, never the object itself (eager code read its value at once)."""
    if not isinstance(x, Tensor):
        return x
    snapshot = object.__new__(type(x))
    snapshot._value, snapshot._interp, snapshot._aux, snapshot._alias = x._value, x._interp, x._aux, None
    return snapshot


def _depth(t):
    return t.depth if type(t) is Deferred and t.value is _UNSET else 0


# ------------------------------------------------------------------------------ element-wise factors


def _one(y, a, b=None):
    return None


def _minus_one(y, a, b=None):
    return -1


# op name -> per argument, ``(factor, safe)``: its factor ``f(y, a, b)`` (None: one) and whether the rule
# multiplies by it zero-safely (``polyad.ops.zero_safe``: multiply's and divide's rules do); used only
# while the op's JVP rule is the one these describe (``_binary_factors`` compares the rule itself), so a
# rule registered anew is obeyed
_FACTORS = {
    "add": ((_one, False), (_one, False)),
    "subtract": ((_one, False), (_minus_one, False)),
    "multiply": ((lambda y, a, b: b, True), (lambda y, a, b: a, True)),
    "divide": ((lambda y, a, b: 1 / b, True), (lambda y, a, b: -(y / b), True)),
    "negative": ((_minus_one, False),),
    "positive": ((_one, False),),
}
_RULES = {}  # id of the JVP rule the factors describe -> (that rule, the factors)


def know_rules(kind):
    """Note the JVP rules (of rule kind ``kind``) that ``_FACTORS`` describe, as the ops have them now
    (``forward.py`` calls this once its kind exists): a rule registered later is not one of them."""
    for name, factors in _FACTORS.items():
        rule = rule_of(OPS[name], kind)
        _RULES[id(rule)] = (rule, factors)


def _binary_factors(rule):
    """The per-argument factors of an op's tangent if its JVP ``rule`` is one ``_FACTORS`` describes."""
    known = _RULES.get(id(rule))
    return known[1] if known is not None and known[0] is rule else None


def _times(c, d, safe):
    """The coefficient ``c`` times the factor ``d`` (None: one); zero-safe where the rule's product is: a
    coefficient 0 stays 0 where ``d`` is infinite, as the tangent it multiplies did eagerly."""
    if c is None:
        return d
    if d is None:
        return c
    if not safe or (isinstance(d, int | float) and math.isfinite(d)):
        return c * d
    if isinstance(c, int | float | complex):
        return c * d if c != 0 else 0
    return zero_safe_multiply(c, d)


def _plus(c, d):
    if c is None and d is None:
        return 2
    if c is None:
        return d + 1
    if d is None:
        return c + 1
    return c + d


def tangent(op, rule, tangents, out, primals, params):
    """The tangent of ``op``'s output ``out``, as lazy as it can be: scaled input tangents for an
    element-wise product by factors, a deferred rule for a linear or bilinear op, else the rule's result
    now (on concrete tangents)."""
    scale = getattr(rule, "scale", None)
    if scale is not None and not params:  # a unary op of the element-wise family: t * f'(x), same shape
        return _scaled(tangents[0], scale(primals[0], out), rule.singular)
    factors = _binary_factors(rule) if not params else None
    if factors is not None and len(factors) == len(tangents) and hasattr(out, "shape"):
        lazy = _combined(tangents, primals, factors, out)
        if lazy is not _UNSET:
            return lazy
    if op.linear or op.bilinear:
        depth = 1 + max(_depth(t) for t in tangents)
        if depth <= MAX_DEPTH:
            frozen = tuple(_frozen(p) for p in primals)
            return Deferred(rule, tuple(_frozen(t) for t in tangents), _frozen(out), frozen, params, depth)
    return rule(tuple(concrete(t) for t in tangents), out, *primals, **params)


def _terms(t):
    """The terms ``(base, coefficient, safe)`` of tangent ``t`` (a computed one: itself, times one)."""
    if type(t) is Scaled and t.value is _UNSET:
        return t.terms
    return ((_frozen(concrete(t)), None, False),)


def _scaled(t, coef, safe):
    """``t`` times ``coef`` (a value of ``t``'s shape), kept lazy."""
    if type(t) is Deferred:
        t = concrete(t)
    if t is None:
        return None
    coef = _frozen(coef)
    return Scaled(tuple((base, _times(c, coef, safe), s or safe) for base, c, s in _terms(t)))


def _combined(tangents, primals, factors, out):
    """The lazy tangent ``sum(factor_i * t_i)`` of an element-wise op, or _UNSET where a tangent is
    broadcast (the rule does that) or the terms would be too many."""
    shape = out.shape
    if len(tangents) == 1:
        k = 0
    elif tangents[0] is None or tangents[1] is None:  # the common case, an array and a constant
        k = 0 if tangents[1] is None else 1
    else:
        k = -1
    if k >= 0:
        p = primals[k]
        if getattr(p, "shape", None) != shape:
            return _UNSET
        factor, safe = factors[k]
        coef = factor(out, *primals)
        return tangents[k] if coef is None else _scaled(tangents[k], coef, safe)
    terms = {}
    for t, p, (factor, safe) in zip(tangents, primals, factors):
        if t is None:
            continue
        if getattr(p, "shape", None) != shape:
            return _UNSET  # a broadcast tangent: the rule broadcasts it
        if type(t) is Deferred:
            t = concrete(t)
            if t is None:
                continue
        coef = _frozen(factor(out, *primals))
        for base, c, s in _terms(t):
            c, s = _times(c, coef, safe), s or safe
            key = (id(base._value), id(base._interp), id(base._aux)) if isinstance(base, Tensor) else id(base)
            if key in terms:
                _, c0, s0 = terms[key]
                c, s = _plus(c0, c), s or s0
            terms[key] = (base, c, s)
    if len(terms) > MAX_TERMS:
        return _UNSET
    return Scaled(tuple(terms.values())) if terms else None


__all__ = ["MAX_DEPTH", "MAX_TERMS", "Deferred", "Scaled", "concrete", "know_rules", "tangent"]
