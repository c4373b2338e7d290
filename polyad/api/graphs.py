"""make_graph: the public entry to graph capture. It sits above both ways of capturing, so neither
imports the other: below the transforms (``polyad.graph``) or at the top of the dispatcher
(``polyad.graph.predispatch``)."""

from collections.abc import Callable
from typing import Any

from polyad.api._arguments import check_callable, flatten, is_array, leaf_name
from polyad.graph.capture import capture_graph
from polyad.graph.delegate import call_delegate
from polyad.graph.predispatch import capture_pre_dispatch_graph


def make_graph(func: Callable[..., Any], *args: Any, pre_dispatch: bool = False) -> Any:
    """Capture what ``func(*args)`` computes as a ``Graph``.

    Args:
        func: a function of arrays; it may apply transforms inside (``pa.grad(f)``).
        *args: example inputs (pytrees of arrays).
        pre_dispatch: False: capture below the transforms (the graph holds plain ops, e.g. the backward
            pass of a grad). True: capture at the top of the dispatcher, recording transforms as
            transform nodes that re-run eagerly on replay.

    Returns:
        A callable, printable ``Graph``. It holds one run of ``func``: a Python ``if``/``while`` on a
        captured value is replayed as it went for ``args`` (a ``SpecializedGraphWarning`` names the line;
        ``xp.where``, ``pa.cond`` and ``pa.while_loop`` keep the choice in the graph). With
        ``pre_dispatch=True``, a while loop or a ``custom_root``/``custom_linear_solve`` solve raises
        ``NotImplementedError`` (its steps would be recorded as this run's unrolling).

    Example:
        >>> import numpy as np, polyad as pa
        >>> g = pa.make_graph(pa.grad(lambda x: pa.xp.sum(pa.xp.sin(x))), np.zeros(2))
        >>> g(np.array([0.0, np.pi]))
        array([ 1., -1.])
    """
    check_callable(func, "make_graph")
    if not isinstance(pre_dispatch, bool):
        raise TypeError(f"make_graph(pre_dispatch={pre_dispatch!r}): pre_dispatch must be True or False")
    flat, tree = flatten(args)
    for i, x in enumerate(flat):
        if not is_array(x):
            raise TypeError(
                f"make_graph: {leaf_name(tree, i, '', tuple(range(len(args))))} is a {type(x).__name__}; "
                "the inputs of a graph are arrays (pa.xp.asarray(value)): close over other values in func"
            )
    if pre_dispatch:
        return capture_pre_dispatch_graph(func, *args)
    return capture_graph(func, *args)


__all__ = ["call_delegate", "make_graph"]
