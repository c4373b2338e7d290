"""Symbolic ones: what reverse mode knows when a cotangent is all ones (the seed of a scalar loss,
``sum``'s broadcast of it, ``add`` passing it on). An op's VJP rule may then carry a ``ones`` attribute
(``with_ones_rule``), a rule of the same signature called instead of it for such a cotangent, which skips
the product with the ones. What it hands back may be marked: ``KnownOnes`` (all ones again: the next rule
may skip too) or ``Borrowed`` (an array that is not the rule's own, a primal: copied if it reaches the
caller). A rule replaced by ``override`` or ``register_rule`` has no ``ones`` attribute, so the override is
what runs. ``polyad.transforms.reverse`` reads the marks.
"""

from typing import NamedTuple


class KnownOnes(NamedTuple):
    """A cotangent, from a ``vjp.ones`` rule, that is all ones."""

    value: object


class Borrowed(NamedTuple):
    """A cotangent, from a ``vjp.ones`` rule, that is a primal itself (not a new array)."""

    value: object


def with_ones_rule(vjp, ones):
    """``vjp`` with ``ones`` attached: the rule reverse mode calls when the cotangent is all ones."""
    vjp.ones = ones
    return vjp


def passes_ones(r, g):
    """``r``, the cotangent handed on from an all-ones ``g``, marked all ones when it is ``g`` itself."""
    return KnownOnes(r) if r is g else r
