"""The IR and its captures: ``Graph`` (``graph.py``) built from ``Var``/``Const``/``Node`` (``ir.py``);
concrete capture below the transforms (``capture.py``, ``make_graph``); abstract tracing for ``pa.jit``
(``tracing.py``); pre-dispatch capture at the top of the dispatcher (``predispatch.py``); and
``call_delegate``, a graph run as one op (``delegate.py``). ``polyad.graph.compiler`` turns graphs into code.
"""

from polyad.graph.delegate import call_delegate
from polyad.graph.graph import Graph
from polyad.graph.ir import Const, Node, Var

__all__ = ["Const", "Graph", "Node", "Var", "call_delegate"]
