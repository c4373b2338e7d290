"""A graph of small values as one Numba function of scalars: every element of every value is a local
variable of one compiled body, as XLA unrolls a small while loop's step, so that a loop step on a small
state (an ODE's few states and its step-size control) costs one call with no allocation, where op by op
it cost one kernel call per op (several microseconds each: all of a small op's time). A value of more
than ``MAX_ELEMENTS`` elements (up to ``MAX_ARRAY_ELEMENTS``) is an array variable instead, its ops
NumPy statements on arrays (``array_statements.py``).

``graph_function(graph, fallback)`` (the NumPy backend's ``fusion.graph_function``) returns a function
of the graph's flat inputs, which runs ``fallback`` (the graph's straight-line code) until it has been
called ``COMPILE_AFTER`` times, then for good where ``translate`` cannot (an op with no translation
here, a value of more than ``MAX_ARRAY_ELEMENTS`` elements, a dtype but float64, int64 and bool), on
anything but NumPy arrays of the traced dtypes, and until Numba has compiled the body (in the
background, as the fused loops; at once under ``$POLYAD_FUSION_COMPILE=wait``).

How: each value is a NumPy array of *names* (dtype object) of its shape; an op that only moves elements
(``reshape``, ``getitem``, ``stack``, ``roll``...) is NumPy's own function applied to those names at
code-generation time, and writes no code; an element-wise op writes one statement per element, by the
fused loop's expression for it (``expressions.NUMBA``: NumPy's semantics); a sum writes the additions in
NumPy's order (the first element plus the pairwise sum of the rest). Inputs are read element by element
at the top, outputs written into new arrays at the end. float32 is left out: Numba types a Python literal
against a float32 value otherwise than NumPy.

Example:
    >>> import numpy as np
    >>> import polyad as pa
    >>> from polyad.backends.numpy.compiler.graph_function import translate
    >>> g = pa.make_graph(lambda x: pa.xp.sum(x * x) + 1.0, np.ones(2))
    >>> text, constants = translate(g)
    >>> print(text[text.index("def fused"):])
    def fused(a0):
        a0_0 = a0[0]
        a0_1 = a0[1]
        t0 = (a0_0 * a0_0)
        t1 = (a0_1 * a0_1)
        t2 = (0.0 + t1)
        t3 = (t0 + t2)
        t4 = (t3 + 1.0)
        return (t4,)
    <BLANKLINE>
"""

import math

import numpy as np

from . import fusion, fusion_compile
from .array_statements import ELEMENTWISE, Big, array_node
from .expressions import NUMBA

DTYPES = {np.dtype(np.float64): "np.float64", np.dtype(np.int64): "np.int64", np.dtype(np.bool_): "np.bool_"}
MAX_ELEMENTS = 64  # elements of a value written as scalars; a larger one is an array variable
MAX_ARRAY_ELEMENTS = 4096  # elements of one value: larger ones are the fused loops' (threads, fast math)
# statements of one function: Numba takes 2 to 5 ms of CPU for each (typing every operation), so a
# larger graph costs more to compile than its steps save
MAX_STATEMENTS = 4000
COMPILE_AFTER = 1000  # calls of a graph's straight-line code before it is translated and compiled

SCALAR = {
    **{k: v for k, v in NUMBA.items() if k != "broadcast_to"},
    **ELEMENTWISE,
    "logical_and": "({0} & {1})",
    "logical_or": "({0} | {1})",
    "logical_not": "(not {0})",
}

# a choice as one instruction (``select.py``), not a branch: Numba's passes over a function grow faster
# than its blocks
HELPERS = (
    "from polyad.backends.numpy.compiler import select as choices\n"
    "from polyad.backends.numpy.compiler.select import select\n\n\n"
)
SCALAR.update(
    where="select({0}, {1}, {2})",
    maximum="select(({0} > {1}) | ({0} != {0}), {0}, {1})",
    minimum="select(({0} < {1}) | ({0} != {0}), {0}, {1})",
    zero_safe_multiply="({0} * select(({0} != 0) | np.isfinite({1}), {1}, 0.0))",
    zero_safe_divide="({0} / select(({0} != 0) | (({1} != 0) & ({1} == {1})), {1}, 1.0))",
    logical_not="(~{0})",
)
assert not any(" if " in v or " or " in v or " and " in v for v in SCALAR.values())

# the ops whose Python expression gives an integer or boolean result the type NumPy gives it (others,
# ``reciprocal`` or ``floor`` of an integer, would compute a float where NumPy keeps the integer)
KEEPS_TYPE = frozenset(
    "add subtract multiply negative positive abs square floor_divide maximum minimum where stop_gradient "
    "equal not_equal less less_equal greater greater_equal bitwise_and bitwise_or bitwise_xor "
    "bitwise_invert logical_and logical_or logical_not isnan isfinite isinf sign".split()
)

# ops that only move elements: NumPy's function of the input's names (object arrays) and the params
MOVES = {
    "reshape": lambda node, x: x.reshape(node.outputs[0].shape),
    "expand_dims": lambda node, x: x.reshape(node.outputs[0].shape),
    "squeeze": lambda node, x: x.reshape(node.outputs[0].shape),
    "broadcast_to": lambda node, x: np.broadcast_to(x, node.outputs[0].shape),
    "permute_dims": lambda node, x: np.transpose(x, node.params["axes"]),
    "moveaxis": lambda node, x: np.moveaxis(x, node.params["source"], node.params["destination"]),
    "matrix_transpose": lambda node, x: np.swapaxes(x, -1, -2),
    "roll": lambda node, x: np.roll(x, node.params["shift"], node.params.get("axis")),
    "flip": lambda node, x: np.flip(x, node.params.get("axis")),
    "getitem": lambda node, x: x[_static_key(node.params["key"])],
    "stop_gradient": lambda node, x: x,
    "positive": lambda node, x: x,
    "asarray_copy": lambda node, x: x,
}


class Untranslatable(Exception):
    """What ``translate`` cannot write (the message says which op or value, and why)."""


def _static_key(key):
    """A key of ints, slices, None and Ellipsis as it is; one that holds arrays cannot be translated."""
    parts = key if isinstance(key, tuple) else (key,)
    for k in parts:
        if isinstance(k, bool) or not isinstance(k, int | slice | type(None) | type(Ellipsis)):
            raise Untranslatable("an index by arrays")
    return key


def _literal(value):
    if isinstance(value, bool | int):
        return repr(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "np.nan"
        return repr(value) if not math.isinf(value) else ("np.inf" if value > 0 else "(-np.inf)")
    raise Untranslatable(f"a literal {type(value).__name__}")


class _Writer:
    """The function being written: its statements (``lines``, at ``indent``), the prologue that reads
    constants (``prologue``: before any loop or branch, so every branch sees them), fresh names, and the
    constants its ``c`` arguments take."""

    def __init__(self):
        self.lines, self.prologue, self.constants = [], [], []
        self.count = 0
        self.indent = ""
        self._const_names = {}
        self.small_max = MAX_ELEMENTS
        self.uses = {}

    def line(self, text):
        self.lines.append(self.indent + text)
        if len(self.lines) > MAX_STATEMENTS:
            raise Untranslatable(f"more than {MAX_STATEMENTS} statements")

    def emit(self, expression):
        name = f"t{self.count}"
        self.count += 1
        self.line(f"{name} = {expression}")
        return name

    def unpack(self, arg, shape, dtype, into=None):
        """The names of argument ``arg``'s elements, each read into a variable by lines appended to
        ``into`` (default: the body); a large argument stays the array it is (``Big``)."""
        if math.prod(shape) > MAX_ELEMENTS:
            return Big(arg, shape, dtype)
        names = np.empty(shape, dtype=object)
        if not shape:
            names[()] = arg
            return names
        for index in np.ndindex(*shape):
            names[index] = f"{arg}_{'_'.join(map(str, index))}"
            line = f"{names[index]} = {arg}[{', '.join(map(str, index))}]"
            if into is None:
                self.line(line)
            else:
                into.append(line)
        return names

    def constant(self, value, key=None):
        if key is not None and key in self._const_names:
            return self._const_names[key]
        value = np.asarray(value)
        _check(value.shape, value.dtype)
        self.constants.append(value.item() if not value.shape else value)
        names = self.unpack(f"c{len(self.constants) - 1}", value.shape, value.dtype, into=self.prologue)
        if key is not None:
            self._const_names[key] = names
        return names

    def assign(self, pairs):
        """Loop variables set, ``pairs`` of (targets, names, dtype): each target (a names array of
        scalars, or a ``Big``) to its names cast to ``dtype`` (an array variable to a C-contiguous array,
        so that its type stays the same through a loop, or to zeros where ``names`` is no ``Big``). All
        new values are read before any variable is set: one may be another's old value (a carry that
        passes a value on, or swaps two)."""
        staged = []
        for targets, names, dtype in pairs:
            cast = DTYPES[np.dtype(dtype)]
            if isinstance(targets, Big):
                if isinstance(names, Big):
                    staged.append((targets.name, self.emit(f"np.ascontiguousarray({names.name})")))
                else:
                    staged.append((targets.name, self.emit(f"np.zeros({targets.shape}, {cast})")))
                continue
            for index in np.ndindex(*targets.shape):
                staged.append((targets[index], self.emit(f"{cast}({names[index]})")))
        for target, source in staged:
            self.line(f"{target} = {source}")

    def added(self, targets, names):
        """``targets + names`` as a names array (or a ``Big``), for ``assign``."""
        if isinstance(targets, Big):
            return Big(self.emit(f"({targets.name} + {names.name})"), targets.shape, targets.dtype)
        return np.vectorize(lambda a, b: f"({a} + {b})", otypes=[object])(targets, names)

    def store(self, array, row, names):
        """Row ``row`` (source) of argument ``array`` set to ``names``; its reverse: ``load``."""
        if isinstance(names, Big):
            self.line(f"{array}[{row}] = {names.name}")
            return
        for index in np.ndindex(*names.shape):
            self.line(f"{array}[{', '.join([row, *map(str, index)])}] = {names[index]}")

    def load(self, targets, array, row):
        if isinstance(targets, Big):
            self.line(f"{targets.name} = {array}[{row}].copy()")
            return
        for index in np.ndindex(*targets.shape):
            self.line(f"{targets[index]} = {array}[{', '.join([row, *map(str, index)])}]")

    def pack(self, k, names, dtype):
        """The source of output ``k``: a new array of ``names`` (a scalar's name for shape ())."""
        if isinstance(names, Big):
            return names.name
        if not names.shape:
            return names[()]
        self.line(f"o{k} = np.empty({tuple(names.shape)}, {DTYPES[np.dtype(dtype)]})")
        for index in np.ndindex(*names.shape):
            self.line(f"o{k}[{', '.join(map(str, index))}] = {names[index]}")
        return f"o{k}"

    def source(self, params, results):
        params = [*params, *(f"c{k}" for k in range(len(self.constants)))]
        body = [*HELPERS.splitlines(), f"def fused({', '.join(params)}):"]
        body += [f"    {s}" for s in [*self.prologue, *self.lines]]
        body.append(f"    return ({', '.join(results)},)")
        return "\n".join(body) + "\n"

    def elementwise(self, template, arrays, shape):
        parts = np.broadcast_arrays(*arrays)
        out = np.empty(shape, dtype=object)
        for index in np.ndindex(*shape):
            out[index] = self.emit(template.format(*(p[index] for p in parts)))
        return out

    def sum(self, names, floating):
        """NumPy's order: for floats the first element plus the pairwise sum of the rest (blocks of 8
        unrolled), for integers one after the other."""
        names = list(names)
        if len(names) == 1:
            return names[0]
        if not floating:
            acc = names[0]
            for x in names[1:]:
                acc = self.emit(f"({acc} + {x})")
            return acc
        return self.emit(f"({names[0]} + {self._pairwise(names[1:])})")

    def _pairwise(self, names):
        n = len(names)
        if n < 8:
            acc = "0.0"
            for x in names:
                acc = f"({acc} + {x})"
            return self.emit(acc)
        if n <= 128:
            r = list(names[:8])
            i = 8
            while i < n - n % 8:
                r = [self.emit(f"({r[j]} + {names[i + j]})") for j in range(8)]
                i += 8
            acc = self.emit(
                f"((({r[0]} + {r[1]}) + ({r[2]} + {r[3]})) + (({r[4]} + {r[5]}) + ({r[6]} + {r[7]})))"
            )
            for x in names[i:]:
                acc = self.emit(f"({acc} + {x})")
            return acc
        half = n // 2
        half -= half % 8
        return self.emit(f"({self._pairwise(names[:half])} + {self._pairwise(names[half:])})")


def _reduce(w, node, x):
    """``sum`` over the node's axes, each output element the NumPy-ordered sum of its elements."""
    axis = node.params.get("axis")
    if node.params.get("dtype") is not None or np.dtype(node.outputs[0].dtype) not in (
        np.dtype(np.float64),
        np.dtype(np.int64),
    ):
        raise Untranslatable("a sum with a dtype")
    nd = x.ndim
    axes = (
        tuple(range(nd))
        if axis is None
        else tuple(sorted({a % nd for a in (axis if isinstance(axis, tuple) else (axis,))}))
    )
    kept = [a for a in range(nd) if a not in axes]
    moved = np.transpose(x, kept + list(axes))
    rows = moved.reshape(-1, math.prod(x.shape[a] for a in axes)) if x.size else moved.reshape(-1, 0)
    floating = np.dtype(node.outputs[0].dtype) == np.dtype(np.float64)
    out = np.empty(rows.shape[0], dtype=object)
    for k in range(rows.shape[0]):
        out[k] = w.sum(rows[k], floating) if rows.shape[1] else ("0.0" if floating else "0")
    return out.reshape(node.outputs[0].shape)


def _check(shape, dtype):
    try:
        dtype = np.dtype(dtype)
    except TypeError:  # another library's dtype: its graph is not NumPy's
        raise Untranslatable(f"a value of dtype {dtype}") from None
    if dtype not in DTYPES:
        raise Untranslatable(f"a value of dtype {np.dtype(dtype)}")
    if math.prod(shape) > MAX_ARRAY_ELEMENTS:
        raise Untranslatable(f"a value of {math.prod(shape)} elements (over {MAX_ARRAY_ELEMENTS})")


def _dtype(ref):
    return np.dtype(ref.dtype if hasattr(ref, "dtype") else np.asarray(ref).dtype)


def variables(prefix, refs):
    """Names arrays of loop variables ``{prefix}{k}_{index}`` for the values ``refs`` (Vars or avals)."""
    out = []
    for k, v in enumerate(refs):
        if math.prod(v.shape) > MAX_ELEMENTS:
            out.append(Big(f"{prefix}{k}", v.shape, v.dtype))
            continue
        names = np.empty(v.shape, dtype=object)
        for index in np.ndindex(*v.shape):
            names[index] = f"{prefix}{k}" + "".join(f"_{i}" for i in index)
        out.append(names)
    return out


# a graph's atoms by what they hold (the graph layer, which defines them, sits above the backends):
# a Var has an ``id``, a Const an ``index`` into the graph's constants; anything else is a literal
def _is_var(ref):
    return hasattr(ref, "id") and hasattr(ref, "shape")


def _is_const(ref):
    return hasattr(ref, "index") and hasattr(ref, "value")


def _live(graph):
    """The nodes whose results reach an output, in order (ops have no side effects)."""
    needed = {r.id for r in graph.outputs if _is_var(r)}
    live = []
    for node in reversed(graph.nodes):
        if any(o.id in needed for o in node.outputs):
            live.append(node)
            needed.update(r.id for r in node.inputs if _is_var(r))
    return live[::-1]


def emit_graph(w, graph, inputs):
    """The statements of ``graph`` written by ``w`` on the names arrays ``inputs`` (one per graph input);
    returns the names arrays of its outputs."""
    values = {}

    def names_of(ref):
        if _is_var(ref):
            return values[ref.id]
        if _is_const(ref):
            return w.constant(graph.consts[ref.index], key=(id(graph), ref.index))
        if hasattr(ref, "shape"):
            raise Untranslatable("an array literal")
        return np.array(_literal(ref), dtype=object)

    for v, names in zip(graph.inputs, inputs, strict=True):
        _check(v.shape, v.dtype)
        values[v.id] = names
    live = _live(graph)
    w.uses = {}  # reads of each value in this graph (an output counts twice: it is read after)
    for ref in [*(r for node in live for r in node.inputs), *graph.outputs, *graph.outputs]:
        if _is_var(ref):
            w.uses[ref.id] = w.uses.get(ref.id, 0) + 1
    for node in live:
        op, outs = node.op, node.outputs
        for o in outs:
            _check(o.shape, o.dtype)
        if op.shape_only is not None and node.inputs and _is_var(node.inputs[0]):
            like = node.inputs[0]
            rest = {k: v for k, v in node.params.items() if k not in ("dtype", "device")}
            made = op.shape_only(np, like.shape, node.params.get("dtype") or np.dtype(like.dtype), **rest)
            values[outs[0].id] = w.constant(made)
            continue
        if op.higher_order is not None:
            raise Untranslatable(f"{op.name} (a body of its own)")
        args = [names_of(r) for r in node.inputs]
        name = op.name
        if len(args) > (2 if name == "index_update" else 1) and name in ("getitem", "index_update"):
            raise Untranslatable(f"{name}: an index by arrays")
        if any(np.dtype(o.dtype).kind != "f" for o in outs) and name in SCALAR and name not in KEEPS_TYPE:
            raise Untranslatable(f"{name} with a {np.dtype(outs[0].dtype)} result")
        if name in ("getitem", "index_update"):
            _static_key(node.params["key"])
        if any(isinstance(a, Big) for a in args) or any(math.prod(o.shape) > MAX_ELEMENTS for o in outs):
            for o, value in zip(outs, array_node(w, node, args, Untranslatable), strict=True):
                values[o.id] = value
            continue
        if name in MOVES and len(args) == 1:
            values[outs[0].id] = MOVES[name](node, args[0])
        elif name == "stack":
            values[outs[0].id] = np.stack(args, node.params.get("axis", 0))
        elif name == "concat":
            values[outs[0].id] = np.concatenate(args, node.params.get("axis", 0))
        elif name == "unstack":
            axis = node.params.get("axis", 0)
            for k, o in enumerate(outs):
                values[o.id] = np.take(args[0], k, axis)
        elif name == "index_update" and len(args) == 2:
            out = args[0].copy()
            out[_static_key(node.params["key"])] = args[1]
            values[outs[0].id] = out
        elif name == "sum" and len(args) == 1:
            values[outs[0].id] = _reduce(w, node, args[0])
        elif name == "astype" and len(args) == 1:
            cast = DTYPES[np.dtype(outs[0].dtype)]
            values[outs[0].id] = w.elementwise(f"{cast}({{0}})", args, outs[0].shape)
        elif name in SCALAR and len(outs) == 1 and not node.params:
            values[outs[0].id] = w.elementwise(SCALAR[name], args, outs[0].shape)
        else:
            raise Untranslatable(f"{name} (no translation)")
        for o in outs:  # an element picked by an index is a str: a 0-d array of it
            if not isinstance(values[o.id], np.ndarray):
                values[o.id] = np.array(values[o.id], dtype=object)
            if values[o.id].shape != tuple(o.shape):
                raise Untranslatable(f"{name}: shape {values[o.id].shape} where {o.shape} was traced")
    return [names_of(r) for r in graph.outputs]


def translate(graph):
    """``(source, constants)``: the graph as the source of ``fused(a0, ..., c0, ...)``, which returns a
    tuple of its outputs (new arrays; Python numbers for shape ()), and the values its ``c`` arguments
    take (the graph's constants and what its shape-only nodes create). Raises ``Untranslatable``."""
    w = _Writer()
    params = [f"a{k}" for k in range(len(graph.inputs))]
    inputs = [w.unpack(p, v.shape, v.dtype) for p, v in zip(params, graph.inputs)]
    outputs = emit_graph(w, graph, inputs)
    results = [w.pack(k, names, _dtype(r)) for k, (names, r) in enumerate(zip(outputs, graph.outputs))]
    return w.source(params, results), w.constants


def graph_function(graph, fallback):
    """``graph`` as one Numba function of its flat inputs (NumPy arrays), where Numba is installed (else
    None: the caller keeps ``fallback``, the graph's straight-line code). The function runs ``fallback``
    for its first ``COMPILE_AFTER`` calls (a step that runs a few times does not pay Numba's compile),
    then translates the graph and compiles it in the background (at once under ``fusion_compile``'s
    "wait"), running ``fallback`` until it is ready, for good where ``translate`` cannot, and on other
    arrays (array_api_strict's, another dtype)."""
    if not fusion.available():
        return None
    state = [0, None]  # calls so far, then the compiled runner (or _UNTRANSLATED)

    def run(*args):
        compiled = state[1]
        if compiled is None:
            state[0] += 1
            if state[0] < COMPILE_AFTER:
                return fallback(*args)
            compiled = state[1] = _runner(graph) or _UNTRANSLATED
        values = compiled(*args)
        return fallback(*args) if values is None else tuple(values)

    return run


def _runner(graph):
    return _translated(translate, (graph,), graph.inputs, graph.outputs)


def _translated(translate_fn, args, inputs, outputs):
    """``_compiled`` of ``translate_fn(*args)`` for values ``inputs`` in and ``outputs`` out, or None
    where it cannot be translated or Numba is missing."""
    if not fusion.available():
        return None
    try:
        text, constants = translate_fn(*args)
    except Untranslatable:
        return None
    wants = [(np.dtype(v.dtype), not v.shape) for v in inputs]
    outs = [(_dtype(r), not getattr(r, "shape", ())) for r in outputs]
    return _compiled(text, constants, wants, outs)


def _UNTRANSLATED(*args, extra=()):
    return None


def translate_while(cond, body, n_carry, n_cond):
    """``(source, constants)`` of a whole while loop: ``fused(a0, ..., table, limit, index, s0, ..., c0,
    ...)`` runs ``cond`` and ``body`` (graphs of the carry and their closures: ``n_carry`` carry leaves,
    then ``n_cond`` of the condition's closure, then the body's) while the condition holds and, before
    step ``i``, stores the carry into row ``table[i]`` of the stacks ``s0, ...`` (where it is not -1) and
    ``i`` into ``index`` there. Returns the final carry, the steps run and whether they stayed under
    ``limit`` (else it stopped there)."""
    w = _Writer()
    n_in = len(body.inputs) + n_cond
    params = [f"a{k}" for k in range(n_in)]
    carry_avals = body.inputs[:n_carry]
    closures = [*cond.inputs[n_carry:], *body.inputs[n_carry:]]
    args = [w.unpack(p, v.shape, v.dtype) for p, v in zip(params[n_carry:], closures)]
    c_closure, b_closure = args[:n_cond], args[n_cond:]
    carry = variables("x", carry_avals)
    w.assign(
        [
            (names, w.unpack(f"a{k}", v.shape, v.dtype), v.dtype)
            for k, (names, v) in enumerate(zip(carry, carry_avals))
        ]
    )
    w.line("steps = 0")
    w.line("within = True")
    w.line("while True:")
    w.indent = "    "
    (pred,) = emit_graph(w, cond, [*carry, *c_closure])
    w.line(f"if not {pred[()]}:")
    w.line("    break")
    w.line("if steps >= limit:")
    w.line("    within = False")
    w.line("    break")
    w.line("if steps < table.shape[0] and table[steps] >= 0:")
    w.indent = "        "
    w.line("row = table[steps]")
    w.line("index[row] = steps")
    for k, names in enumerate(carry):
        w.store(f"s{k}", "row", names)
    w.indent = "    "
    outs = emit_graph(w, body, [*carry, *b_closure])
    w.assign([(names, new, v.dtype) for names, new, v in zip(carry, outs, carry_avals)])
    w.line("steps += 1")
    w.indent = ""
    results = [w.pack(k, names, v.dtype) for k, (names, v) in enumerate(zip(carry, carry_avals))]
    params += ["table", "limit", "index", *(f"s{k}" for k in range(n_carry))]
    return w.source(params, [*results, "steps", "within"]), w.constants


# the reverse sweep's instructions: (kind, argument) rows of an int64 array
RESTORE, STORE, ADVANCE, TURN = 0, 1, 2, 3


def translate_sweep(body, pullback, n_carry, floats_out):
    """``(source, constants)`` of a while loop's reverse sweep: ``fused(g0, ..., b0, ..., program, s0,
    ..., c0, ...)`` with the final carry's cotangents ``g``, the body's closure ``b``, the instructions
    ``program`` (rows ``(kind, argument)``: ``RESTORE``/``STORE`` the working carry from/into row
    ``argument`` of the stacks ``s``, ``ADVANCE`` it ``argument`` steps by ``body``, ``TURN``: one step's
    ``pullback``). ``pullback``'s inputs: the carry, the closure, the cotangents of the body's outputs
    ``floats_out``; its outputs: the cotangents of the carry and the closure. Returns those."""
    w = _Writer()
    carry_avals, closure_avals = body.inputs[:n_carry], body.inputs[n_carry:]
    g_params = [f"g{k}" for k in range(n_carry)]
    b_params = [f"b{k}" for k in range(len(closure_avals))]
    closure = [w.unpack(p, v.shape, v.dtype) for p, v in zip(b_params, closure_avals)]
    cts = variables("y", carry_avals)
    w.assign(
        [
            (names, w.unpack(f"g{k}", v.shape, v.dtype), v.dtype)
            for k, (names, v) in enumerate(zip(cts, carry_avals))
        ]
    )
    sums = variables("h", closure_avals)
    working = variables("x", carry_avals)
    w.assign(
        [
            (names, np.full(v.shape, "0", dtype=object), v.dtype)
            for names, v in [*zip(sums, closure_avals), *zip(working, carry_avals)]
        ]
    )
    w.line("for r in range(program.shape[0]):")
    w.line("    kind = program[r, 0]")
    w.line("    arg = program[r, 1]")
    w.line(f"    if kind == {RESTORE}:")
    w.indent = "        "
    for k, names in enumerate(working):
        w.load(names, f"s{k}", "arg")
    w.indent = "    "
    w.line(f"elif kind == {STORE}:")
    w.indent = "        "
    for k, names in enumerate(working):
        w.store(f"s{k}", "arg", names)
    w.indent = "    "
    w.line(f"elif kind == {ADVANCE}:")
    w.line("    for _ in range(arg):")
    w.indent = "            "
    outs = emit_graph(w, body, [*working, *closure])
    w.assign([(names, new, v.dtype) for names, new, v in zip(working, outs, carry_avals)])
    w.indent = "    "
    w.line("else:")
    w.indent = "        "
    grads = emit_graph(w, pullback, [*working, *closure, *[cts[k] for k in floats_out]])
    updates = [(names, new, v.dtype) for names, new, v in zip(cts, grads[:n_carry], carry_avals)]
    updates += [
        (names, w.added(names, new), v.dtype)
        for names, new, v in zip(sums, grads[n_carry:], closure_avals)
        if np.dtype(v.dtype).kind == "f"
    ]
    w.assign(updates)
    w.indent = ""
    results = [w.pack(k, names, v.dtype) for k, (names, v) in enumerate(zip(cts, carry_avals))]
    results += [w.pack(n_carry + k, names, v.dtype) for k, (names, v) in enumerate(zip(sums, closure_avals))]
    params = [*g_params, *b_params, "program", *(f"s{k}" for k in range(n_carry))]
    return w.source(params, results), w.constants


def _compiled(text, constants, wants, outs):
    """A runner of translated source ``text``: ``run(*args, extra=())`` -> the outputs as arrays (0-d
    ones made from scalars), or None while Numba compiles it (in the background) or where an argument
    is not a NumPy array of the traced dtype. ``extra``: arguments passed as they are (tables, stacks)."""
    ready = []

    def run(*args, extra=()):
        fn = (
            ready[0]
            if ready
            else fusion_compile.ready_later(("graph", text), lambda: fusion.compile_source(text))
        )
        if fn is None:
            return None
        if not ready:
            ready.append(fn)
        flat = []
        for a, (want, scalar) in zip(args, wants, strict=True):
            if (type(a) is not np.ndarray and not isinstance(a, np.generic)) or a.dtype != want:
                return None
            flat.append(a.item() if scalar else a)
        values = fn(*flat, *extra, *constants)
        return [np.asarray(v, dtype=d) if scalar else v for v, (d, scalar) in zip(values, outs)] + list(
            values[len(outs) :]
        )

    run.source = text
    return run


def while_function(cond, body, n_carry, n_cond):
    """The whole loop of ``translate_while`` as ``run(*args, extra=(table, limit, index, *stacks))`` ->
    ``[*final carry, steps, within]``, or None where it cannot be translated or Numba is missing;
    ``run`` returns None too while it compiles or for arrays it does not take."""
    inputs = [*body.inputs[:n_carry], *cond.inputs[n_carry:], *body.inputs[n_carry:]]
    return _translated(translate_while, (cond, body, n_carry, n_cond), inputs, body.inputs[:n_carry])


def sweep_function(body, pullback, n_carry, floats_out):
    """The reverse sweep of ``translate_sweep`` as ``run(*cotangents, *closure, extra=(program,
    *stacks))`` -> the cotangents of the carry and of the closure, or None (as ``while_function``)."""
    return _translated(translate_sweep, (body, pullback, n_carry, floats_out), body.inputs, body.inputs)
