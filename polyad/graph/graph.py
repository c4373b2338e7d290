"""``Graph``: a captured computation, printable, replayable on any backend, transformable, compilable."""

from typing import Any

import optree

import polyad.core.dispatch as dispatch
from polyad.core import bind
from polyad.core.avals import bottom
from polyad.graph.compiler.codegen import compile_graph
from polyad.graph.ir import Const, Var, backend_arg, param_to_backend, signature_error, to_backend


class Graph:
    """A captured computation. ``print(graph)`` shows one line per node; ``graph.nodes`` are data;
    ``graph(*args)`` replays it on new inputs (any backend; constants move to the inputs' backend).

    Replaying binds each op again, so a graph can itself be transformed: ``pa.grad(graph)(x)``.
    """

    def __init__(self, inputs, in_tree, nodes, outputs, out_tree, consts):
        self.inputs = inputs
        self.in_tree = in_tree
        self.nodes = nodes
        self.outputs = outputs
        self.out_tree = out_tree
        self.consts = consts

    def replace(self, *, nodes=None, outputs=None, consts=None):
        """A graph of the same inputs and output structure with ``nodes``, ``outputs`` and ``consts``
        replaced where given: what the compiler's passes build (they read only ``polyad.graph.ir``)."""
        return Graph(
            self.inputs,
            self.in_tree,
            self.nodes if nodes is None else nodes,
            self.outputs if outputs is None else outputs,
            self.out_tree,
            self.consts if consts is None else consts,
        )

    def __repr__(self):
        lines = [f"graph({', '.join(f'{v!r}: {v.shape} {v.dtype}' for v in self.inputs)}):"]
        for i, c in enumerate(self.consts):
            lines.append(f"  c{i} = const  # {tuple(c.shape)} {c.dtype}")
        lines += [f"  {n!r}" for n in self.nodes]
        lines.append(f"  return {', '.join(repr(o) for o in self.outputs)}")
        return "\n".join(lines)

    def __call__(self, *args):
        flat, tree = optree.tree_flatten(args, none_is_leaf=False)
        error = signature_error("graph", self.inputs, self.in_tree, flat, tree)
        if error is not None:
            raise error
        return self.run(flat, {})

    def run(self, flat, env):
        """Replay the nodes on ``flat`` inputs; ``env`` may hold values of free variables already. A node
        with a ``run`` method (a transform node of a pre-dispatch graph) runs itself."""
        target = dispatch.backend_of([bottom(x) for x in flat])
        env.update({v.id: x for v, x in zip(self.inputs, flat)})
        consts = [
            to_backend(c, target) if dispatch.backend_of_array(c) is not None else c for c in self.consts
        ]

        def read(ref):
            if isinstance(ref, Var):
                return env[ref.id]
            if isinstance(ref, Const):
                return consts[ref.index]
            return ref

        for node in self.nodes:
            run = getattr(node, "run", None)
            if run is not None:
                outs = run(read)
            else:
                params = {k: param_to_backend(v, target) for k, v in node.params.items()}
                out = bind(node.op, *[read(r) for r in node.inputs], **params)
                outs = out if node.op.multiple_results else (out,)
            for var, o in zip(node.outputs, outs):
                env[var.id] = o
        return optree.tree_unflatten(self.out_tree, [read(r) for r in self.outputs])

    def lower(self, backend: str | None = None) -> Any:
        """This graph with its constants moved to ``backend`` (a name; default: the default backend), as
        ``call_delegate`` expects."""
        b = backend_arg(backend, "Graph.lower")
        consts = [to_backend(c, b) for c in self.consts]
        return Graph(self.inputs, self.in_tree, self.nodes, self.outputs, self.out_tree, consts)

    def compile(self, backend: str | None = None, device: Any = None) -> Any:
        """This graph as one straight-line Python function of backend arrays: trace once, replay fast.

        Each node becomes one call of its kernel, already resolved for ``backend`` (a name; default: the
        default backend), with no dispatch, no level search and no interpretation per call. Nodes whose
        results nothing uses are left out (ops are pure), and ``*_like`` creations, which need only their
        input's shape, no longer keep that input alive: the graph of ``grad(f)`` then skips the last steps
        of ``f`` that only computed its value. Each intermediate is released after its last use, as eager
        code lets go of its temporaries. The result runs on raw arrays of that backend only, outside
        transforms (for transforms, call the graph itself). ``source`` shows the generated code. For inputs
        on another device than the backend's default, name it as ``device``: ``*_like`` creations and the
        graph's constants are then made there (they have no input to follow).

        Example:
            >>> import numpy as np, polyad as pa
            >>> g = pa.make_graph(pa.grad(lambda x: pa.xp.sum(pa.xp.sin(x))), np.zeros(2)).compile()
            >>> g(np.array([0.0, np.pi]))
            array([ 1., -1.])
        """
        b = backend_arg(backend, "Graph.compile")
        return compile_graph(self, b, dispatch.placement(b, device))
