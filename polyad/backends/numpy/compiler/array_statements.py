"""The array-valued statements of ``graph_function.py``: a value of more than ``graph_function``'s
``MAX_ELEMENTS`` elements (a thousand-point state of a method of lines) is one Numba array variable
(``Big``), and an op with such a value among its inputs or outputs one NumPy statement on arrays in the
compiled function, with NumPy's broadcasting; smaller values stay scalars and are gathered into an array
where a statement needs one. So a whole loop of a mid-sized state still runs with no Python per step:
each op allocates its result (a microsecond for a thousand elements), where op by op from Python it cost
a kernel call of several microseconds.
"""

import math

import numpy as np

from .expressions import NUMBA


class Big:
    """An array variable of the written function: its name, shape and dtype."""

    __slots__ = ("name", "shape", "dtype")

    def __init__(self, name, shape, dtype):
        self.name, self.shape, self.dtype = name, tuple(shape), np.dtype(dtype)


# element-wise ops whose Python expression is the same on scalars and on arrays (NumPy's semantics)
ELEMENTWISE = {
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
    "isnan": "np.isnan({0})",
    "isfinite": "np.isfinite({0})",
    "isinf": "np.isinf({0})",
    "nextafter": "np.nextafter({0}, {1})",
    "floor": "np.floor({0})",
    "ceil": "np.ceil({0})",
    "trunc": "np.trunc({0})",
    "floor_divide": "({0} // {1})",
}
# element-wise ops on arrays (an argument may be a scalar); NumPy's ufuncs as Numba implements them
ARRAY = {
    **ELEMENTWISE,
    **{k: v for k, v in NUMBA.items() if v.startswith("(") and " if " not in v},
    **{k: v for k, v in NUMBA.items() if v.startswith("np.")},
    "abs": "np.abs({0})",
    "maximum": "np.maximum({0}, {1})",
    "minimum": "np.minimum({0}, {1})",
    "where": "choices.where({0}, {1}, {2})",
    "zero_safe_multiply": "choices.zero_safe_multiply({0}, {1})",
    "zero_safe_divide": "choices.zero_safe_divide({0}, {1})",
    "logical_and": "np.logical_and({0}, {1})",
    "logical_or": "np.logical_or({0}, {1})",
    "logical_not": "np.logical_not({0})",
}
IDENTITY = frozenset(("stop_gradient", "positive"))


def key_source(key):
    """A static index as source (its parts are checked by ``graph_function._static_key``)."""
    parts = key if isinstance(key, tuple) else (key,)
    out = []
    for k in parts:
        if isinstance(k, slice):
            text = ":".join("" if v is None else str(v) for v in (k.start, k.stop))
            out.append(text + ("" if k.step is None else f":{k.step}"))
        else:
            out.append("..." if k is Ellipsis else str(k))
    return ", ".join(out) + ("," if len(out) == 1 else "")


def array_node(w, node, args, untranslatable):
    """The statements of one node with an array value among its inputs or outputs, written by ``w``;
    ``args``: each input a ``Big``, or a names array (``graph_function``'s scalars). Returns each
    output as a ``Big``, or a names array where it is small. Raises ``untranslatable`` for what has no
    statement here."""
    name, outs, params = node.op.name, node.outputs, node.params
    small_max = w.small_max

    def source(a):  # an input as an array expression, or a scalar's name
        if isinstance(a, Big):
            return a.name
        if not a.shape:
            return a[()]
        return w.emit(f"np.array([{', '.join(a.ravel())}]).reshape({a.shape})")

    srcs = [source(a) for a in args]
    shape = tuple(outs[0].shape)
    if name in IDENTITY:
        return [args[0]]
    if name in ARRAY and len(outs) == 1 and not params:
        expr = ARRAY[name].format(*srcs)
        if w.uses.get(outs[0].id, 0) == 1 and math.prod(shape) > small_max:
            # read once: its expression goes into its reader's, so that a chain of element-wise ops is
            # one array expression, which Numba compiles to one loop with no array in between
            return [Big(f"({expr})", shape, outs[0].dtype)]
    elif name == "getitem" and len(args) == 1:
        expr = f"{srcs[0]}[{key_source(params['key'])}]"
    elif name in ("reshape", "expand_dims", "squeeze"):
        expr = f"np.ascontiguousarray({srcs[0]}).reshape({shape})"
    elif name == "broadcast_to":
        expr = f"np.broadcast_to({srcs[0]}, {shape})" if args[0].shape else f"np.full({shape}, {srcs[0]})"
    elif name == "roll" and len(args[0].shape) == 1 and isinstance(params.get("shift"), int):
        expr = f"np.roll({srcs[0]}, {params['shift']})"
    elif name == "permute_dims":
        expr = f"np.ascontiguousarray(np.transpose({srcs[0]}, {tuple(params['axes'])}))"
    elif name == "matrix_transpose" and len(args[0].shape) == 2:
        expr = f"np.ascontiguousarray({srcs[0]}.T)"
    elif name == "stack" and all(a.shape for a in args):
        expr = f"np.stack(({', '.join(srcs)},), {int(params.get('axis', 0))})"
    elif name == "concat" and params.get("axis", 0) is not None and all(a.shape for a in args):
        expr = f"np.concatenate(({', '.join(srcs)},), {int(params.get('axis', 0))})"
    elif name == "unstack" and params.get("axis", 0) == 0:
        return [_result(w, f"{srcs[0]}[{k}]", o, small_max) for k, o in enumerate(outs)]
    elif name == "index_update" and len(args) == 2:
        target = w.emit(f"{srcs[0]}.copy()")
        w.line(f"{target}[{key_source(params['key'])}] = {srcs[1]}")
        return [Big(target, shape, outs[0].dtype)]
    elif name == "asarray_copy":
        expr = f"{srcs[0]}.copy()"
    elif name == "astype":
        cast = {"f": "np.float64", "i": "np.int64", "b": "np.bool_"}[np.dtype(outs[0].dtype).kind]
        expr = f"{srcs[0]}.astype({cast})"
    elif name == "sum" and params.get("dtype") is None:
        expr = _sum(srcs[0], args[0].shape, params.get("axis"), shape)
    else:
        raise untranslatable(f"{name} on arrays (no translation)")
    return [_result(w, expr, outs[0], small_max)]


def _sum(src, in_shape, axis, shape):
    nd = len(in_shape)
    axes = sorted(
        {a % nd for a in (range(nd) if axis is None else axis if isinstance(axis, tuple) else (axis,))}
    )
    if len(axes) == nd:
        return f"np.sum({src})" if not shape else f"np.full({shape}, np.sum({src}))"
    for a in reversed(axes):
        src = f"np.sum({src}, axis={a})"
    return f"np.ascontiguousarray({src}).reshape({shape})"


def _result(w, expr, out, small_max):
    """An output: an array variable where it is large, else its elements as scalars."""
    name = w.emit(expr)
    shape = tuple(out.shape)
    if math.prod(shape) > small_max:
        return Big(name, shape, out.dtype)
    names = np.empty(shape, dtype=object)
    if not shape:
        names[()] = name
        return names
    flat = w.emit(f"np.ascontiguousarray({name}).ravel()")
    for k, index in enumerate(np.ndindex(*shape)):
        names[index] = w.emit(f"{flat}[{k}]")
    return names
