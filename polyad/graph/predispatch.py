"""Pre-dispatch capture: ``make_graph(func, *args, pre_dispatch=True)`` records at the top of the
dispatcher, before any transform level sees a call.

What is recorded: every op that user code calls (on whatever tensors it holds at that point), and every
transform it applies, as a transform node that carries the graph of the transformed function (its body).
What is not: the work the transforms do themselves (backward passes, batching rules, basis vectors), which
replaying re-creates by running the transform again, eagerly. So the graph of ``vmap(f)`` replays as
``vmap(body)`` and the graph of ``grad(f)`` as ``grad(body)``: transforms stay transforms.

Values that a body reads from an enclosing graph (closures) become its free variables; arrays from
outside the capture are constants.

Each public transform declares how it is recorded where it is defined (``polyad/api/*.py``), with one of
the decorators at the end of this file: ``recorded`` (a transform returning a function: grad, vmap,
jacrev...), ``recorded_call`` (applied at once: jvp) or ``not_recorded`` (returns a function the graph
cannot hold: vjp, linearize). ``polyad.api.make_graph`` is the public entry.
"""

import contextlib
import functools
import threading
import weakref

import optree

import polyad.core as core
import polyad.core.dispatch as dispatch
from polyad.graph.graph import Graph
from polyad.graph.ir import Const, Node, Var


class _State(threading.local):
    def __init__(self):
        self.frames = []  # graph builders, innermost last
        self.depth = 0  # > 0 while a transform or an op is running: its internal calls are not recorded


_state = _State()


class _Frame:
    """The graph being built for one function body."""

    def __init__(self, parent):
        self.parent = parent
        self.vars = {}  # id(object) -> Var
        self.keep = []  # the objects behind the ids, alive while capturing
        self.nodes = []
        self.consts = []
        self.free = []  # (outer Var, inner Var) pairs: values read from the enclosing graph
        self.next_id = 0 if parent is None else parent.next_id + 10000

    def var(self, obj):
        v = Var(self.next_id, tuple(obj.shape), obj.dtype)
        self.next_id += 1
        self.vars[id(obj)] = v
        self.keep.append(obj)
        return v

    def ref(self, obj):
        v = self.vars.get(id(obj))
        if v is not None:
            return v
        outer = self.parent.lookup(obj) if self.parent is not None else None
        if outer is not None:
            inner = self.var(obj)
            self.free.append((outer, inner))
            return inner
        if isinstance(obj, core.Tensor) or dispatch.backend_of_array(obj) is not None:
            c = Const(len(self.consts), obj)
            self.consts.append(obj)
            self.vars[id(obj)] = c
            self.keep.append(obj)
            return c
        return obj

    def lookup(self, obj):
        v = self.vars.get(id(obj))
        if v is not None:
            return v
        return self.parent.lookup(obj) if self.parent is not None else None


def recording():
    """Whether a pre-dispatch capture records the calls of user code here (not inside a transform or an
    op, whose internal calls it does not record)."""
    return bool(_state.frames) and not _state.depth


@contextlib.contextmanager
def not_recording():
    """Inside the block, calls are not recorded (they are the work of a transform or of a control-flow
    op: tracing a loop body), as inside an op."""
    _state.depth += 1
    try:
        yield
    finally:
        _state.depth -= 1


def record_op(op, args, params):
    """The pre-dispatch hook: record one user-level op call in the innermost graph, then run it (its
    internals unrecorded). Calls made while a transform or an op is running pass through."""
    if not recording():
        return core.PASS
    frame = _state.frames[-1]
    refs = [frame.ref(a) for a in args]
    _state.depth += 1
    try:
        out = core.bind(op, *args, **params)
    finally:
        _state.depth -= 1
    outs = [frame.var(o) for o in (out if op.multiple_results else (out,))]
    frame.nodes.append(Node(op, refs, params, outs))
    return out


class TransformNode:
    """A transform applied to a captured body: ``outputs = transform(body, **config)(*inputs)``."""

    def __init__(self, kind, make, config, body, inputs, outputs, in_tree, free):
        self.kind = kind
        self.make = make  # the public transform undecorated, e.g. polyad.api.vmap.vmap
        self.config = config  # (positional, keyword) arguments of the transform besides the function
        self.body = body
        self.inputs = inputs
        self.outputs = outputs
        self.in_tree = in_tree
        self.free = free  # outer refs of the body's free variables, in body.free order
        self.op = _TransformOpName(kind)
        self.params = {}

    def __repr__(self):
        args, kwargs = self.config
        conf = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
        outs = ", ".join(repr(o) for o in self.outputs)
        ins = ", ".join(repr(i) for i in self.inputs)
        body = "\n".join("      " + line for line in repr(self.body).splitlines())
        return f"{outs} = {self.kind}({', '.join(conf)})({ins}) {{\n{body}\n  }}"

    def run(self, read):
        """Re-run the transform eagerly on the replayed inputs; returns the flat outputs."""
        free_values = [read(r) for r in self.free]
        body = self.body

        def body_fn(*args, **kwargs):
            return body.run_with_free(args, free_values)

        args, kwargs = self.config
        inputs = optree.tree_unflatten(self.in_tree, [read(r) for r in self.inputs])
        out = self.make(body_fn, *args, **kwargs)(*inputs)
        return optree.tree_leaves(out, none_is_leaf=False)


class _TransformOpName:
    multiple_results = True

    def __init__(self, kind):
        self.name = kind


class PreDispatchGraph(Graph):
    """A graph whose nodes may be transform nodes; replaying runs them as transforms."""

    def __init__(self, inputs, in_tree, nodes, outputs, out_tree, consts, free=()):
        super().__init__(inputs, in_tree, nodes, outputs, out_tree, consts)
        self.free = list(free)

    def __repr__(self):
        text = super().__repr__()
        if not self.free:
            return text
        head, _, rest = text.partition("\n")
        free = ", ".join(f"{inner!r} = outer {outer!r}" for outer, inner in self.free)
        return f"{head}\n  free: {free}\n{rest}"

    def run_with_free(self, args, free_values):
        flat = optree.tree_leaves(args, none_is_leaf=False)
        return self.run(flat, dict(zip((inner.id for _, inner in self.free), free_values)))


def _capture(func, args, kwargs, parent):
    """Run ``func`` with recording on, in a new frame; returns (graph, flat outputs, output)."""
    frame = _Frame(parent)
    flat, in_tree = optree.tree_flatten(args, none_is_leaf=False)
    if parent is None:
        # raw arrays would meet NumPy's own operators, which polyad never sees: hold them in tensors
        flat = [_wrap(x) for x in flat]
        args = optree.tree_unflatten(in_tree, flat)
    inputs = [frame.var(x) for x in flat]
    _state.frames.append(frame)
    saved_depth, _state.depth = _state.depth, 0
    try:
        out = func(*args, **kwargs)
    finally:
        _state.depth = saved_depth
        _state.frames.pop()
    out_flat, out_tree = optree.tree_flatten(out, none_is_leaf=False)
    outputs = [frame.ref(o) for o in out_flat]
    graph = PreDispatchGraph(inputs, in_tree, frame.nodes, outputs, out_tree, frame.consts, frame.free)
    return graph, out


def record_transform(kind, make, func, config, args, kwargs):
    """Apply transform ``make(func, *config)`` to ``args`` while recording it as one transform node."""
    frame = _state.frames[-1]
    flat, in_tree = optree.tree_flatten(args, none_is_leaf=False)
    refs = [frame.ref(a) for a in flat]
    bodies = []

    def body(*a, **k):
        graph, out = _capture(func, a, k, frame)
        bodies.append(graph)
        return out

    targs, tkwargs = config
    _state.depth += 1
    try:
        out = make(body, *targs, **tkwargs)(*args, **kwargs)
    finally:
        _state.depth -= 1
    if not bodies:
        raise RuntimeError(f"make_graph(pre_dispatch=True): {kind} did not call its function")
    if len(bodies) > 1:
        raise NotImplementedError(
            f"make_graph(pre_dispatch=True): {kind} called its function {len(bodies)} times (a loop, e.g. "
            "chunk_size=1); capture it with pre_dispatch=False instead"
        )
    graph = bodies[0]
    out_flat, out_tree = optree.tree_flatten(out, none_is_leaf=False)
    out_flat = [_wrap(o) for o in out_flat]
    out = optree.tree_unflatten(out_tree, out_flat)
    outs = [frame.var(o) for o in out_flat]
    free = [outer for outer, _ in graph.free]
    frame.nodes.append(TransformNode(kind, make, config, graph, refs, outs, in_tree, free))
    return out


def _wrap(x):
    return core.Tensor(x) if dispatch.backend_of_array(x) is not None else x


_captures = [0]  # pre-dispatch captures running in any thread: the hook stays while one does
_captures_lock = threading.Lock()


def capture_pre_dispatch_graph(func, *args):
    """``make_graph(func, *args, pre_dispatch=True)``: install the hook at the top of ``bind`` (while any
    pre-dispatch capture runs) and record ``func`` in a new root frame; returns the graph."""
    if _state.frames:
        raise RuntimeError("make_graph(pre_dispatch=True) cannot be nested in another pre-dispatch capture")
    with _captures_lock:
        _captures[0] += 1
        core.set_pre_dispatch_hook(record_op)
    try:
        graph, _ = _capture(func, args, {}, None)
    finally:
        with _captures_lock:
            _captures[0] -= 1
            if not _captures[0]:
                core.set_pre_dispatch_hook(None)
    return graph


# ------------------------------------------------------------------------------ recording decorators


_REBUILD = weakref.WeakKeyDictionary()  # transformed function -> (public transform, func, config)


def rebuild_recipe(transformed):
    """``(transform, func, targs, tkwargs)`` that made ``transformed`` (``transform(func, *targs,
    **tkwargs)``), or None: how a transformed function travels to another process (Dask workers)."""
    try:
        return _REBUILD.get(transformed)
    except TypeError:  # not weak-referenceable: not a transformed function
        return None


def recorded(kind):
    """Decorator for a public transform ``make(func, *config) -> transformed``: under pre-dispatch capture,
    calls of the transformed function are recorded as transform nodes."""

    def deco(make):
        @functools.wraps(make)
        def wrapper(func, *targs, **tkwargs):
            transformed = make(func, *targs, **tkwargs)

            @functools.wraps(transformed)
            def call(*args, **kwargs):
                if recording():
                    return record_transform(kind, make, func, (targs, tkwargs), args, kwargs)
                return transformed(*args, **kwargs)

            _REBUILD[call] = (wrapper, func, targs, tkwargs)
            return call

        return wrapper

    return deco


def recorded_call(kind):
    """Decorator for a transform applied at once, ``transform(func, *args, **config)`` (``jvp``)."""

    def deco(transform):
        def make(func, **config):
            return lambda *args: transform(func, *args, **config)

        @functools.wraps(transform)
        def wrapper(func, *args, **config):
            if recording():
                return record_transform(kind, make, func, ((), config), args, {})
            return transform(func, *args, **config)

        return wrapper

    return deco


def not_recorded(kind):
    """Decorator for transforms that return functions (``vjp``, ``linearize``): pre-dispatch capture
    cannot represent them, so it refuses with the alternative."""

    def deco(transform):
        @functools.wraps(transform)
        def wrapper(*args, **kwargs):
            if recording():
                raise NotImplementedError(
                    f"make_graph(pre_dispatch=True) cannot record {kind}, which returns a function; "
                    "use grad/jacrev/jvp inside the captured function, or pre_dispatch=False"
                )
            return transform(*args, **kwargs)

        return wrapper

    return deco
