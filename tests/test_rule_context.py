"""What the reverse interpreter tells a rule that asks (``takes_context``): captured, last use,
transformed, through ``RuleContext``, so that no rule reads the level stack (issue 37)."""

import pathlib

import numpy as np
from helpers import assert_close

import polyad as pa
from polyad import core


def _recording_sin(contexts):
    """``sin`` as a higher-order op whose VJP keeps its own residual (the input) and records the context
    its forward pass and its rule were handed."""

    def forward(x, *, context):
        contexts.append(("forward", context))
        return core.bind(op, x), x

    def vjp(g, out, x, *, residuals, context):
        contexts.append(("vjp", context))
        return (g * pa.xp.cos(residuals),)

    vjp.forward = forward
    vjp.takes_context = True
    op = core.Op(
        "tests::recording_sin",
        lambda xp, x: xp.sin(x),
        register=False,
        higher_order=pa.xp.sin,
        abstract_eval=lambda xp, x: x,  # sin keeps the shape and the (floating) dtype
        vjp=vjp,
    )
    return lambda v: pa.xp.sum(op.bind(v))


def test_grad_hands_the_rule_its_context():
    contexts = []
    f = _recording_sin(contexts)
    x = pa.xp.asarray(np.linspace(0.1, 1.0, 5))
    assert_close(pa.grad(f)(x), np.cos(np.linspace(0.1, 1.0, 5)))  # the analytic derivative
    (kind_f, fwd), (kind_b, bwd) = contexts
    assert (kind_f, kind_b) == ("forward", "vjp")
    assert not fwd.captured and not fwd.last_use and fwd.transformed  # recorded at the grad level
    assert bwd.last_use and not bwd.transformed  # grad's own tape, consumed with nothing around


def test_vjp_fn_called_twice_is_not_a_last_use():
    contexts = []
    x = pa.xp.asarray(np.linspace(0.1, 1.0, 4))
    y, vjp_fn = pa.vjp(_recording_sin(contexts), x)
    for _ in range(2):
        assert_close(vjp_fn(2 * pa.xp.ones_like(y))[0], 2 * np.cos(np.linspace(0.1, 1.0, 4)))
    assert [c.last_use for kind, c in contexts if kind == "vjp"] == [False, False]


def test_grad_under_jit_and_under_grad():
    contexts = []
    f = _recording_sin(contexts)
    x = pa.xp.asarray(np.linspace(0.1, 1.0, 3))
    assert_close(pa.jit(pa.grad(f))(x), np.cos(np.linspace(0.1, 1.0, 3)))
    assert [c.captured for kind, c in contexts if kind == "forward"] == [True]
    contexts.clear()
    # grad of grad: the inner backward pass runs recorded by the outer grad, so it must keep its values
    second = pa.grad(lambda v: pa.xp.sum(pa.grad(f)(v)))(x)
    assert_close(second, -np.sin(np.linspace(0.1, 1.0, 3)))
    inner = [c for kind, c in contexts if kind == "vjp"]
    assert inner and all(c.transformed for c in inner)


def test_control_rules_read_no_level_stack():
    # the rules are told (RuleContext); control flow and the solvers never walk the interpreters
    root = pathlib.Path(pa.__file__).parent
    readers = [
        str(path.relative_to(root))
        for folder in ("control", "integrate")
        for path in sorted((root / folder).rglob("*.py"))
        if "active_interpreters" in path.read_text()
    ]
    assert readers == []
