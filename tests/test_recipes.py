"""ARCHITECTURE.md's recipe "add a transform", followed to the letter: this file is the one new file (a
tracer, an interpreter, a rule kind with its derived rule, a public function with its pre-dispatch
recording), and the tests run the op table and every extension point through it.

The toy transform, ``count_ops(f, counts)(*args)``, returns ``f(*args)`` and adds to the Counter
``counts`` the ops applied to values that depend on the arguments. Its reference is independent: the
nodes ``make_graph`` records for the same function. (The backend and device-type recipes are followed
in test_backend_contract.py.)
"""

import collections
import functools

import numpy as np
import optree
import pytest
from helpers import assert_close, op_table_array_cases, sample_as_function

import polyad as pa
from polyad import core, library
from polyad.graph.predispatch import recorded
from polyad.testing.op_table import Sampler

# ------------------------------------------------------------------------------ the new transform

# The rule kind: one fixed signature; ops without a rule of their own get the derived one (the op
# applied to the values underneath), so every op in the registry works at once.
COUNT = core.rule_kind(
    "count",
    "count(*values, **params) -> out: the op's result on the values underneath",
    derive=lambda op: functools.partial(core.bind, op),
)


class CountTensor(core.Tensor):
    """A value at a counting level: ``_value`` is the value underneath; no per-transform data."""

    __slots__ = ()


class CountInterpreter(core.Interpreter):
    rule_kind = COUNT  # a higher-order op with a registered "count" rule is counted as one op

    def __init__(self, level):
        super().__init__(level)
        self.counts = collections.Counter()

    def process(self, op, args, params):
        values, _, _ = core.split_args(self, args)
        self.counts[op.name] += 1
        out = core.rule_of(op, COUNT)(*values, **params)
        if op.multiple_results:
            wrapped = [CountTensor(o, self) for o in out]
            return type(out)(*wrapped) if hasattr(out, "_fields") else type(out)(wrapped)
        return CountTensor(out, self)


@recorded("count_ops")
def count_ops(func, counts):
    """``func``, adding to the Counter ``counts`` how often each op was applied to a traced value."""

    def counted(*args):
        flat, tree = optree.tree_flatten(args, none_is_leaf=False)
        with core.new_level(CountInterpreter) as interp:
            out = func(*optree.tree_unflatten(tree, [CountTensor(x, interp) for x in flat]))
            out = optree.tree_map(
                lambda o: o._value if isinstance(o, core.Tensor) and o._interp is interp else core.plain(o),
                out,
            )
        counts.update(interp.counts)
        return out

    return counted


def counted(func, *args):
    """``(func(*args), {op name: applications})`` through ``count_ops``."""
    counts = collections.Counter()
    out = count_ops(func, counts)(*args)
    return out, dict(counts)


# ------------------------------------------------------------------------------ the op table through it


@pytest.mark.parametrize("row,i", op_table_array_cases())
def test_op_table_through_the_new_transform(row, i):
    if row.skip_reason("value"):
        pytest.xfail(row.skip_reason("value"))
    fn, xs, sample = sample_as_function(row, i)
    f = row.function()
    out, counts = counted(fn, *xs)
    assert_close(out, f(*sample.args, **sample.kwargs), rtol=row.rtol, atol=row.atol)
    graph = pa.make_graph(fn, *xs)
    assert counts == dict(collections.Counter(n.op.name for n in graph.nodes))


# ------------------------------------------------------------------------------ extension points


def _sample():
    return Sampler().float(4)


def test_custom_op_registers_a_rule_of_the_new_kind():
    @pa.custom_op("recipes::twice", mutates_args=())
    def twice(x):
        return x * 2.0

    seen = []
    twice.register_rule("count", lambda x: seen.append(tuple(x.shape)) or twice(x))
    x = _sample()
    out, counts = counted(lambda v: pa.xp.sin(twice(v)), x)
    assert_close(out, pa.xp.sin(x * 2.0))
    assert seen == [(4,)] and counts == {"recipes::twice": 1, "sin": 1}
    with pytest.raises(ValueError, match="unknown rule kind 'cuont'"):
        twice.register_rule("cuont", lambda x: x)


def test_override_swaps_the_new_kind_in_a_block():
    calls = []

    def rule(x):
        calls.append("cos")
        return core.bind(core.OPS["cos"], x)

    x = _sample()
    with library.override(pa.xp.cos, "count", rule):
        out, _ = counted(pa.xp.cos, x)
    counted(pa.xp.cos, x)  # restored: the derived rule again
    assert calls == ["cos"]
    assert_close(out, pa.xp.cos(x))
    assert "count" not in core.OPS["cos"].rules


def test_higher_order_op_runs_its_body_under_the_new_transform():
    x = _sample()
    lowered = pa.make_graph(lambda v: pa.xp.exp(v) * 3.0, x).lower()
    out, counts = counted(lambda v: pa.call_delegate(lowered, v), x)
    assert_close(out, pa.xp.exp(x) * 3.0)
    assert counts == {"exp": 1, "multiply": 1}  # the body's ops, not one call_delegate


def test_higher_order_op_brings_its_own_rules():
    # ARCHITECTURE.md's recipe "a higher-order op": an Op with a body (``higher_order``) and a kernel; the
    # transforms it brings a rule for use the rule, the others run its body on their own tensors.
    from polyad.transforms.abstract import eval_abstract

    def twice_kernel(xp, x, *, fn):
        return fn(fn(x))

    seen = []

    def twice_vjp(g, out, x, *, fn):
        seen.append("vjp")
        _, pullback = pa.vjp(lambda v: fn(fn(v)), x)  # the rule differentiates the body itself
        return pullback(g)

    twice = core.Op(
        "recipes::apply_twice",
        twice_kernel,
        register=False,
        higher_order=lambda x, *, fn: fn(fn(x)),
        abstract_eval=lambda xp, x, *, fn: eval_abstract(lambda v: fn(fn(v)), x),
        vjp=twice_vjp,
        count=lambda x, *, fn: core.bind(twice, x, fn=fn),
    )
    x = _sample()
    f = lambda v: pa.xp.sum(twice.bind(v, fn=pa.xp.sin))  # noqa: E731
    expected_grad = pa.xp.cos(pa.xp.sin(x)) * pa.xp.cos(x)
    assert_close(pa.grad(f)(x), expected_grad)
    assert seen == ["vjp"]  # reverse mode used the op's rule
    # forward mode ran the body
    assert_close(pa.jvp(f, (x,), (pa.xp.ones_like(x),))[1], pa.xp.sum(expected_grad))
    _, counts = counted(f, x)
    assert counts == {"recipes::apply_twice": 1, "sum": 1}  # the count rule: one op, its body unseen
    assert pa.eval_shape(f, x).shape == ()


def test_new_transform_composes_with_grad_vmap_and_pre_dispatch():
    x = _sample()

    def f(v):
        return pa.xp.sum(pa.xp.sin(v) ** 2)

    g, counts = counted(pa.grad(f), x)
    assert_close(g, 2 * np.sin(x) * np.cos(x))
    assert counts["sin"] == 1 and counts["cos"] == 1  # the forward pass and the backward pass
    seen = collections.Counter()
    assert_close(pa.grad(count_ops(f, seen))(x), 2 * np.sin(x) * np.cos(x))
    assert seen["sin"] == 1
    xs = np.stack([x, 2 * x])
    assert_close(pa.vmap(count_ops(f, seen))(xs), np.sum(np.sin(xs) ** 2, axis=1))

    replays = collections.Counter()
    graph = pa.make_graph(count_ops(f, replays), x, pre_dispatch=True)
    assert "count_ops" in repr(graph)
    assert_close(graph(2 * x), np.sum(np.sin(2 * x) ** 2))
    assert replays["sin"] == 2  # once captured, once replayed
