"""The code generator: a ``Graph`` as one straight-line Python function of backend arrays
(``Graph.compile`` calls ``compile_graph``)."""

import functools

import optree

import polyad.core as core
import polyad.core.dispatch as dispatch
from polyad.core.dispatch import BY_TYPE
from polyad.graph.ir import Const, Var, live_nodes, param_to_backend, signature_error, to_backend

# op -> ``kernel(args, **params)``: compiled code hands it its arguments as a list, having let go of
# those it read for the last time, so that the kernel frees each as it is done with it (``consuming``)
CONSUMING = {}


def consuming(op, kernel):
    """Let compiled graphs call ``kernel(args, **params)`` for ``op`` on backend arrays, ``args`` a list
    of its arguments that only the kernel holds where the graph reads them for the last time: the kernel
    may delete entries from it as it is done with them. For an op that holds many large arguments
    through a long call (a scan's backward pass and the states its primal pass stored: each is freed at
    its schedule's ``Free``, not when the sweep ends).

    Args:
        op: the ``Op``.
        kernel: a function of ``(args, **params)`` returning what ``op``'s kernel returns.

    Returns:
        ``kernel``.

    Example:
        >>> import numpy as np, polyad.core as core
        >>> from polyad.graph.compiler import codegen
        >>> op = core.Op("doc_take_two", lambda xp, a, b: a + b, register=False)
        >>> def add_freeing(args):
        ...     a, b = args.pop(), args.pop()
        ...     return a + b
        >>> codegen.consuming(op, add_freeing) is add_freeing
        True
        >>> del codegen.CONSUMING[op]
    """
    CONSUMING[op] = kernel
    return kernel


def compile_graph(graph, b, device=None):
    """``graph`` compiled for the Backend ``b`` (see ``Graph.compile``); ``device``: the device its
    inputs live on when not ``b``'s default one (creations and constants are made there)."""
    env = {}
    names = {}

    def name_of(ref):
        if isinstance(ref, Var):
            return names[ref.id]
        if isinstance(ref, Const):
            key = f"c{ref.index}"
            env[key] = to_backend(graph.consts[ref.index], b, device)
            return key
        key = f"lit{len(env)}"
        env[key] = ref
        return key

    args = []
    for v in graph.inputs:
        names[v.id] = f"v{v.id}"
        args.append(names[v.id])
    lines = [f"def replay({', '.join(args)}):"]
    live = live_nodes(graph.nodes, graph.outputs)
    dying = _last_uses(live, graph.outputs)
    for pos, (i, node) in enumerate(live):
        op = node.op
        params = {k: param_to_backend(v, b) for k, v in node.params.items()}
        if op.shape_only is not None and isinstance(node.inputs[0], Var):
            like = node.inputs[0]
            env[f"k{i}"] = _shape_only_kernel(op, like, params, b, device)
            lines.append(f"    v{node.outputs[0].id} = k{i}()")
            names[node.outputs[0].id] = f"v{node.outputs[0].id}"
            continue
        env[f"k{i}"] = _kernel_of(op, b)
        call = ", ".join(name_of(r) for r in node.inputs)
        gone = dying.pop(pos, None) if op in CONSUMING else None
        if gone:  # the list the kernel empties, the last references to what dies here handed over with it
            lines.append(f"    a{i} = [{call}]")
            lines.append(f"    del {', '.join(names[v] for v in gone)}")
            call = f"a{i}"
        elif op in CONSUMING:
            call = f"[{call}]"
        if params:
            env[f"p{i}"] = params
            call = f"{call}, **p{i}" if call else f"**p{i}"
        outs = []
        for o in node.outputs:
            names[o.id] = f"v{o.id}"
            outs.append(names[o.id])
        target = f"({', '.join(outs)},)" if op.multiple_results else outs[0]
        lines.append(f"    {target} = k{i}({call})")
        if gone:
            lines.append(f"    del a{i}")
        if pos in dying:  # let go of values nothing reads any more, as eager code does
            lines.append(f"    del {', '.join(names[v] for v in dying[pos])}")
    lines.append(f"    return ({', '.join(name_of(r) for r in graph.outputs)},)")
    source = "\n".join(lines)
    exec(compile(source, f"<polyad graph of {len(graph.nodes)} nodes>", "exec"), env)
    return CompiledGraph(env["replay"], source, graph.inputs, graph.in_tree, graph.out_tree, b)


def _kernel_of(op, b):
    """What compiled code calls for ``op`` on the Backend ``b``'s arrays: its resolved kernel; for an op
    with kernels per device type or a graph inside, ``bind`` (which chooses); a fused group on NumPy, its
    CPU kernel itself (it hands arrays it does not take to its straight-line kernel), saving the dispatch
    of each call (a few microseconds, most of a small group's time)."""
    if op in CONSUMING:
        return CONSUMING[op]
    plain_cpu = b.host_arrays and not dispatch.DEVICE_TYPE_PREDICATES and set(b.device_types) == {"cpu"}
    cpu = op.kernels.get("cpu") if plain_cpu and getattr(op, "fusion", None) is not None else None
    if cpu is not None:
        return functools.partial(cpu, b.xp)
    if op.kernels or op.from_device or op.higher_order is not None:
        return functools.partial(core.bind, op)  # device choice or a graph inside: dispatch it
    return op.impls.get(b) or op.resolve(b)


def _shape_only_kernel(op, like, params, backend, device):
    """A ``*_like`` node as a creation from the recorded shape and dtype: its input is not needed, so
    its device is the graph's (``like`` would have given it; the default device otherwise)."""
    xp = backend.xp
    dtype = params.get("dtype") or param_to_backend(like.dtype, backend)
    rest = {k: v for k, v in params.items() if k != "dtype"}
    if device is not None and rest.get("device") is None:
        rest["device"] = device
    return functools.partial(op.shape_only, xp, like.shape, dtype, **rest)


def _last_uses(live, outputs):
    """``{position in live: [var ids]}``: the variables each node reads for the last time (outputs
    excepted), so that compiled code can free them there. Shape-only nodes read no variable."""
    last = {}
    for pos, (_, node) in enumerate(live):
        if node.op.shape_only is not None and node.inputs and isinstance(node.inputs[0], Var):
            continue
        for r in node.inputs:
            if isinstance(r, Var):
                last[r.id] = pos
    keep = {r.id for r in outputs if isinstance(r, Var)}
    dying = {}
    for vid, pos in last.items():
        if vid not in keep:
            dying.setdefault(pos, []).append(vid)
    return dying


class CompiledGraph:
    """A graph compiled to straight-line backend calls (``Graph.compile``); ``source`` shows the code.

    A call checks its inputs against the captured signature (tree structure, then each array's library,
    shape and dtype) and raises on a mismatch, naming the input: the code was specialised to them.
    """

    def __init__(self, fn, source, inputs, in_tree, out_tree, backend):
        self.fn = fn
        self.source = source
        self.inputs = inputs
        self.in_tree = in_tree
        self.out_tree = out_tree
        self.backend = backend
        # the backend's own dtype objects, so that the check per call is one comparison of like with like
        self._expected = [
            (v.shape, backend.xp.empty((0,), dtype=param_to_backend(v.dtype, backend)).dtype) for v in inputs
        ]

    def __call__(self, *args):
        flat, tree = optree.tree_flatten(args, none_is_leaf=False)
        if tree != self.in_tree or not self._matches(flat):
            error = signature_error("compiled graph", self.inputs, self.in_tree, flat, tree, self.backend)
            if error is not None:
                raise error
        return optree.tree_unflatten(self.out_tree, list(self.fn(*flat)))

    def _matches(self, flat):
        """The fast check of the inputs (the message, if they fail it, comes from ``signature_error``)."""
        backend = self.backend
        for x, (shape, dtype) in zip(flat, self._expected):
            if BY_TYPE.get(type(x)) is not backend or x.shape != shape or x.dtype != dtype:
                return False
        return True

    def __repr__(self):
        return self.source


def interpret_graph(graph, b, device=None):
    """``graph`` as a function of backend arrays like ``compile_graph``'s, without generating code: a loop
    over its live nodes with their kernels resolved for the Backend ``b`` once. Python's ``compile`` of a
    graph of thousands of nodes takes tens of milliseconds (an unrolled loop's); this costs a few
    microseconds per node per call instead. ``pa.jit`` runs a graph this way until its optimised, fused
    and compiled form is ready."""
    live = live_nodes(graph.nodes, graph.outputs)
    dying = _last_uses(live, graph.outputs)
    consts = {}

    def ref(r):
        if isinstance(r, Var):
            return (True, r.id)
        if isinstance(r, Const):
            if r.index not in consts:
                consts[r.index] = to_backend(graph.consts[r.index], b, device)
            return (False, consts[r.index])
        return (False, r)

    steps = []
    for pos, (_, node) in enumerate(live):
        op = node.op
        params = {k: param_to_backend(v, b) for k, v in node.params.items()}
        outs = tuple(o.id for o in node.outputs)
        gone = tuple(dying.get(pos, ()))
        if op.shape_only is not None and isinstance(node.inputs[0], Var):
            kernel = _shape_only_kernel(op, node.inputs[0], params, b, device)
            steps.append((kernel, (), {}, outs, False, gone, False))
            continue
        kernel = _kernel_of(op, b)
        refs = tuple(ref(r) for r in node.inputs)
        steps.append((kernel, refs, params, outs, op.multiple_results, gone, op in CONSUMING))
    inputs = [v.id for v in graph.inputs]
    outputs = [ref(r) for r in graph.outputs]

    def run(*args):
        env = dict(zip(inputs, args))
        for kernel, refs, params, outs, multiple, gone, consumes in steps:
            args = [env[r] if is_var else r for is_var, r in refs]
            if consumes:  # the kernel holds the last references to what dies here (see ``consuming``)
                for vid in gone:
                    del env[vid]
                gone = ()
                out = kernel(args, **params)
            else:
                out = kernel(*args, **params)
            args = None
            if multiple:
                env.update(zip(outs, out))
            else:
                env[outs[0]] = out
            for vid in gone:
                del env[vid]
        return tuple(env[r] if is_var else r for is_var, r in outputs)

    return CompiledGraph(
        run, "# interpreted: no code generated", graph.inputs, graph.in_tree, graph.out_tree, b
    )
