"""The sparsity transform: which inputs each element of every intermediate value depends on, propagated
op by op, so that the Jacobian's non-zero pattern comes out of one evaluation of the function.

A ``PatternTensor`` holds its value (``_value``: the function computes as usual, so shapes, indices and
Python control flow see real values) and its pattern (``_aux``): a SciPy CSR matrix with one row per
element of the value and one column per input element, whose row ``i`` holds the inputs element ``i``
depends on. Each op's ``sparsity`` rule (``sparsity_rules``) gives the op's own dependence of its output
elements on its arguments' elements; the interpreter composes it with the arguments' patterns (a union of
sparse products: the chain rule on patterns). An op without a rule makes every output element depend on
every input element of its array arguments, with a ``SparsityFallbackWarning`` naming the op (once per
op): conservative, never a missed non-zero.

Values computed from the inputs by ops without a derivative (comparisons, ``argmax``) stay tensors of
the level with an empty pattern: they are not constants, so no rule takes their zeros for facts.
"""

import math
import threading
import warnings

import optree

import polyad.xp  # noqa: F401  (every op exists before the tables' rules are attached to them)
from polyad.backends.host import np
from polyad.core import (
    OPS,
    Interpreter,
    Tensor,
    bind,
    eval_raw,
    new_level,
    plain,
    rule_kind,
    rule_of,
    split_args,
)
from polyad.core.tensor import check_lost, reconnect
from polyad.transforms import sparsity_rules as rules
from polyad.transforms.sparsity_rules import ALL, SAME, scipy_sparse

SPARSITY = rule_kind(
    "sparsity",
    "sparsity(traced, out, *values, **params) -> deps: for each positional argument None, SAME, an array "
    "of source element numbers, a sparse (out elements, argument elements) pattern or ALL "
    "(polyad.transforms.sparsity_rules)",
    derive=rules.derive,
)


# the tables' rules, attached to their ops (every op of the namespace exists: polyad.xp is imported)
for _name, _rule in rules.table(OPS).items():
    OPS[_name].register_rule(SPARSITY, _rule)


class SparsityFallbackWarning(UserWarning):
    """``jacobian_sparsity`` met an op without a sparsity rule and assumed that every output element
    depends on every input element of its array arguments (conservative: the pattern may be denser)."""


_WARNED = set()
_WARN_LOCK = threading.Lock()


def _warn_fallback(op):
    with _WARN_LOCK:
        first = op.name not in _WARNED
        _WARNED.add(op.name)
    if first:
        warnings.warn(
            f"jacobian_sparsity: op {op.name!r} has no sparsity rule; every element of its output is taken "
            "to depend on every element of its array arguments (a denser pattern than need be; register a "
            'rule with custom_op(...).register_rule("sparsity", rule))',
            SparsityFallbackWarning,
            stacklevel=5,
        )


class PatternTensor(Tensor):
    """A value at a sparsity level: ``_value`` is the value, ``_aux`` its pattern (CSR, elements x
    inputs)."""

    __slots__ = ()


def empty(rows, n):
    return scipy_sparse().csr_array((rows, n), dtype=np.float32)


def gather(p, src):
    """Rows ``src[i] - 1`` of pattern ``p`` (an empty row where ``src[i]`` is 0)."""
    if not p.shape[0]:
        return empty(len(src), p.shape[1])
    none = src <= 0
    at = src - 1
    at[none] = 0
    ip = p.indptr
    starts = ip[at]
    lengths = ip[at + 1] - starts
    lengths[none] = 0
    indptr = np.empty(len(src) + 1, dtype=ip.dtype)
    indptr[0] = 0
    np.cumsum(lengths, out=indptr[1:])
    pos = np.repeat(starts - indptr[:-1], lengths)
    pos += np.arange(len(pos), dtype=pos.dtype)
    return scipy_sparse().csr_array((p.data[pos], p.indices[pos], indptr), shape=(len(src), p.shape[1]))


def identity(size, start, n):
    """The pattern of ``size`` inputs numbered from ``start`` among ``n``: element ``i`` is input
    ``start + i``."""
    rows = np.arange(size + 1, dtype=np.int32)
    return scipy_sparse().csr_array(
        (np.ones(size, dtype=np.float32), rows[:-1] + start, rows), shape=(size, n)
    )


def everything(p, rows):
    """``rows`` rows, each the union of all of ``p``'s rows."""
    cols = np.unique(p.indices)
    return rules.pattern(np.repeat(np.arange(rows), len(cols)), np.tile(cols, rows), (rows, p.shape[1]))


def compose(deps, patterns, size, n):
    """The pattern of an output of ``size`` elements: the union over arguments of the op's dependence on
    the argument composed with the argument's pattern."""
    acc = None
    for d, p in zip(deps, patterns):
        if d is None or p is None:
            continue
        if d is SAME:
            term = p
        elif d is ALL:
            term = everything(p, size)
        elif isinstance(d, np.ndarray) and d.ndim == 1:
            term = gather(p, d)
        else:  # the op's own pattern: a sparse matrix (a dense 2-D array from a custom rule is made one)
            term = (d if scipy_sparse().issparse(d) else scipy_sparse().csr_array(d)) @ p
            term.sum_duplicates()
        acc = term if acc is None else acc + term
    return empty(size, n) if acc is None else acc


class SparsityInterpreter(Interpreter):
    rule_kind = SPARSITY
    transform = "jacobian_sparsity"
    carries = "dependence on the inputs"
    differentiates = True  # its patterns stand for derivatives: a number leaving one may lose them

    def __init__(self, level, n_inputs):
        super().__init__(level)
        self.n = n_inputs

    def process(self, op, args, params):
        values, patterns, lower = split_args(self, args)
        out = bind(op, *values, **params) if lower else eval_raw(op, values, params)
        rule = rule_of(op, SPARSITY)
        if rule is None:
            _warn_fallback(op)
            rule = rules.every_element
        traced = tuple(p is not None for p in patterns)
        deps = rule(traced, out, *values, **params)
        if not op.multiple_results:
            return PatternTensor(out, self, compose(deps, patterns, math.prod(out.shape), self.n))
        wrapped = [
            PatternTensor(o, self, compose(d, patterns, math.prod(o.shape), self.n))
            for o, d in zip(out, deps)
        ]
        return type(out)(*wrapped) if hasattr(out, "_fields") else type(out)(wrapped)


def dependence(func, inputs, what="jacobian_sparsity"):
    """``func(*inputs)`` run on pattern tensors: ``(tree, leaves)``, the output's pytree structure and,
    per output leaf, its value and its pattern (CSR, elements x input elements, the inputs' elements
    numbered one after the other); a leaf that does not depend on the inputs has an empty pattern.
    ``inputs`` are backend arrays; ``what`` names the call in warnings."""
    sizes = [math.prod(x.shape) for x in inputs]
    n = sum(sizes)
    with new_level(SparsityInterpreter, n) as interp:
        tracers, start = [], 0
        for x, size in zip(inputs, sizes):
            tracers.append(PatternTensor(x, interp, identity(size, start, n)))
            start += size
        out = func(*tracers)
        flat, tree = optree.tree_flatten(out, none_is_leaf=False)
        leaves = []
        for leaf in flat:
            leaf = reconnect(leaf)  # a number float() handed out is its tensor again
            if isinstance(leaf, Tensor) and leaf._interp is interp:
                leaves.append((leaf._value, leaf._aux))
            else:
                leaves.append(
                    (plain(leaf), None if not hasattr(leaf, "shape") else empty(math.prod(leaf.shape), n))
                )
        if interp.numbers:  # float() of a traced value whose number never came back: a lost dependence
            check_lost(interp, what, any(p is not None and p.nnz for _, p in leaves))
        return tree, leaves
