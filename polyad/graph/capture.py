"""Concrete capture (``make_graph``): a level pushed below every transform records each plain op that
reaches it as a ``Node``, running its kernel too (tensors hold concrete values), so Python control flow on
values works and the graph records the path taken (a ``SpecializedGraphWarning`` says where: the graph
replays that path for every input). Transforms inside the function have already turned
into plain ops by then: the graph of ``make_graph(pa.grad(f), x)`` holds the backward pass as ordinary ops.
"""

import warnings

import optree

import polyad.core.dispatch as dispatch
from polyad.core import FreshTensor, Interpreter, Tensor, bind, new_level
from polyad.graph.graph import Graph
from polyad.graph.ir import Const, Node, Var


class SpecializedGraphWarning(UserWarning):
    """A captured value became a Python bool or int (an ``if``, a ``while``, a count) while
    ``make_graph`` captured: the graph holds the outcome for the example inputs and replays it for every
    input. Keep the choice in the graph (``xp.where``, ``pa.cond``, ``pa.while_loop``) or capture again
    for inputs that take another path."""


class GraphTensor(Tensor):
    """A value being captured: ``_value`` is the concrete array, ``_aux`` its variable number."""

    __slots__ = ()

    def _scalar(self, what):
        if what in _SPECIALIZING:  # (float() is not: a number that comes back is the value again)
            warnings.warn(
                SpecializedGraphWarning(
                    f"make_graph: {what}() of a captured value: the graph holds this input's outcome (the "
                    "branch taken, the count) and replays it for every input; use xp.where, pa.cond or "
                    "pa.while_loop to keep the choice in the graph"
                ),
                stacklevel=3,  # the user's line (bool(t), or the `if t:` that called __bool__)
            )
        return super()._scalar(what)


_SPECIALIZING = ("bool", "int", "index")


class GraphInterpreter(Interpreter):
    transforms_bodies = False  # a higher-order op is recorded as one node
    transform = "make_graph"
    carries = "place in the captured graph"

    def __init__(self, level):
        super().__init__(level)
        self.nodes = []
        self.consts = []
        self._const_ids = {}
        self.next_id = 0

    def new_var(self, value):
        v = Var(self.next_id, value.shape, value.dtype)
        self.next_id += 1
        return GraphTensor(value, self, v)

    def ref(self, a):
        """``(value, reference)`` of an op's argument ``a``: this level's tensor gives its value and Var; a
        backend array (closed over, or made while capturing) its ``Const``; a plain tensor its array's;
        a Python value itself; a tensor of an enclosing transform what ``enclosing`` says."""
        if type(a) is FreshTensor:  # an array made while capturing: a constant of the graph
            return self.const_value(a._value), self.const(a._value)
        if isinstance(a, Tensor):
            if a._interp is self:
                return a._value, a._aux
            if a._interp is None:  # a plain tensor closed over: its array is a constant
                return self.ref(a._value)
            return self.enclosing(a)
        if dispatch.backend_of_array(a) is not None:
            return self.closed_over(a)
        return a, a

    def closed_over(self, array):
        """``(value, reference)`` of a backend array the function closes over: here a constant of the
        graph (pa.jit's tracing makes it an input read at each call instead)."""
        return self.const_value(array), self.const(array)

    def enclosing(self, a):
        """A tensor of an enclosing transform reached the capture: refused (make_graph captures outside
        transforms; pa.jit's tracing lifts it instead)."""
        raise RuntimeError(
            "make_graph: a tensor of an enclosing transform reached the capture; call make_graph "
            "outside other transforms"
        )

    def const_value(self, array):
        """What the capture computes on for a constant array: the array itself."""
        return array

    def const(self, array):
        """The ``Const`` of a backend array the function closes over (one per array)."""
        key = id(array)
        if key not in self._const_ids:
            self._const_ids[key] = Const(len(self.consts), array)
            self.consts.append(array)
        return self._const_ids[key]

    def evaluate(self, op, values, params):
        """The op's outputs on the inputs' values: here by running it on the concrete arrays."""
        return bind(op, *values, **params)

    def process(self, op, args, params):
        values, refs = zip(*(self.ref(a) for a in args)) if args else ((), ())
        out = self.evaluate(op, list(values), params)
        if op.multiple_results:
            wrapped = [self.new_var(o) for o in out]
            self.nodes.append(Node(op, list(refs), params, [w._aux for w in wrapped]))
            return type(out)(wrapped) if not hasattr(out, "_fields") else type(out)(*wrapped)
        w = self.new_var(out)
        self.nodes.append(Node(op, list(refs), params, [w._aux]))
        return w


def capture_graph(func, *args):
    """``make_graph(func, *args)``: run ``func`` on ``args`` at a capture level pushed below every
    transform; returns the ``Graph`` of the plain ops that reached it."""
    flat, in_tree = optree.tree_flatten(args, none_is_leaf=False)
    with new_level(GraphInterpreter) as interp:
        ins = [interp.new_var(x) for x in flat]
        out = func(*optree.tree_unflatten(in_tree, ins))
        out_flat, out_tree = optree.tree_flatten(out, none_is_leaf=False)
        outputs = [interp.ref(o)[1] for o in out_flat]
    return Graph([t._aux for t in ins], in_tree, interp.nodes, outputs, out_tree, interp.consts)
