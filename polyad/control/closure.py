"""Closure conversion for control-flow ops: a user's function (a loop body, a branch, a solver's residual)
made a function of explicit values only.

A body closes over values of the enclosing transforms (a parameter ``k`` under ``grad``). A loop op must
receive them as arguments, so that each transform's rule can hand the body its own values for them (a
tangent, a batch, a leaf of a new level) and a capture can record them as inputs; else the rule would
either miss their derivative or see the body's ops one by one (an unrolled loop). ``trace`` runs the
function once on abstract values at a tracing level that lifts every tensor of an enclosing transform
an op inside it reaches (``polyad.graph.tracing``, ``lift_all``): that gives the closure, the output
structure and types, and a graph of the body (what ``pa.jit`` compiles). A ``Body`` then calls the
user's Python function itself, once per step, with each closed-over tensor object standing, for the
duration of the call, for the value the rule hands it (``substituted``): the same object, another value,
its own restored after. A counter in the body therefore sees every step a schedule runs.

Example:
    >>> import numpy as np, polyad as pa
    >>> from polyad.control.closure import trace
    >>> def f(k):
    ...     body = trace(lambda x: x * k, (np.ones(2),), "example")  # closes over k, a grad tensor
    ...     assert body.closures == (k,)
    ...     (out,) = body(np.ones(2), 3.0 * k)  # k stands for 3k in this call
    ...     return pa.xp.sum(out)
    >>> pa.grad(f)(np.float64(2.0))
    np.float64(6.0)
"""

import math
from contextlib import contextmanager

import optree

import polyad.core.dispatch as dispatch
from polyad.control.bodies import recorded
from polyad.core import OPS, FreshTensor, Tensor, capture_below, transform_active
from polyad.core.avals import ShapeDtype, bottom, dtype_kind, shape_of
from polyad.graph import predispatch
from polyad.graph.compiler import optimize, step_function
from polyad.graph.ir import Const, Var
from polyad.graph.tracing import trace_graph
from polyad.ops.fills import zeros_like


def abstract_of(x):
    """The ``ShapeDtype`` of an array or tensor ``x`` (its device that of the array underneath)."""
    if isinstance(x, ShapeDtype):
        return x
    return ShapeDtype(tuple(x.shape), x.dtype, getattr(bottom(x), "device", None))


class Body:
    """A user function with its closure made explicit: ``body(*inputs, *closure_values)`` runs ``fn`` on
    the flat ``inputs`` (structure ``in_tree``) with each object of ``closures`` standing for the
    corresponding value, and returns the flat outputs (a list; structure ``out_tree``).

    ``out_avals``: the outputs' shapes and dtypes, from the trace; ``graph``: the traced graph, whose
    inputs are the flat inputs and then the closures (``pa.jit`` compiles it); ``where``: the function
    named for messages ("pa.scan(step)").
    """

    def __init__(self, fn, in_tree, closures, out_tree, out_avals, graph, where):
        self.fn = fn
        self.in_tree = in_tree
        self.closures = tuple(closures)
        self.out_tree = out_tree
        self.out_avals = out_avals
        self.graph = graph
        self.where = where
        self.draws_random = getattr(graph, "draws_random", False)
        # the inputs fn writes into in place (a NumPy-style ``u[1:-1] = ...`` on its carry): each call
        # hands fn its own copy of those, so that no write reaches what the caller keeps (``owned``)
        self.written = getattr(graph, "written_inputs", ())
        self.writes_in_place = getattr(graph, "writes_in_place", False)  # into anything (a buffer too)

    @property
    def n_inputs(self):
        return self.in_tree.num_leaves

    def __call__(self, *args):
        if self.closures:
            args = unaliased(self.closures, args)
        if self.writes_in_place and transform_active():
            # every array input a tensor: no write reaches what the caller keeps, and a buffer made from
            # one (zeros_like) takes the transform's values (a closed-over value stands in as a tensor);
            # a body that writes nowhere computes on the arrays as they are (level 0's fast path)
            args = owned(args, [*self.written, *self._arrays(args)])
        elif self.written:
            args = owned(args, self.written)
        n = len(args) - len(self.closures)
        inputs, values = args[:n], args[n:]
        with substituted(self.closures, values, self.where) as stand_ins:
            out = self.fn(*optree.tree_unflatten(self.in_tree, list(inputs)))
            flat, tree = optree.tree_flatten(out, none_is_leaf=False)
            if tree != self.out_tree:
                raise TypeError(
                    f"{self.where}: the function returned {tree}, but it returned {self.out_tree} when it "
                    "was traced; it must return the same structure every time"
                )
            # a closed-over value returned as it is: its stand-in, not the object about to be restored
            flat = [stand_ins.get(id(o), o) for o in flat]
        return [o._value if type(o) is FreshTensor else o for o in flat]

    def _arrays(self, args):
        """The positions of the backend arrays among the inputs in ``args`` (the closure's values follow)."""
        return [k for k in range(self.n_inputs) if not isinstance(args[k], Tensor) and k not in self.written]

    def compile_with(self, compile_fn):
        """This body run by compiled code: ``compile_fn(graph)`` (``pa.jit``'s pipeline) turns the traced
        graph, whose inputs are the body's and then its closure's, into a function of the same flat
        arguments ``__call__`` takes. A body without a graph, or that draws random numbers, stays."""
        if self.graph is None or self.draws_random:
            return self
        return CompiledBody(self, compile_fn(self.graph), compile_fn)

    def __repr__(self):
        return f"Body({self.where}, {len(self.closures)} closed-over value(s))"


class CompiledBody:
    """A ``Body`` whose steps run its compiled graph (``Body.compile_with``): same arguments, same
    outputs. Compiled code takes backend arrays; on a transform's tensors (a compiled gradient's backward
    pass records the steps it runs again) the body runs as a ``Body``."""

    graph = None
    draws_random = False

    def __init__(self, body, fn, compile_fn, shared=None):
        self.body, self.fn, self.compile_fn = body, fn, compile_fn
        self.closures, self.out_avals, self.where = body.closures, body.out_avals, body.where
        self._shared = {} if shared is None else shared  # the pullback, shared with bodies of its graph
        self.captured = {}  # device graphs of k steps, per signature (polyad.control.graph_steps)

    def compiled_pullback(self, args, cotangents):
        """One step's cotangents of its inputs (zeros where none) given its outputs' (None for none), by
        compiled code: the step and its backward pass traced once (at the first call) and compiled."""
        if "pullback" not in self._shared:
            self._shared["pullback"] = _compile_pullback(self.body, args, self.compile_fn)
        fn, floats_out = self._shared["pullback"]
        return list(fn(*args, *[cotangents[k] for k in floats_out]))

    def __call__(self, *args):
        raw = []
        for a in args:
            if isinstance(a, Tensor):
                if type(a) is not FreshTensor:
                    return self.body(*args)
                a = a._value
            raw.append(a)
        return list(self.fn(*raw))

    def __repr__(self):
        return f"CompiledBody({self.where})"


def replayed(body, example):
    """``body`` run, on backend arrays, by its traced graph (optimised, not fused) compiled to
    straight-line calls of eager's kernels (so eager's values to rounding, mostly bit for bit), where no
    capture records this level (``pa.jit`` compiles bodies its own way) and the arrays of ``example``
    (the carry, every leaf of at most ``REPLAY_ELEMENTS`` elements: a small state) are of an eager
    backend (a lazy one, Dask, computes a step at a time). Else ``body``.
    A loop whose steps are small saves the Python of its function and of the dispatch of each op; on a
    transform's tensors (grad of grad) the compiled body runs its function as ``body`` does. A body
    traced again with the same graph (the loop of a function called again) reuses the code compiled for
    the last one, its step's pullback included (``_REPLAYS``)."""
    if body.graph is None or capture_below():
        return body
    if any(math.prod(shape_of(x)) > REPLAY_ELEMENTS for x in example):
        # a large state: its kernels take the time, and the compiled pullback holds the step's values
        # otherwise than the recording the checkpoint budget counts
        return body
    arrays = [bottom(x) for x in example]
    backend = dispatch.backend_of(arrays)
    if backend is None or getattr(backend.xp, "persist", None) is not None:
        return body
    device = next((a.device for a in arrays if hasattr(a, "device")), None)

    def compile_fn(graph):
        optimized = optimize(graph)
        fn = optimized.compile(backend.name, device).fn
        return step_function(optimized, backend, fn) or fn  # the backend's one function, where it has one

    key = graph_key(body.graph, (backend.name, str(device)))
    shared = _REPLAYS.pop(key, None) if key is not None else None
    if shared is None:
        compiled = body.compile_with(compile_fn)
        if not isinstance(compiled, CompiledBody):
            return compiled
        shared = {"fn": compiled.fn}
    compiled = CompiledBody(body, shared["fn"], compile_fn, shared)
    if key is not None:
        _REPLAYS[key] = shared  # the most recent last: the oldest goes first
        while len(_REPLAYS) > REPLAY_CACHE:
            del _REPLAYS[next(iter(_REPLAYS))]
    return compiled


REPLAY_CACHE = 32  # bodies whose compiled code ``replayed`` keeps
REPLAY_ELEMENTS = 4096  # ``replayed`` compiles loops whose every carry leaf has at most this many elements
CONST_KEY_ELEMENTS = 1 << 16  # a graph with larger constants is compiled at each trace (no key)
_REPLAYS = {}  # graph key -> {"fn": compiled step, "pullback": (compiled pullback, floats) once made}


def graph_key(graph, where):
    """A hashable key equal for two graphs that compute the same thing the same way: op objects,
    parameters, the wiring, literals (by repr: -0.0 is not 0.0), shapes and dtypes, and constants by
    value. None where a part cannot be keyed (an unhashable parameter, a large or unreadable constant):
    that graph is compiled anew."""
    local = {}
    parts = [where, getattr(graph, "written_inputs", ()), getattr(graph, "writes_in_place", False)]
    for v in graph.inputs:
        local[v.id] = len(local)
        parts.append((v.shape, str(v.dtype)))
    for c in graph.consts:
        shape, dtype = tuple(getattr(c, "shape", ())), str(getattr(c, "dtype", type(c)))
        if not hasattr(c, "tobytes") or math.prod(shape) > CONST_KEY_ELEMENTS:
            return None
        parts.append((shape, dtype, c.tobytes()))

    def ref(r):
        if isinstance(r, Var):
            return local[r.id]
        if isinstance(r, Const):
            return ("c", r.index)
        return (type(r).__name__, repr(r))

    try:
        for node in graph.nodes:
            if OPS.get(node.op.name) is not node.op:  # an op made for this trace (a solver's): no key
                return None
            params = tuple(sorted((k, _frozen(v)) for k, v in node.params.items()))
            outs = []
            for o in node.outputs:
                local[o.id] = len(local)
                outs.append((o.shape, str(o.dtype)))
            parts.append((node.op, params, tuple(ref(r) for r in node.inputs), tuple(outs)))
        parts.append(tuple(ref(r) for r in graph.outputs))
        key = tuple(parts)
        hash(key)
    except (TypeError, KeyError):
        return None
    return key


def _frozen(value):
    """``value`` (a node's parameter) as a hashable of the same meaning: containers recursively, floats
    by repr, other values compared by value (dtypes, devices) as they are. TypeError (no key) for one
    compared by identity or holding data (a loop's body, a function, an array): the cache would keep
    what it holds alive, and never meet it again."""
    if value is None or isinstance(value, str | int):
        return value
    if isinstance(value, list | tuple):
        return (type(value).__name__, tuple(_frozen(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((k, _frozen(v)) for k, v in value.items())))
    if isinstance(value, slice):
        return ("slice", _frozen(value.start), _frozen(value.stop), _frozen(value.step))
    if isinstance(value, float | complex):
        return (type(value).__name__, repr(value))
    if callable(value) or hasattr(value, "shape") or type(value).__eq__ is object.__eq__:
        raise TypeError(f"no key for a parameter of type {type(value).__name__}")
    return value


def refuse_pre_dispatch_capture(where, what):
    """Raise where a pre-dispatch capture (``make_graph(f, pre_dispatch=True)``) would record a
    construct whose steps depend on the values (``what``: "a while loop", "a solver's iterations") as
    the Python calls of this one run: replayed on other inputs, that fixed unrolling gives a wrong result
    without an error (a while loop that stopped after 6 steps at x = 1 ran 6 steps at x = 50)."""
    if predispatch.recording():
        raise NotImplementedError(
            f"{where}: make_graph(f, pre_dispatch=True) cannot hold {what}: its steps depend on the "
            "values, and recorded one by one they would replay as this run's fixed unrolling; capture "
            "with make_graph(f, ...) (pre_dispatch=False: one op node) or use pa.jit"
        )


# what a ConcretizationError in a loop body says to do (a loop's steps are traced once, not run one by one)
LOOP_ADVICE = (
    "the body of a loop is traced once, on abstract values, and the trace runs for every step, so Python "
    "control flow (if, float(), int()) cannot depend on the loop carry or on a value computed from it: "
    "choose with xp.where(c, a, b) or pa.cond(pred, true_fun, false_fun, ...), and stop a loop with "
    "pa.while_loop's cond_fun"
)


def trace(fn, example, where, names=None, advice=None):
    """``fn`` as a ``Body``: traced once on the abstract values of ``example`` (a tuple of arrays, tensors
    or ShapeDtypes: ``fn``'s positional arguments), lifting every tensor of an enclosing transform it
    closes over. Python control flow on a traced value raises ``ConcretizationError``, naming ``where``,
    the input by ``names`` (one per flat input, as "the loop carry") and saying ``advice`` (what to do)."""
    flat, in_tree = optree.tree_flatten(tuple(example), none_is_leaf=False)
    avals = [abstract_of(x) for x in flat]
    backend = dispatch.backend_of_device(next((a.device for a in avals), None))
    with predispatch.not_recording():  # the trace is no call of user code a pre-dispatch graph replays
        graph, _, lifted = trace_graph(
            fn, avals, in_tree, backend, where=where, names=names, lift_all=True, advice=advice
        )
    out_avals = [_output_aval(r, graph) for r in graph.outputs]
    return Body(fn, in_tree, lifted, graph.out_tree, out_avals, graph, where)


def _output_aval(ref, graph):
    if isinstance(ref, Var):
        return ShapeDtype(ref.shape, ref.dtype)
    if isinstance(ref, Const):
        return abstract_of(graph.consts[ref.index])
    return ref  # a Python number the function returns as it is


def _stand_in(obj, value):
    """Make tensor ``obj`` be ``value`` (a tensor of any level, or a backend array: a FreshTensor)."""
    if isinstance(value, Tensor):
        obj.__class__ = type(value)
        obj._value, obj._interp, obj._aux = value._value, value._interp, value._aux
    else:
        obj.__class__ = FreshTensor
        obj._value, obj._interp, obj._aux = value, None, None


def owned(values, positions=None):
    """``values`` (a sequence) as a list with each value at ``positions`` (every one when None) the
    receiver's own, so that an in-place write into it reaches nothing else (``own_copy``).

    This is how a loop hands its body the carry: the arrays it keeps (the caller's initial array, a
    stored checkpoint, the step a backward pass replays, a compiled graph's constant) are never written.
    Under a transform the body's tensors cost nothing (``Body.__call__``); outside every transform (an
    eager loop, a compiled graph's loop) a backend array is copied, for the inputs the traced body writes
    into (``Body.written``), or for every input where nothing was traced (eager loops)."""
    out = list(values)
    for k in range(len(out)) if positions is None else positions:
        out[k] = own_copy(out[k])
    return out


def owned_next(leaves, elsewhere=()):
    """An eager loop's next carry (``leaves``, what a step returned) as its body's own, copying only
    where a write could reach something else: a leaf that is a view (NumPy's and CuPy's ``.base``; an
    array of a library that has none is copied), or that is also one of ``elsewhere`` (the step's ys, an
    initial array) or another leaf. A fresh result of the step's own ops stays as it is, so a body that
    writes nothing costs nothing; the initial carry is copied once (``owned``)."""
    seen = {id(e) for e in elsewhere}
    out = []
    for c in leaves:
        if id(c) in seen or getattr(c, "base", True) is not None:
            c = own_copy(c)
        seen.add(id(c))
        out.append(c)
    return out


def own_copy(value):
    """``value`` as a new object no write into which reaches ``value``: a tensor, a new object over the
    same value (polyad's values are immutable: a write computes the new one and rebinds the object); a
    backend array, while a transform is active, a ``FreshTensor`` over it (the same, and a write of the
    transform's values can rebind it), else a copy (a write would change its memory); a number as it is."""
    if isinstance(value, Tensor):
        copy = object.__new__(type(value))
        copy._value, copy._interp, copy._aux, copy._alias = value._value, value._interp, value._aux, None
        return copy
    if not hasattr(type(value), "__setitem__"):  # a number, a NumPy scalar: nothing to write into
        return value
    if transform_active():
        return FreshTensor(value)
    return dispatch.namespace_of(value).asarray(value, copy=True)


def unaliased(objects, args):
    """``args`` with every reference to one of the tensor objects ``objects`` replaced by a copy of that
    object as it is now: an argument that is one, or a tensor that wraps one at any depth (a recording
    level's leaf over a closed-over value that is a constant to it, a carry that starts as a closed-over
    array). Making the objects stand in for other values then leaves the arguments as they were, and no
    object comes to wrap itself."""
    by_id = {id(o): o for o in objects}
    copies = {}

    def copy_of(obj):
        if id(obj) not in copies:
            copy = copies[id(obj)] = object.__new__(type(obj))
            copy._value, copy._interp, copy._aux = obj._value, obj._interp, obj._aux
        return copies[id(obj)]

    out = []
    for a in args:
        a = copy_of(a) if id(a) in by_id else a
        todo = [a] if isinstance(a, Tensor) else []
        while todo:
            t = todo.pop()
            for slot in ("_value", "_aux"):
                inner = getattr(t, slot)
                if id(inner) in by_id:
                    setattr(t, slot, copy_of(inner))
                    todo.append(copies[id(inner)])
                elif isinstance(inner, Tensor):
                    todo.append(inner)
        out.append(a)
    return out


@contextmanager
def substituted(objects, values, where):
    """Inside the block each tensor object of ``objects`` stands for the corresponding value of ``values``;
    each is itself again after, even on error. Yields ``{id(object): value}``. A body that wrote into one
    of them (``k[0] = ...`` on a value it closes over) is refused: a loop's steps must not change what
    they close over; carry the value instead."""
    saved = []
    stand_ins = {}
    try:
        for obj, value in zip(objects, values):
            saved.append((obj, obj.__class__, obj._value, obj._interp, obj._aux))
            _stand_in(obj, value)
            stand_ins[id(obj)] = value
        yield stand_ins
        for obj, value in zip(objects, values):
            now = obj._value if not isinstance(value, Tensor) else obj._interp
            was = value if not isinstance(value, Tensor) else value._interp
            if now is not was or (isinstance(value, Tensor) and obj._value is not value._value):
                raise ValueError(
                    f"{where}: the function wrote into a value it closes over (an in-place update such as "
                    "k[0] = ... or k += ...); a loop body or branch must not change what it closes over: "
                    "pass the value in the carry and return the new one"
                )
    finally:
        for obj, cls, value, interp, aux in reversed(saved):
            obj.__class__ = cls
            obj._value, obj._interp, obj._aux = value, interp, aux


def _compile_pullback(body, args, compile_fn):
    """``(fn, floating outputs)``: ``fn(*args, *cotangents of the floating outputs)`` -> the cotangent of
    every input, ``body``'s step and backward pass traced on ``args``' shapes and compiled."""
    graph, from_floats = pullback_graph(body, args)
    return compile_fn(graph), from_floats


def pullback_graph(body, args):
    """``(graph, floating outputs)``: the graph of ``body``'s step and backward pass on ``args``' shapes,
    a function of ``args`` and the cotangents of the floating outputs that returns the cotangent of every
    input (zeros where none)."""
    from_floats = [k for k, a in enumerate(body.out_avals) if dtype_kind(a.dtype) in "fc"]
    n = len(args)

    def step_and_back(*flat):
        values, cts = flat[:n], flat[n:]
        _, pullback = recorded(body, list(values))
        full = [None] * len(body.out_avals)
        for k, c in zip(from_floats, cts):
            full[k] = c
        grads = pullback(full)
        return tuple(zeros_like(v) if g is None else g for g, v in zip(grads, values))

    avals = [abstract_of(a) for a in args] + [body.out_avals[k] for k in from_floats]
    in_tree = optree.tree_structure(tuple(range(len(avals))))
    backend = dispatch.backend_of(args)
    with predispatch.not_recording():
        graph, _, _ = trace_graph(
            step_and_back, avals, in_tree, backend, where=f"the pullback of {body.where}"
        )
    return graph, from_floats
