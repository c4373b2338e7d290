"""Abstract tracing for ``pa.jit``: graph capture on abstract values. Each op is recorded and its output
shape and dtype come from its ``abstract_eval`` rule; nothing is computed, so the graph holds for every
input of the traced signature, and Python control flow on a traced value raises a
``ConcretizationError`` naming it (as JAX's jit does)."""

import threading

import optree

import polyad.core.dispatch as dispatch
import polyad.xp as xp
from polyad.core import PASS, ConcretizationError, Tensor, add_hook, new_level, refusals, remove_hook
from polyad.core.avals import ShapeDtype, bottom, dtype_name, same_named_dtype
from polyad.graph.capture import GraphInterpreter, GraphTensor
from polyad.graph.graph import Graph
from polyad.graph.ir import Var
from polyad.ops import views
from polyad.ops.dtypes import owns_dtype
from polyad.transforms.abstract import abstract_rule


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
        try:
            self._scalar("np.asarray")
        except ConcretizationError as e:
            hint = refusals.array_hint()  # a NumPy buffer, np.array([a, b]), SciPy: that habit's fix
            if hint == refusals.NUMPY_HINT:
                raise
            raise ConcretizationError(f"{e}{hint}") from None


class WeakTracedTensor(TracedTensor):
    """A traced Python float (a ``pa.jit`` argument, and what Python arithmetic computes from such values
    alone): as in eager code, where the number meets a floating array the array's dtype wins (``x32 * dt``
    stays float32), so the tracer casts it to that dtype first; alone it is the backend's default float."""

    __slots__ = ()
    weakly_typed = True  # xp.asarray of one is an array, as eagerly (ops/creation.py reads this)

    # a float's own methods: divmod stays traced; those giving an int or a bool, or a decimal rounding,
    # need the value: a ConcretizationError naming it and the polyad function that computes it traced
    def __divmod__(self, other):
        return self // other, self % other

    def __rdivmod__(self, other):
        return other // self, other % self

    def __round__(self, ndigits=None):
        fix = "pa.xp.round(x)" if ndigits is None else f"pa.xp.round(x * 10**{ndigits}) / 10**{ndigits}"
        raise self._needs("round", fix)

    def __trunc__(self):
        raise self._needs("math.trunc", "pa.xp.trunc(x)")

    def is_integer(self):
        raise self._needs("is_integer", "pa.xp.trunc(x) == x")

    def _needs(self, what, fix):
        try:
            self._scalar(what)
        except ConcretizationError as e:
            return ConcretizationError(f"{e}; or compute it traced, as a 0-d array: {fix}")
        return ConcretizationError(f"{what}() of a traced value that has no concrete value; use {fix}")


# ops a Python float's own operators bind (dt * 2, -dt, dt ** 2...): eagerly their result is a Python float
# again, so traced it stays weak; any other op of weak values gives a 0-d array, as eagerly
PYTHON_ARITHMETIC = frozenset(
    {
        "add",
        "subtract",
        "multiply",
        "divide",
        "floor_divide",
        "remainder",
        "pow",
        "negative",
        "positive",
        "abs",
    }
)


def _native_dtype(backend, dtype):
    """``dtype`` as the traced backend's own dtype object. A value made without a device (a Python int in
    a loop's carry, ``astype(p, polyad.xp.int64)``) has the default backend's dtype; on another library's
    arrays (array_api_strict with the numpy default) it stands for the dtype of the same name."""
    if not owns_dtype(backend, dtype):
        dtype = same_named_dtype(backend.xp, dtype)
    return backend.xp.empty((0,), dtype=dtype).dtype


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
        self.closed = []  # (backend array the function closes over, its input Var)
        self._dtypes = {}
        self._lifted_ids = {}
        self._closed_ids = {}
        self._weak_out = False  # the op being recorded has only weak values among its arrays

    def new_var(self, aval, weak=False):
        key = (type(aval.dtype), aval.dtype)  # the type first: two libraries' dtypes are never compared
        dtype = self._dtypes.get(key)
        if dtype is None:  # a rule may give a scalar type (NumPy's np.bool): the arrays' own dtype object,
            # as a concrete capture records it
            dtype = self._dtypes[key] = _native_dtype(self.backend, aval.dtype)
        if dtype is not aval.dtype:
            aval = ShapeDtype(aval.shape, dtype, aval.device)
        v = Var(self.next_id, aval.shape, dtype)
        self.next_id += 1
        return (WeakTracedTensor if weak or self._weak_out else TracedTensor)(aval, self, v)

    def process(self, op, args, params):
        """Record ``op``; a weak value (a traced Python float) among its arguments is first cast to the
        dtype of the floating array it meets, as eager code's Python number would be, and a result of
        weak values alone is weak again."""
        if not any(type(a) is WeakTracedTensor for a in args):
            return super().process(op, args, params)
        ref = next((d for d in map(_strong_float_dtype, args) if d is not None), None)
        if ref is not None:
            args = [_cast(a, ref) if type(a) is WeakTracedTensor else a for a in args]
            return super().process(op, args, params)
        if op.name not in PYTHON_ARITHMETIC:  # xp.exp(dt) is a 0-d array eagerly: no longer weak
            return super().process(op, args, params)
        self._weak_out = True
        try:
            return super().process(op, args, params)
        finally:
            self._weak_out = False

    def enclosing(self, a):
        """A value of an enclosing transform closed over: an extra input of the graph, so that replaying
        the graph on it keeps what it carries (its derivative, batch or place in a graph)."""
        traced = self._lifted_ids.get(id(a))
        if traced is None:
            aval = ShapeDtype(a.shape, a.dtype, getattr(bottom(a), "device", None))
            traced = self.new_var(aval, weak=type(a) is WeakTracedTensor)  # a loop body's, of a jit's float
            self._lifted_ids[id(a)] = traced  # ``lifted`` keeps ``a`` alive: its id stays its own
            self.lifted.append((a, traced._aux))
        return traced._value, traced._aux

    def closed_over(self, array):
        """A backend array the function closes over: an input of the graph, passed at each call, so that
        an in-place change to it between calls is seen, as eagerly (a constant would be read once, and
        folded at compile time). Arrays made while tracing stay constants."""
        traced = self._closed_ids.get(id(array))
        if traced is None:
            self._check_library(array)
            traced = self.new_var(ShapeDtype.of(array))
            self._closed_ids[id(array)] = traced  # ``closed`` keeps ``array`` alive: its id stays its own
            self.closed.append((array, traced._aux))
        return traced._value, traced._aux

    def const_and_value(self, array):
        """``(value, reference)`` of a backend array as a constant of the graph (a loop body's)."""
        return self.const_value(array), self.const(array)

    def const_value(self, array):
        """What tracing computes on for a constant array: its shape and dtype."""
        self._check_library(array)
        return ShapeDtype.of(array)

    def _check_library(self, array):
        """Refuse an array of another library than the inputs' (a closure, or a creation without a
        device on the default backend), as eager transforms do; the abstract rules would fail on its
        dtype with the library's own error, or the first calls in a kernel."""
        owner = dispatch.backend_of_array(array)
        if owner is None or owner is self.backend or owner.name in self.backend.accepts:
            return
        raise TypeError(
            f"{self.where}: arrays of two libraries in one call: the inputs are {self.backend.name} arrays, "
            f"and the function uses a {owner.name} array ({type(array).__name__} of shape "
            f"{tuple(array.shape)}) closed over or made without a device; make it with device=x.device "
            "(x an input) or move it to the inputs' backend"
        )

    def evaluate(self, op, values, params):
        """The op's outputs as shapes and dtypes, from its abstract evaluation rule (no kernel runs)."""
        rule = abstract_rule(op, self.where)
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
        dtype = getattr(var.dtype, "__name__", None) or dtype_name(var.dtype)  # a dtype or a scalar type
        advice = getattr(self, "advice", None)
        if advice is not None:  # a control-flow body's trace: its caller says what to do instead
            return ConcretizationError(
                f"{self.where}: {kind} of a traced value ({origin}, shape {var.shape}, dtype {dtype}) needs "
                f"its concrete value; {advice}"
            )
        return ConcretizationError(
            f"{self.where}: {kind} of a traced value ({origin}, shape {var.shape}, dtype {dtype}) needs "
            "its concrete value, which pa.jit does not have while it "
            "traces: the trace must hold for every value of the arguments. Mark the argument static "
            "(pa.jit(f, static_argnums=...) or static_argnames=...), so that each value traces anew, or "
            "compute without Python control flow on the value (xp.where(cond, a, b) for a branch)"
        )


def _strong_float_dtype(a):
    """The dtype of ``a`` if it is a floating array that is not weak (a tensor or a backend array)."""
    if type(a) is WeakTracedTensor or isinstance(a, bool | int | float | complex):
        return None
    dtype = getattr(a, "dtype", None)
    if dtype is None or not hasattr(a, "shape"):
        return None
    name = dtype_name(dtype)
    return dtype if name.startswith(("float", "complex")) else None


def _cast(weak, dtype):
    """``weak`` as ``dtype`` (one recorded ``astype``), or itself where it has that dtype already."""
    if dtype_name(weak.dtype) == dtype_name(dtype):
        return weak
    return xp.astype(weak, dtype)


class _Lifting(threading.local):
    def __init__(self):
        self.tracers = []  # this thread's tracers that lift every enclosing tensor, innermost last


_lifting = _Lifting()


def _lift_hook(op, args, params):
    """While a tracer lifts its function's whole closure (``trace_graph(..., lift_all=True)``): an op all
    of whose tensors belong to levels below it (a value the function closes over, alone or with
    constants) is recorded by the tracer too, its tensors lifted to inputs of the graph."""
    tracers = _lifting.tracers
    if not tracers:
        return PASS  # another thread's trace
    interp = tracers[-1]
    top = None
    for a in args:
        if isinstance(a, Tensor) and a._interp is not None and (top is None or a._interp.level > top):
            top = a._interp.level
    if top is None or top >= interp.level:
        return PASS
    return interp.process(op, args, params)


def trace_graph(
    func,
    avals,
    in_tree,
    backend,
    where="pa.jit",
    names=None,
    lift_all=False,
    closed_inputs=False,
    weak=(),
    advice=None,
):
    """``(graph, closed, lifted)``: the ``Graph`` of ``func`` on abstract inputs, where ``avals``
    (ShapeDtypes, flat, structure ``in_tree``) become traced values on ``backend`` and each op is recorded
    through its ``abstract_eval`` rule, computing nothing (``TracingInterpreter``). ``closed`` lists the
    backend arrays ``func`` closes over, ``lifted`` the tensors of enclosing transforms it closes over:
    they are the graph's last inputs, in that order (its ``in_tree`` has them as extra leaves), to be
    passed at each call. ``names``: a name per input, for errors. Without ``closed_inputs`` (pa.jit asks
    for them, as its compiled code outlives the trace) closed-over backend arrays stay constants of the
    graph and ``closed`` is empty.

    With ``lift_all``, every tensor of an enclosing transform that reaches an op inside ``func`` is lifted,
    even where the op has none of ``func``'s own values among its arguments (``k * 2`` of a closed-over
    ``k``): ``lifted`` is then ``func``'s whole closure in transforms' tensors, which a loop body needs to
    make explicit (``polyad.control.closure``).

    ``weak``: the positions of inputs that stand for Python floats (``WeakTracedTensor``). ``advice``:
    what a ``ConcretizationError`` tells the user to do instead (a loop body's: pa.jit's static
    arguments cannot help there)."""
    with new_level(TracingInterpreter, backend, where, {}) as interp:
        interp.advice = advice
        ins = [interp.new_var(a, k in weak) for k, a in enumerate(avals)]
        if names is not None:
            interp.names.update({t._aux.id: n for t, n in zip(ins, names)})
        if not closed_inputs:
            interp.closed_over = interp.const_and_value
        if lift_all:
            _lifting.tracers.append(interp)
            add_hook(_lift_hook)
            # a body run once per step may draw random numbers: here a placeholder, the state untouched
            interp.refuses_random, interp.abstract_random, interp.drew_random = False, True, False
        in_vars = [t._aux for t in ins]  # before the call: a write into an input rebinds its object
        writes_before = views.WRITES[0]
        try:
            out = func(*optree.tree_unflatten(in_tree, ins))
            out_flat, out_tree = optree.tree_flatten(out, none_is_leaf=False)
            outputs = [interp.ref(o)[1] for o in out_flat]
        finally:
            if lift_all:
                remove_hook(_lift_hook)
                _lifting.tracers.pop()
    inputs = in_vars + [var for _, var in interp.closed] + [var for _, var in interp.lifted]
    if interp.lifted or interp.closed:
        in_tree = optree.tree_structure(tuple(range(len(inputs))))
    graph = Graph(inputs, in_tree, interp.nodes, outputs, out_tree, interp.consts)
    graph.draws_random = getattr(interp, "drew_random", False)  # (lift_all) the function draws numbers
    # the inputs func wrote into in place (x[k] = ..., x += ...): a caller running func again on values
    # it keeps (a loop's carry, a stored checkpoint) hands it its own copy of those (closure.owned)
    graph.written_inputs = tuple(k for k, (t, v) in enumerate(zip(ins, in_vars)) if t._aux is not v)
    graph.writes_in_place = views.WRITES[0] != writes_before  # (another thread's writes: a false yes)
    return graph, [a for a, _ in interp.closed], [t for t, _ in interp.lifted]
