"""The compiler behind ``pa.jit``: passes over a captured ``polyad.graph.Graph``, then code.

``optimize(graph) -> Graph`` (``optimize.py``: dead code, common subexpressions, constants, symbolic
zeros and ones, algebraic simplification), ``fuse(graph, backend) -> Graph`` (``fusion.py``: maximal
element-wise groups become one node each, whose op carries a kernel per device) and
``reuse_buffers(graph, backend) -> Graph`` (``buffers.py``: large element-wise results written into dead
buffers with ``out=``) each return a new graph that computes the same values; ``codegen.py`` turns a graph
into straight-line code (``Graph.compile``); ``compile_bodies`` (``bodies.py``) compiles the bodies of
a graph's loops with the same pipeline. The passes read only the IR (``polyad.graph.ir``) and build
their results with ``Graph.replace``. Formerly ``polyad.compiler``, a name that still works.
"""

from polyad.graph.compiler.bodies import compile_bodies, step_function
from polyad.graph.compiler.buffers import reuse_buffers
from polyad.graph.compiler.fusion import fuse
from polyad.graph.compiler.optimize import optimize

__all__ = ["compile_bodies", "step_function", "fuse", "optimize", "reuse_buffers"]
