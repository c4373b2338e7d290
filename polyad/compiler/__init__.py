"""The compiler behind ``pa.jit``: passes over a captured ``polyad.graph.Graph``.

``optimize(graph) -> Graph`` (``optimize.py``: dead code, common subexpressions, constants, symbolic
zeros and ones, algebraic simplification, buffer reuse) and ``fuse(graph, backend) -> Graph``
(``fusion.py``: maximal elementwise groups become one node each, whose op carries a kernel per device)
both return a new graph that computes the same values; ``Graph.compile`` turns the result into
straight-line code.
"""

from polyad.compiler.buffers import reuse_buffers
from polyad.compiler.fusion import fuse
from polyad.compiler.optimize import optimize

__all__ = ["fuse", "optimize", "reuse_buffers"]
