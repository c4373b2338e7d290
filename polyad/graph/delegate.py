"""``call_delegate``: a higher-order op that runs a captured, lowered graph as one node. Eagerly it replays
the graph; under ``make_graph`` it is one node; ``eval_shape`` evaluates its shapes; grad, jvp and vmap
run the graph it carries on their own tensors, so each op inside is transformed by its rules."""

from collections.abc import Callable
from typing import Any

from polyad.core import Op, bind
from polyad.graph.graph import Graph
from polyad.transforms.abstract import eval_abstract


def _delegate_kernel(xp, *args, lowered):
    return lowered(*args)


def _delegate_abstract(xp, *avals, lowered):
    return eval_abstract(lowered, *avals)


# transforms run the carried graph on their own tensors: every node is transformed by its rules
delegate_op = Op(
    "call_delegate",
    _delegate_kernel,
    abstract_eval=_delegate_abstract,
    higher_order=lambda *args, lowered: lowered(*args),
)


def call_delegate(lowered: Callable[..., Any], *args: Any) -> Any:
    """Run a captured, lowered graph as one op: eagerly it replays the graph; under ``make_graph`` it is one
    node; ``eval_shape`` evaluates its shapes; grad, jvp and vmap transform the graph it carries.

    Example:
        >>> import numpy as np, polyad as pa
        >>> lowered = pa.make_graph(lambda x: pa.xp.sin(x) * 2, np.zeros(3)).lower("numpy")
        >>> pa.grad(lambda x: pa.xp.sum(pa.call_delegate(lowered, x)))(np.zeros(3))
        array([2., 2., 2.])
    """
    if not isinstance(lowered, Graph):
        raise TypeError(
            f"call_delegate: lowered must be a Graph (pa.make_graph(...).lower()), got {lowered!r}"
        )
    if lowered.out_tree.num_leaves != 1:
        raise ValueError("call_delegate: the graph must have exactly one array output")
    return bind(delegate_op, *args, lowered=lowered)
