"""Graph capture below the transforms: the graph data structures (``Var``, ``Const``, ``Node``,
``Graph``, ``CompiledGraph``), the capture level (``GraphInterpreter``, ``capture_graph``) and
``call_delegate``, a higher-order op that runs a captured graph as one node. ``polyad.api.make_graph``
is the public entry; pre-dispatch capture (``polyad.predispatch``) builds on the structures here.

The capture level sits below every transform (it is pushed first, so it is the lowest level):
transforms inside the function have already turned into plain ops by the time a call reaches it, and
the graph of ``make_graph(pa.grad(f), x)`` holds the backward pass as ordinary ops. Capture runs the
kernels too (tensors hold concrete values), so Python control flow on values works and the graph
records the path taken.
"""

import functools
from collections.abc import Callable
from typing import Any

import optree

from polyad import core, dispatch
from polyad.core import ConcretizationError, FreshTensor, Interpreter, Op, Tensor, bind, new_level
from polyad.dispatch import BY_TYPE
from polyad.ops.common import ShapeDtype, _bottom, _dtype_name
from polyad.tracing import eval_shape


class GraphTensor(Tensor):
    """A value being captured: ``_value`` is the concrete array, ``_aux`` its variable number."""

    __slots__ = ()


class Var:
    """A graph variable: its number, shape and dtype."""

    __slots__ = ("id", "shape", "dtype")

    def __init__(self, id, shape, dtype):
        self.id = id
        self.shape = tuple(shape)
        self.dtype = dtype

    def __repr__(self):
        return f"%{self.id}"


class Const:
    """A constant array captured from a closure (or an array argument the graph does not vary)."""

    __slots__ = ("index", "value")

    def __init__(self, index, value):
        self.index = index
        self.value = value

    def __repr__(self):
        return f"c{self.index}"


class Node:
    """One op application: ``outputs = op(*inputs, **params)``. ``inputs`` holds Vars, Consts and
    Python literals."""

    __slots__ = ("op", "inputs", "params", "outputs")

    def __init__(self, op, inputs, params, outputs):
        self.op = op
        self.inputs = inputs
        self.params = params
        self.outputs = outputs

    def __repr__(self):
        outs = ", ".join(repr(o) for o in self.outputs)
        args = [repr(i) for i in self.inputs]
        args += [f"{k}={_short(v)}" for k, v in self.params.items()]
        types = ", ".join(f"{o.shape} {o.dtype}" for o in self.outputs)
        return f"{outs} = {self.op.name}({', '.join(args)})  # {types}"


def _short(v):
    if isinstance(v, Graph):
        return f"<graph of {len(v.nodes)} nodes>"
    return repr(v)


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
        return self._run(flat, {})

    def _run(self, flat, env):
        """Replay the nodes on ``flat`` inputs; ``env`` may hold values of free variables already. A node
        with a ``run`` method (a transform node of a pre-dispatch graph) runs itself."""
        target = dispatch.backend_of([_bottom(x) for x in flat])
        env.update({v.id: x for v, x in zip(self.inputs, flat)})
        consts = [
            _to_backend(c, target) if dispatch.backend_of_array(c) is not None else c for c in self.consts
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
                params = {k: _param_to_backend(v, target) for k, v in node.params.items()}
                out = bind(node.op, *[read(r) for r in node.inputs], **params)
                outs = out if node.op.multiple_results else (out,)
            for var, o in zip(node.outputs, outs):
                env[var.id] = o
        return optree.tree_unflatten(self.out_tree, [read(r) for r in self.outputs])

    def lower(self, backend: str | None = None) -> Any:
        """This graph with its constants moved to ``backend`` (a name; default: the default backend), as
        ``call_delegate`` expects."""
        b = _backend_arg(backend, "Graph.lower")
        consts = [_to_backend(c, b) for c in self.consts]
        return Graph(self.inputs, self.in_tree, self.nodes, self.outputs, self.out_tree, consts)

    def compile(self, backend: str | None = None) -> Any:
        """This graph as one straight-line Python function of backend arrays: trace once, replay fast.

        Each node becomes one call of its kernel, already resolved for ``backend`` (a name; default: the
        default backend), with no dispatch, no level search and no interpretation per call. Nodes whose
        results nothing uses are left out (ops are pure), and ``*_like`` creations, which need only their
        input's shape, no longer keep that input alive: the graph of ``grad(f)`` then skips the last steps
        of ``f`` that only computed its value. Each intermediate is released after its last use, as eager
        code lets go of its temporaries. The result runs on raw arrays of that backend only, outside
        transforms (for transforms, call the graph itself). ``source`` shows the generated code.

        Example:
            >>> import numpy as np, polyad as pa
            >>> g = pa.make_graph(pa.grad(lambda x: pa.xp.sum(pa.xp.sin(x))), np.zeros(2)).compile()
            >>> g(np.array([0.0, np.pi]))
            array([ 1., -1.])
        """
        b = _backend_arg(backend, "Graph.compile")
        env = {}
        names = {}

        def name_of(ref):
            if isinstance(ref, Var):
                return names[ref.id]
            if isinstance(ref, Const):
                key = f"c{ref.index}"
                env[key] = _to_backend(self.consts[ref.index], b)
                return key
            key = f"lit{len(env)}"
            env[key] = ref
            return key

        args = []
        for v in self.inputs:
            names[v.id] = f"v{v.id}"
            args.append(names[v.id])
        lines = [f"def replay({', '.join(args)}):"]
        live = _live_nodes(self.nodes, self.outputs)
        dying = _last_uses(live, self.outputs)
        for pos, (i, node) in enumerate(live):
            op = node.op
            params = {k: _param_to_backend(v, b) for k, v in node.params.items()}
            if op.shape_only is not None and isinstance(node.inputs[0], Var):
                like = node.inputs[0]
                env[f"k{i}"] = _shape_only_kernel(op, like, params, b)
                lines.append(f"    v{node.outputs[0].id} = k{i}()")
                names[node.outputs[0].id] = f"v{node.outputs[0].id}"
                continue
            if op.kernels or op.from_device or op.higher_order is not None:
                kernel = functools.partial(core.bind, op)  # device choice or a graph inside: dispatch it
            else:
                kernel = op.impls.get(b) or op.resolve(b)
            env[f"k{i}"] = kernel
            call = ", ".join(name_of(r) for r in node.inputs)
            if params:
                env[f"p{i}"] = params
                call = f"{call}, **p{i}" if call else f"**p{i}"
            outs = []
            for o in node.outputs:
                names[o.id] = f"v{o.id}"
                outs.append(names[o.id])
            target = f"({', '.join(outs)},)" if op.multiple_results else outs[0]
            lines.append(f"    {target} = k{i}({call})")
            if pos in dying:  # let go of values nothing reads any more, as eager code does
                lines.append(f"    del {', '.join(names[v] for v in dying[pos])}")
        lines.append(f"    return ({', '.join(name_of(r) for r in self.outputs)},)")
        source = "\n".join(lines)
        exec(compile(source, f"<polyad graph of {len(self.nodes)} nodes>", "exec"), env)
        return CompiledGraph(env["replay"], source, self.inputs, self.in_tree, self.out_tree, b)


def _backend_arg(backend, where):
    """The Backend named ``backend`` (None: the default one); errors name ``where``."""
    if backend is None:
        return dispatch.default_backend()
    if not isinstance(backend, str):
        raise TypeError(f"{where}(backend={backend!r}): backend must be None or a backend name (a str)")
    return dispatch._load(backend)


def _shape_only_kernel(op, like, params, backend):
    """A ``*_like`` node as a creation from the recorded shape and dtype: its input is not needed."""
    xp = backend.xp
    dtype = params.get("dtype") or _param_to_backend(like.dtype, backend)
    rest = {k: v for k, v in params.items() if k != "dtype"}
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


def _live_nodes(nodes, outputs):
    """``(index, node)`` of the nodes whose results reach an output, in order (ops have no side effects).
    A shape-only ``*_like`` node does not keep its input alive."""
    needed = {r.id for r in outputs if isinstance(r, Var)}
    live = []
    for i in range(len(nodes) - 1, -1, -1):
        node = nodes[i]
        if not any(o.id in needed for o in node.outputs):
            continue
        live.append((i, node))
        if node.op.shape_only is not None and node.inputs and isinstance(node.inputs[0], Var):
            continue
        needed.update(r.id for r in node.inputs if isinstance(r, Var))
    return live[::-1]


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
            (v.shape, backend.xp.empty((0,), dtype=_param_to_backend(v.dtype, backend)).dtype) for v in inputs
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


def signature_error(where, inputs, in_tree, flat, tree, backend=None):
    """The error for a call of a graph (``where``) whose arguments ``flat`` (structure ``tree``) do not
    match the ``inputs`` it was captured with (structure ``in_tree``), or None if they match. ``backend``:
    the one backend a compiled graph runs on (a graph replays on any)."""
    if tree != in_tree:
        return TypeError(
            f"{where} takes {in_tree.num_leaves} array(s) in the structure {in_tree}; it was called with "
            f"{tree.num_leaves} in {tree} (capture it again for other arguments)"
        )
    for i, (v, x) in enumerate(zip(inputs, flat)):
        problem = _input_problem(v, x, backend)
        if problem is not None:
            exc, text = problem
            return exc(f"{where}: input {i} ({v!r}) {text}")
    return None


def _input_problem(v, x, backend):
    """``(exception type, what is wrong)`` when ``x`` cannot stand for graph input ``v``, else None."""
    tensor = isinstance(x, Tensor)
    owner = None if tensor else dispatch.backend_of_array(x)
    if backend is not None and tensor:
        return TypeError, (
            f"is a {type(x).__name__}, a value inside a polyad transform or a polyad tensor; a compiled "
            f"graph runs on raw {backend.name} arrays, outside transforms: transform the Graph itself "
            "(pa.grad(graph)), or compile the graph of the transformed function "
            "(pa.make_graph(pa.grad(f), x).compile())"
        )
    if owner is None and not tensor:
        return TypeError, f"must be an array with {_signature_of(v)}, got a {type(x).__name__}"
    if backend is not None and owner is not backend:
        return TypeError, (
            f"is a {owner.name} array; the graph was compiled for {backend.name} (compile it for this one "
            f"with .compile({owner.name!r}))"
        )
    if tuple(x.shape) != v.shape:
        return ValueError, (
            f"has shape {tuple(x.shape)}, expected {_signature_of(v)}; capture the graph again for another "
            "shape"
        )
    if not _same_dtype(x.dtype, v.dtype):
        return TypeError, (
            f"has dtype {_dtype_name(x.dtype)}, expected {_signature_of(v)}; capture the graph again for "
            "another dtype"
        )
    return None


def _same_dtype(a, b):
    """Whether dtypes ``a`` and ``b`` (perhaps of two libraries) are the same dtype; by name only across
    libraries (``str`` of a NumPy dtype costs microseconds)."""
    return a == b if type(a) is type(b) else _dtype_name(a) == _dtype_name(b)


def _signature_of(v):
    return f"shape {v.shape} and dtype {_dtype_name(v.dtype)}"


def _to_backend(array, backend):
    if dispatch.backend_of_array(array) is backend:
        return array
    try:
        return backend.xp.from_dlpack(array)
    except Exception:  # a library without DLPack interchange for this pair: go through a copy
        return backend.xp.asarray(array)


def _param_to_backend(value, backend):
    # dtypes recorded on one backend become the same-named dtypes of another
    name = str(value)
    if hasattr(value, "__class__") and (
        "dtype" in type(value).__name__.lower() or "DType" in type(value).__name__
    ):
        for candidate in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                          "float32", "float64", "complex64", "complex128"):  # fmt: skip
            if name.endswith(candidate) and not name.endswith("u" + candidate):
                return getattr(backend.xp, candidate)
    return value


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

    def _ref(self, a):
        if type(a) is FreshTensor:  # an array made while capturing: a constant of the graph
            a = a._value
        if isinstance(a, Tensor):
            if a._interp is self:
                return a._value, a._aux
            raise RuntimeError(
                "make_graph: a tensor of an enclosing transform reached the capture; call make_graph "
                "outside other transforms"
            )
        if dispatch.backend_of_array(a) is not None:
            return a, self._const(a)
        return a, a

    def _const(self, array):
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
        values, refs = zip(*(self._ref(a) for a in args)) if args else ((), ())
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
        outputs = [interp._ref(o)[1] for o in out_flat]
    return Graph([t._aux for t in ins], in_tree, interp.nodes, outputs, out_tree, interp.consts)


# ------------------------------------------------------------------------------ tracing (pa.jit)


class TracedTensor(GraphTensor):
    """A value being traced by ``pa.jit``: ``_value`` is a ``ShapeDtype`` (shape, dtype, device; no data),
    ``_aux`` its Var. Asking it for a Python value (``bool``, ``float``, ``int``, ``item``,
    ``np.asarray``) raises a ``ConcretizationError`` that names it: the trace must hold for every value."""

    __slots__ = ()

    def _scalar(self, what):
        interp = self._interp
        if interp is None or not isinstance(interp, TracingInterpreter):
            raise ConcretizationError(f"{what}() of a traced value that has no concrete value")
        raise interp.concretization_error(self, what)

    def __array__(self, dtype=None, copy=None):
        self._scalar("np.asarray")


class TracingInterpreter(GraphInterpreter):
    """Graph capture on abstract values, for ``pa.jit``: each op is recorded and its output shape and
    dtype come from its ``abstract_eval`` rule; nothing is computed. A value of the function's arguments
    has no concrete value, so Python control flow on one raises (as JAX's jit), and the graph holds for
    every input of the traced signature. ``where`` names the jitted function in messages; ``names`` the
    inputs ("argument 0", "argument 'x'")."""

    transform = "pa.jit"
    carries = "place in the traced computation (it has no value while pa.jit traces)"
    refuses_random = True  # a draw would be a constant of the trace, the same at every call

    def __init__(self, level, backend, where, names):
        super().__init__(level)
        self.backend = backend
        self.where = where
        self.names = names
        self.lifted = []  # (tensor of an enclosing transform the function closes over, its input Var)
        self._dtypes = {}
        self._lifted_ids = {}

    def new_var(self, aval):
        dtype = self._dtypes.get(aval.dtype)
        if dtype is None:  # a rule may give a scalar type (NumPy's np.bool): the arrays' own dtype object,
            # as a concrete capture records it
            dtype = self._dtypes[aval.dtype] = self.backend.xp.empty((0,), dtype=aval.dtype).dtype
        if dtype is not aval.dtype:
            aval = ShapeDtype(aval.shape, dtype, aval.device)
        v = Var(self.next_id, aval.shape, dtype)
        self.next_id += 1
        return TracedTensor(aval, self, v)

    def _ref(self, a):
        if type(a) is FreshTensor:  # an array made while tracing: a constant of the graph
            a = a._value
        if isinstance(a, Tensor):
            if a._interp is self:
                return a._value, a._aux
            if a._interp is None:  # a plain tensor closed over: its array is a constant
                return self._ref(a._value)
            # a value of an enclosing transform closed over: an extra input of the graph, so that replaying
            # the graph on it keeps what it carries (its derivative, batch or place in a graph)
            traced = self._lifted_ids.get(id(a))
            if traced is None:
                traced = self.new_var(ShapeDtype(a.shape, a.dtype, getattr(_bottom(a), "device", None)))
                self._lifted_ids[id(a)] = traced  # ``lifted`` keeps ``a`` alive: its id stays its own
                self.lifted.append((a, traced._aux))
            return traced._value, traced._aux
        if dispatch.backend_of_array(a) is not None:
            return ShapeDtype(tuple(a.shape), a.dtype, getattr(a, "device", None)), self._const(a)
        return a, a

    def evaluate(self, op, values, params):
        """The op's outputs as shapes and dtypes, from its abstract evaluation rule (no kernel runs)."""
        rule = op.rules.get("abstract_eval")
        if rule is None:
            raise NotImplementedError(
                f"{self.where}: op {op.name!r} has no abstract evaluation rule, so it cannot be traced "
                "(for a custom op, register one with op.register_fake)"
            )
        try:
            out = rule(self.backend.xp, *values, **params)
        except (ConcretizationError, NotImplementedError) as e:  # name the jitted function
            raise type(e)(f"{self.where}: {e}") from None
        for aval in out if op.multiple_results else (out,):
            if None in aval.shape:  # the compiled code specialises on shapes: refuse, as JAX's jit does
                raise ConcretizationError(
                    f"{self.where}: the shape of op {op.name!r}'s result depends on the values of its "
                    f"arguments ({aval.shape}), which pa.jit does not have while it traces; call it outside "
                    "the jitted function, or use a fixed-size form (xp.where with a mask instead of boolean "
                    "indexing)"
                )
        return out

    def concretization_error(self, tensor, what):
        """The error for ``what`` (bool, float, ...) of ``tensor``, naming it and where it came from."""
        var = tensor._aux
        origin = self.names.get(var.id)
        if origin is None:
            node = next((n for n in self.nodes if any(o is var for o in n.outputs)), None)
            origin = f"the result of op {node.op.name!r}" if node is not None else "computed inside"
        kind = {"bool": "bool() (a Python branch)", "index": "operator.index()"}.get(what, f"{what}()")
        dtype = getattr(var.dtype, "__name__", None) or _dtype_name(var.dtype)  # a dtype or a scalar type
        return ConcretizationError(
            f"{self.where}: {kind} of a traced value ({origin}, shape {var.shape}, dtype {dtype}) needs "
            "its concrete value, which pa.jit does not have while it "
            "traces: the trace must hold for every value of the arguments. Mark the argument static "
            "(pa.jit(f, static_argnums=...) or static_argnames=...), so that each value traces anew, or "
            "compute without Python control flow on the value (xp.where(cond, a, b) for a branch)"
        )


def trace_graph(func, avals, in_tree, backend, where="pa.jit", names=None):
    """``(graph, lifted)``: the ``Graph`` of ``func`` on abstract inputs, where ``avals`` (ShapeDtypes,
    flat, structure ``in_tree``) become traced values on ``backend`` and each op is recorded through its
    ``abstract_eval`` rule, computing nothing (``TracingInterpreter``). ``lifted`` lists the tensors of
    enclosing transforms that ``func`` closes over: they are the graph's last inputs (its ``in_tree`` has
    them as extra leaves), to be passed when it is replayed. ``names``: a name per input, for errors."""
    with new_level(TracingInterpreter, backend, where, {}) as interp:
        ins = [interp.new_var(a) for a in avals]
        if names is not None:
            interp.names.update({t._aux.id: n for t, n in zip(ins, names)})
        out = func(*optree.tree_unflatten(in_tree, ins))
        out_flat, out_tree = optree.tree_flatten(out, none_is_leaf=False)
        outputs = [interp._ref(o)[1] for o in out_flat]
    inputs = [t._aux for t in ins] + [var for _, var in interp.lifted]
    if interp.lifted:
        in_tree = optree.tree_structure(tuple(range(len(inputs))))
    graph = Graph(inputs, in_tree, interp.nodes, outputs, out_tree, interp.consts)
    return graph, [t for t, _ in interp.lifted]


# ------------------------------------------------------------------------------ call_delegate


def _delegate_kernel(xp, *args, lowered):
    return lowered(*args)


def _delegate_abstract(xp, *avals, lowered):
    return eval_shape(lowered, *avals)


_call_delegate = Op("call_delegate", _delegate_kernel, abstract_eval=_delegate_abstract)
# transforms run the carried graph on their own tensors: every node is transformed by its rules
_call_delegate.higher_order = lambda *args, lowered: lowered(*args)


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
    return bind(_call_delegate, *args, lowered=lowered)
