"""Compiled bodies for control-flow ops: a loop's body (a branch, a checkpointed function) that carries a
traced graph (``polyad.control.closure.Body``) is compiled by the same pipeline as the graph around it,
so that a jitted loop runs compiled code at every step, not the user's Python function."""


def compile_bodies(graph, compile_fn):
    """``graph`` with every body among its nodes' parameters replaced by its compiled form
    (``body.compile_with(compile_fn)``: ``compile_fn`` turns a body's graph into a function of its flat
    inputs), nested bodies included (``compile_fn`` runs this pass too). Other nodes are kept as they are."""
    nodes, changed = [], False
    for node in graph.nodes:
        params = {k: _compiled(v, compile_fn) for k, v in node.params.items()}
        if any(params[k] is not v for k, v in node.params.items()):
            node = type(node)(node.op, node.inputs, params, node.outputs)
            changed = True
        nodes.append(node)
    return graph.replace(nodes=nodes) if changed else graph


def _compiled(value, compile_fn):
    if hasattr(value, "compile_with"):
        return value.compile_with(compile_fn)
    if isinstance(value, tuple) and value and all(hasattr(v, "compile_with") for v in value):
        return tuple(v.compile_with(compile_fn) for v in value)
    return value


def step_function(graph, backend, fallback):
    """``graph`` (optimised, not fused) as one function the backend compiles whole, where it can
    (``backend.fusion.graph_function``: NumPy's is one Numba function for a graph of small values),
    else None: ``fallback`` (the graph's straight-line code) stays. A loop's step on a small state
    then costs one call rather than a kernel call per op."""
    make = getattr(backend.fusion, "graph_function", None)
    return None if make is None else make(graph, fallback)
