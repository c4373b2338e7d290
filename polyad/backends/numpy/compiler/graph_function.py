"""A graph of small values as one Numba function of scalars: every element of every value is a local
variable of one compiled body, as XLA unrolls a small while loop's step, so that a loop step on a small
state (an ODE's few states and its step-size control) costs one call with no allocation, where op by op
it cost one kernel call per op (several microseconds each: all of a small op's time).

``graph_function(graph, fallback)`` (the NumPy backend's ``fusion.graph_function``) returns a function
of the graph's flat inputs, or None where ``translate`` cannot (an op with no translation here, a value
of more than ``MAX_ELEMENTS`` elements, a dtype but float64, int64 and bool): then the caller keeps its
straight-line code. The function runs ``fallback`` (that code) on anything but NumPy arrays of the
traced dtypes, and until Numba has compiled the body (``fusion_compile``: in the background, as the
fused loops; at once under ``waiting()``).

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
    >>> print(translate(g)[0])
    def fused(a0):
        a0_0 = a0[0]
        a0_1 = a0[1]
        t0 = (a0_0 * a0_0)
        t1 = (a0_1 * a0_1)
        t2 = (t0 + (0.0 + t1))
        t3 = (t2 + 1.0)
        return (t3,)
    <BLANKLINE>
"""

import math

import numpy as np

from . import fusion, fusion_compile
from .expressions import NUMBA

DTYPES = {np.dtype(np.float64): "np.float64", np.dtype(np.int64): "np.int64", np.dtype(np.bool_): "np.bool_"}
MAX_ELEMENTS = 256  # elements of one value: larger ones are the fused loops' (threads, fast math)
MAX_STATEMENTS = 20_000  # of one function: Numba's compile time grows with them (about 1 s per 5,000)

SCALAR = {
    **{k: v for k, v in NUMBA.items() if k != "broadcast_to"},
    "equal": "({0} == {1})",
    "not_equal": "({0} != {1})",
    "less": "({0} < {1})",
    "less_equal": "({0} <= {1})",
    "greater": "({0} > {1})",
    "greater_equal": "({0} >= {1})",
    "bitwise_and": "({0} & {1})",
    "bitwise_or": "({0} | {1})",
    "bitwise_xor": "({0} ^ {1})",
    "bitwise_invert": "(~{0})",
    "logical_and": "({0} and {1})",
    "logical_or": "({0} or {1})",
    "logical_not": "(not {0})",
    "isnan": "np.isnan({0})",
    "isfinite": "np.isfinite({0})",
    "isinf": "np.isinf({0})",
    "nextafter": "np.nextafter({0}, {1})",
    "floor": "np.floor({0})",
    "ceil": "np.ceil({0})",
    "trunc": "np.trunc({0})",
    "floor_divide": "({0} // {1})",
}

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
    """The body being written: statements, fresh names, and the names array of each graph value."""

    def __init__(self):
        self.lines = []
        self.count = 0

    def emit(self, expression):
        name = f"t{self.count}"
        self.count += 1
        self.lines.append(f"{name} = {expression}")
        if len(self.lines) > MAX_STATEMENTS:
            raise Untranslatable(f"more than {MAX_STATEMENTS} statements")
        return name

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


def translate(graph):
    """``(source, constants)``: the graph as the source of ``fused(a0, ..., c0, ...)``, which returns a
    tuple of its outputs (new arrays; Python numbers for shape ()), and the values its ``c`` arguments
    take (the graph's constants and what its shape-only nodes create). Raises ``Untranslatable``."""
    from polyad.graph.ir import Const, Var, live_nodes  # noqa: PLC0415 -- the graph layer is above

    w = _Writer()
    values, params, constants, const_names = {}, [], [], {}

    def check(shape, dtype):
        if np.dtype(dtype) not in DTYPES:
            raise Untranslatable(f"a value of dtype {np.dtype(dtype)}")
        if math.prod(shape) > MAX_ELEMENTS:
            raise Untranslatable(f"a value of {math.prod(shape)} elements (over {MAX_ELEMENTS})")

    def unpacked(arg, shape):
        names = np.empty(shape, dtype=object)
        if not shape:
            names[()] = arg
            return names
        for index in np.ndindex(*shape):
            names[index] = f"{arg}_{'_'.join(map(str, index))}"
            w.lines.append(f"{names[index]} = {arg}[{', '.join(map(str, index))}]")
        return names

    def constant(value):
        value = np.asarray(value)
        check(value.shape, value.dtype)
        constants.append(value.item() if not value.shape else value)
        return unpacked(f"c{len(constants) - 1}", value.shape)

    def names_of(ref):
        if isinstance(ref, Var):
            return values[ref.id]
        if isinstance(ref, Const):
            if ref.index not in const_names:
                const_names[ref.index] = constant(graph.consts[ref.index])
            return const_names[ref.index]
        if hasattr(ref, "shape"):
            raise Untranslatable("an array literal")
        return np.array(_literal(ref), dtype=object)

    for k, v in enumerate(graph.inputs):
        check(v.shape, v.dtype)
        params.append(f"a{k}")
        values[v.id] = unpacked(f"a{k}", v.shape)
    for _, node in live_nodes(graph.nodes, graph.outputs):
        op, outs = node.op, node.outputs
        for o in outs:
            check(o.shape, o.dtype)
        if op.shape_only is not None and node.inputs and isinstance(node.inputs[0], Var):
            like = node.inputs[0]
            rest = {k: v for k, v in node.params.items() if k not in ("dtype", "device")}
            made = op.shape_only(np, like.shape, node.params.get("dtype") or np.dtype(like.dtype), **rest)
            values[outs[0].id] = constant(made)
            continue
        if op.higher_order is not None:
            raise Untranslatable(f"{op.name} (a body of its own)")
        args = [names_of(r) for r in node.inputs]
        name = op.name
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
        if values[outs[0].id].shape != tuple(outs[0].shape):
            raise Untranslatable(f"{name}: shape {values[outs[0].id].shape} where {outs[0].shape} was traced")
    params += [f"c{k}" for k in range(len(constants))]
    results = []
    for k, ref in enumerate(graph.outputs):
        names = names_of(ref)
        if not names.shape:
            results.append(names[()])
            continue
        dtype = DTYPES[np.dtype(ref.dtype if hasattr(ref, "dtype") else np.asarray(ref).dtype)]
        w.lines.append(f"o{k} = np.empty({tuple(names.shape)}, {dtype})")
        for index in np.ndindex(*names.shape):
            w.lines.append(f"o{k}[{', '.join(map(str, index))}] = {names[index]}")
        results.append(f"o{k}")
    body = [f"def fused({', '.join(params)}):", *[f"    {s}" for s in w.lines]]
    body.append(f"    return ({', '.join(results)},)")
    return "\n".join(body) + "\n", constants


def graph_function(graph, fallback):
    """``graph`` as one Numba function of its flat inputs (NumPy arrays), or None where ``translate``
    cannot or Numba is missing (the caller keeps ``fallback``, the graph's straight-line code). The
    function runs ``fallback`` on other arrays (array_api_strict's, another dtype) and until Numba has
    compiled the body (in the background, as the fused loops; at once under ``fusion_compile.waiting``)."""
    if not fusion.available():
        return None
    try:
        text, constants = translate(graph)
    except Untranslatable:
        return None
    wants = [(np.dtype(v.dtype), not v.shape) for v in graph.inputs]
    outs = [
        (np.dtype(r.dtype if hasattr(r, "dtype") else np.asarray(r).dtype), not getattr(r, "shape", ()))
        for r in graph.outputs
    ]
    ready = []

    def run(*args):
        fn = ready[0] if ready else fusion_compile.ready(("graph", text), lambda: fusion._compile(text))
        if fn is None:
            return fallback(*args)
        if not ready:
            ready.append(fn)
        flat = []
        for a, (want, scalar) in zip(args, wants):
            if (type(a) is not np.ndarray and not isinstance(a, np.generic)) or a.dtype != want:
                return fallback(*args)
            flat.append(a.item() if scalar else a)
        values = fn(*flat, *constants)
        return tuple(np.asarray(v, dtype=d) if scalar else v for v, (d, scalar) in zip(values, outs))

    run.source = text
    return run
