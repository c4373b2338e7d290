"""Graph optimisation for ``pa.jit``: small passes over a captured ``polyad.graph.Graph``.

Each pass is a function ``Graph -> Graph`` that returns a new graph computing the same values (the input
graph is never changed); ``PASSES`` lists them in the order ``optimize`` runs them, and ``optimize`` runs
the list until nothing changes. The passes:

- ``simplify_algebra``: broadcasts, reshapes and casts to what the value already is disappear; chains of
  reshapes (``expand_dims``, ``squeeze``) become one reshape, chains of transposes (``permute_dims``,
  ``matrix_transpose``, ``moveaxis``) one permutation or none; ``-(-x)`` is ``x``; a ``*_like`` creation
  reads its shape from the earliest value of that shape and dtype, so it keeps nothing else alive;
- ``fold_symbolic``: values known to hold one number everywhere (``ones_like``, ``zeros_like``,
  ``full_like``, constants, literals, and what reshapes, broadcasts and casts make of them) are tracked:
  ``x * ones`` and ``x / ones`` are ``x``, ``x + zeros`` and ``x - zeros`` are ``x`` (the cotangent of
  ``sum`` is broadcast ones, so the first step of every gradient disappears);
- ``fold_constants``: a node whose inputs are all constants or literals, and a ``*_like`` creation, is
  evaluated once into a constant, unless its result is large (``FOLD_LIMIT``);
- ``eliminate_common_subexpressions``: a node with the same op, inputs and parameters as an earlier one
  is that one;
- ``eliminate_dead_code``: nodes whose results reach no output go, and so do constants no node reads
  (the loss value is dead in the graph of its gradient once its ``ones_like`` is a constant).

What the passes guarantee: every value keeps its shape and dtype, so the graph's outputs have exactly the
shapes and dtypes eager evaluation gives, and its values are the same bit for bit, except that an
addition of a zero no longer turns ``-0.0`` into ``0.0`` (they compare equal). ``x * 0`` is not folded
for floating ``x``: ``inf * 0`` is nan.

Example:
    >>> import numpy as np, polyad as pa
    >>> from polyad.graph.compiler import optimize
    >>> g = pa.make_graph(pa.grad(lambda x: pa.xp.sum(pa.xp.sin(x))), np.zeros(3))
    >>> [n.op.name for n in g.nodes]  # eager grad already skips multiplying by the seed's ones
    ['sin', 'sum', 'ones_like', 'reshape', 'broadcast_to', 'cos']
    >>> [n.op.name for n in optimize(g).nodes]
    ['cos']
"""

import math

import polyad.core as core
import polyad.core.dispatch as dispatch
from polyad.core.avals import dtype_name
from polyad.graph.ir import Const, Node, Var, check_graph, live_nodes, param_to_backend

# Folded constants up to this many elements are kept; a larger result stays a node (a constant is held
# for the life of the compiled function, and replay moves it to the replay's backend every call).
FOLD_LIMIT = 1 << 16

# Ops never folded, merged or rewritten: uninitialised memory, device moves, user ops (their kernels
# may not be pure or cheap to run at compile time) and the copy that guards outputs.
_OPAQUE = frozenset({"empty", "empty_like", "to_device", "asarray_copy"})

# One-array ops whose result holds the same number everywhere when their first input does.
_FILL_PRESERVING = frozenset(
    {
        "reshape", "broadcast_to", "expand_dims", "squeeze", "permute_dims", "matrix_transpose",
        "moveaxis", "positive", "flip", "roll", "tile", "repeat", "getitem", "take", "asarray_copy",
        "real", "conj", "stop_gradient",
    }
)  # fmt: skip
_RESHAPES = frozenset({"reshape", "expand_dims", "squeeze"})
_PERMUTATIONS = frozenset({"permute_dims", "matrix_transpose", "moveaxis"})


def _opaque(op):
    return op.name in _OPAQUE or "::" in op.name


# ------------------------------------------------------------------------------ rewriting machinery


class _Rewrite:
    """A graph being rebuilt node by node: ``read`` resolves a reference through the substitutions made
    so far, ``keep``/``emit`` append nodes, ``alias`` makes a node's output another value, ``finish``
    returns the new graph."""

    def __init__(self, graph):
        self.graph = graph
        self.consts = list(graph.consts)
        self.subst = {}
        self.nodes = []
        self.producer = {}  # var id -> the node (as emitted) that made it
        ids = [v.id for v in graph.inputs] + [o.id for n in graph.nodes for o in n.outputs]
        self.next_id = max(ids, default=-1) + 1

    def read(self, ref):
        if isinstance(ref, Var):
            return self.subst.get(ref.id, ref)
        return ref

    def inputs_of(self, node):
        return [self.read(r) for r in node.inputs]

    def keep(self, node, inputs, params=None):
        """Append ``node`` with ``inputs`` (and ``params``), reusing the object when nothing changed."""
        params = node.params if params is None else params
        if params is not node.params or any(a is not b for a, b in zip(inputs, node.inputs)):
            node = Node(node.op, inputs, params, node.outputs)
        self.nodes.append(node)
        for o in node.outputs:
            self.producer[o.id] = node
        return node

    def emit(self, op, inputs, params, like):
        """A new node computing ``op(*inputs, **params)`` whose output has ``like``'s shape and dtype."""
        out = Var(self.next_id, like.shape, like.dtype)
        self.next_id += 1
        node = Node(op, inputs, params, [out])
        self.nodes.append(node)
        self.producer[out.id] = node
        return out

    def alias(self, var, ref):
        self.subst[var.id] = ref

    def add_const(self, value):
        const = Const(len(self.consts), value)
        self.consts.append(value)
        return const

    def finish(self):
        g = self.graph
        outputs = [self.read(r) for r in g.outputs]
        return g.replace(nodes=self.nodes, outputs=outputs, consts=self.consts)


def _shape_of(ref, consts):
    if isinstance(ref, Var):
        return ref.shape
    if isinstance(ref, Const):
        return tuple(consts[ref.index].shape)
    return None


def _dtype_of(ref, consts):
    if isinstance(ref, Var):
        return dtype_name(ref.dtype)
    if isinstance(ref, Const):
        return dtype_name(consts[ref.index].dtype)
    return None


# ------------------------------------------------------------------------------ simplify_algebra


def _permutation(node, ndim):
    """The axes permutation a transpose-like node applies (``result.shape[j] == x.shape[perm[j]]``)."""
    name = node.op.name
    if name == "permute_dims":
        return tuple(a % ndim for a in node.params["axes"])
    if name == "matrix_transpose":
        return tuple(range(ndim - 2)) + (ndim - 1, ndim - 2)
    source, destination = node.params["source"], node.params["destination"]
    source = (source,) if isinstance(source, int) else tuple(source)
    destination = (destination,) if isinstance(destination, int) else tuple(destination)
    source = [s % ndim for s in source]
    destination = [d % ndim for d in destination]
    order = [n for n in range(ndim) if n not in source]
    for d, s in sorted(zip(destination, source)):
        order.insert(d, s)
    return tuple(order)


def _non_unit(shape):
    return tuple(i for i, s in enumerate(shape) if s != 1)


def _view_of_output(node, x, x_shape, out, views):
    """``(root, order)`` when ``node`` (a reshape that only adds or removes unit axes, or a transpose) makes
    ``out`` from ``x`` with non-unit axes ``order`` of ``root``; None for a reshape that merges or splits."""
    root, order = views.get(_ref_key(x), (x, _non_unit(x_shape)))
    if node.op.name in _RESHAPES:
        if [x_shape[i] for i in _non_unit(x_shape)] != [out.shape[i] for i in _non_unit(out.shape)]:
            return None
        return root, order
    perm = _permutation(node, len(out.shape))
    position = {axis: k for k, axis in enumerate(_non_unit(x_shape))}  # x's axis -> its non-unit rank
    return root, tuple(order[position[perm[j]]] for j in _non_unit(out.shape))


def _rewrite_view(rw, node, x, out, views):
    """Rewrite a chain of unit-axis reshapes and transposes ending in ``node`` as at most a transpose and
    a reshape of the chain's root (nothing when the chain is the identity). Returns whether ``node`` was
    replaced; records the view of its output either way."""
    consts = rw.consts
    found = _view_of_output(node, x, _shape_of(x, consts), out, views)
    if found is None:
        return False
    root, order = found
    views[("var", out.id)] = found
    replaced = _replace_view(rw, x, out, root, order)
    if replaced:
        views[_ref_key(rw.read(out))] = found
    return replaced


def _replace_view(rw, x, out, root, order):
    consts = rw.consts
    root_shape = _shape_of(root, consts)
    if root_shape == out.shape and order == _non_unit(root_shape):
        rw.alias(out, root)
        return True
    if root is x:
        return False  # one step from the root: nothing to merge
    if list(order) == sorted(order):
        rw.alias(out, rw.emit(core.OPS["reshape"], [root], {"shape": out.shape, "copy": None}, out))
        return True
    axes = order + tuple(i for i in range(len(root_shape)) if i not in order)
    permuted_shape = tuple(root_shape[i] for i in axes)
    permuted = rw.emit(core.OPS["permute_dims"], [root], {"axes": axes}, Var(-1, permuted_shape, out.dtype))
    if permuted_shape != out.shape:
        permuted = rw.emit(core.OPS["reshape"], [permuted], {"shape": out.shape, "copy": None}, out)
    rw.alias(out, permuted)
    return True


def simplify_algebra(graph):
    """Remove no-op broadcasts, reshapes, casts, double negations and transposes; merge reshape chains
    and transpose chains; write squares (``x**2``) as products; point ``*_like``
    creations at the earliest value of their shape and dtype.

    Args:
        graph: a ``polyad.graph.Graph``.

    Returns:
        A new ``Graph`` computing the same values.

    Example:
        >>> import numpy as np, polyad as pa
        >>> from polyad.graph.compiler.optimize import simplify_algebra
        >>> g = pa.make_graph(lambda x: pa.xp.permute_dims(x.mT, (1, 0)) + 1, np.ones((2, 3)))
        >>> print(simplify_algebra(g))  # the transposes are dead now: eliminate_dead_code drops them
        graph(%0: (2, 3) float64):
          %1 = matrix_transpose(%0)  # (3, 2) float64
          %3 = add(%0, 1)  # (2, 3) float64
          return %3
    """
    rw = _Rewrite(graph)
    consts = rw.consts
    witness = {}  # (shape, dtype) -> the earliest Var of that shape and dtype
    views = {}  # ref key -> (root, order): the value is root's non-unit axes in that order, unit axes aside
    for v in graph.inputs:
        witness.setdefault((v.shape, dtype_name(v.dtype)), v)
    for node in graph.nodes:
        inputs = rw.inputs_of(node)
        op, params = node.op, node.params
        name = op.name
        out = node.outputs[0]
        x = inputs[0] if inputs else None
        src = rw.producer.get(x.id) if isinstance(x, Var) else None
        same_type = (
            x is not None
            and not op.multiple_results
            and _shape_of(x, consts) == out.shape
            and _dtype_of(x, consts) == dtype_name(out.dtype)
        )
        if name in ("broadcast_to", "astype", "positive") and same_type and params.get("device") is None:
            rw.alias(out, x)
            continue
        if (name in _PERMUTATIONS or name in _RESHAPES and params.get("copy") is not True) and isinstance(
            x, Var | Const
        ):
            if _rewrite_view(rw, node, x, out, views):
                continue
            if name in _RESHAPES and src is not None and src.op.name in _RESHAPES:
                if src.params.get("copy") is not True:  # a reshape of a reshape: one reshape
                    root = src.inputs[0]
                    if _shape_of(root, consts) == out.shape:
                        rw.alias(out, root)
                    else:
                        reshape = core.OPS["reshape"]
                        rw.alias(out, rw.emit(reshape, [root], {"shape": out.shape, "copy": None}, out))
                    continue
        if name == "broadcast_to" and src is not None and src.op.name == "broadcast_to":
            rw.alias(out, rw.emit(op, [src.inputs[0]], {"shape": out.shape}, out))
            continue
        if name == "negative" and src is not None and src.op.name == "negative":
            rw.alias(out, src.inputs[0])
            continue
        if name == "pow" and same_type and len(inputs) == 2 and type(inputs[1]) in (int, float):
            # small literal powers as eager's kernel computes them (ops.elementwise.power_as_products, as
            # XLA's integer_pow): products, a reciprocal or a square root fuse into one pass where pow calls
            # libm for each element
            b, floating = inputs[1], dtype_name(out.dtype).startswith(("float", "complex"))
            if floating and b in (2, 3):
                square = rw.emit(core.OPS["multiply"], [x, x], {}, out)
                rw.alias(out, square if b == 2 else rw.emit(core.OPS["multiply"], [square, x], {}, out))
                continue
            if floating and b == -1:
                rw.alias(out, rw.emit(core.OPS["divide"], [1.0, x], {}, out))
                continue
            if b == 0.5 and dtype_name(out.dtype).startswith("float"):
                rw.alias(out, rw.emit(core.OPS["sqrt"], [x], {}, out))
                continue
        if op.shape_only is not None and isinstance(x, Var):
            # the creation needs only a shape and dtype: take them from a value that lives anyway
            w = witness.get((x.shape, dtype_name(x.dtype)))
            if w is not None and w is not x:
                inputs = [w] + inputs[1:]
        rw.keep(node, inputs)
        for o in node.outputs:
            witness.setdefault((o.shape, dtype_name(o.dtype)), o)
    return rw.finish()


# ------------------------------------------------------------------------------ fold_symbolic


def _python_number(value, dtype_name):
    """``value`` (a 0-d array) as the Python number it holds, or None for complex."""
    if dtype_name.startswith("complex"):
        return None
    if dtype_name == "bool":
        return bool(value)
    if "int" in dtype_name:
        return int(value)
    return float(value)


def _const_fill(array):
    """The one number every element of the small constant ``array`` holds, or None."""
    backend = dispatch.backend_of_array(array)
    if backend is None or not hasattr(array, "shape") or math.prod(array.shape) > FOLD_LIMIT:
        return None
    if math.prod(array.shape) == 0:
        return None
    xp = backend.xp
    try:
        flat = xp.reshape(array, (-1,))
        first = flat[0]
        if not bool(xp.all(flat == first)):
            return None
        return _python_number(first, dtype_name(array.dtype))
    except Exception:  # a library that cannot answer cheaply (lazy, exotic): no fact, no rewrite
        return None


def _is_one(v):
    return v is not None and v == 1


def _is_zero(v):
    return v is not None and v == 0


def fold_symbolic(graph):
    """Drop multiplications and divisions by ones and additions and subtractions of zeros.

    A value is known to hold one number everywhere when it comes from ``ones_like``, ``zeros_like`` or
    ``full_like``, is a small constant or a literal with one value, or is a reshape, broadcast, transpose,
    cast, selection or negation of such a value. ``x * ones``, ``ones * x``, ``x / ones``, ``x + zeros``,
    ``zeros + x`` and ``x - zeros`` then become ``x`` (cast when the result's dtype is wider than ``x``'s),
    provided ``x`` already has the result's shape: a broadcasting operand keeps its node. ``zeros * x``
    becomes ``zeros`` when ``x`` is an integer or boolean array or a finite fill (``inf * 0`` is nan, so a
    floating ``x`` keeps the product). Complex results
    keep their nodes (``(inf + 0j) * (1 + 0j)`` is not ``inf + 0j``).

    Args:
        graph: a ``polyad.graph.Graph``.

    Returns:
        A new ``Graph`` computing the same values (see the module notes on the sign of zero).

    Example:
        >>> import numpy as np, polyad as pa
        >>> from polyad.graph.compiler.optimize import fold_symbolic
        >>> g = pa.make_graph(lambda x: pa.xp.sin(x) * pa.xp.ones_like(x) + 0.0, np.ones(3))
        >>> [n.op.name for n in fold_symbolic(g).nodes]
        ['sin', 'ones_like']
    """
    rw = _Rewrite(graph)
    consts = rw.consts
    fills = {}  # Var id or ("c", const index) -> the number the value holds everywhere
    const_fills = {}

    def fill_of(ref):
        if isinstance(ref, Var):
            return fills.get(ref.id)
        if isinstance(ref, Const):
            if ref.index not in const_fills:
                const_fills[ref.index] = _const_fill(consts[ref.index])
            return const_fills[ref.index]
        if isinstance(ref, bool | int | float):
            return ref
        return None

    def is_array(ref):
        return isinstance(ref, Var | Const)

    for node in graph.nodes:
        inputs = rw.inputs_of(node)
        op, name, params = node.op, node.op.name, node.params
        out = node.outputs[0]
        out_dtype = dtype_name(out.dtype)
        if name in ("multiply", "divide", "add", "subtract") and not out_dtype.startswith("complex"):
            a, b = inputs
            fa, fb = fill_of(a), fill_of(b)
            keep_of = None
            if name == "multiply":
                keep_of = b if _is_one(fa) else a if _is_one(fb) else None
                if keep_of is None:
                    # zeros * x is zeros when x cannot be inf or nan (an integer, or a finite fill)
                    keep_of = _zero_product(a, fa, b, fb, consts) or _zero_product(b, fb, a, fa, consts)
            elif name == "divide":
                keep_of = a if _is_one(fb) else None
            elif name == "add":
                keep_of = b if _is_zero(fa) else a if _is_zero(fb) else None
            elif name == "subtract":
                keep_of = a if _is_zero(fb) else None
            if keep_of is not None and is_array(keep_of) and _shape_of(keep_of, consts) == out.shape:
                if _dtype_of(keep_of, consts) == out_dtype:
                    rw.alias(out, keep_of)
                    fills_of_kept = fill_of(keep_of)
                    if fills_of_kept is not None:
                        fills[out.id] = fills_of_kept
                    continue
                if _widens(_dtype_of(keep_of, consts), out_dtype):
                    cast = rw.emit(
                        core.OPS["astype"], [keep_of], {"dtype": out.dtype, "copy": True, "device": None}, out
                    )
                    rw.alias(out, cast)
                    continue
        rw.keep(node, inputs)
        if op.multiple_results:
            continue
        # what this node's value is known to hold everywhere
        if op.shape_only is not None:
            if name == "ones_like":
                fills[out.id] = _python_number_of(1, out_dtype)
            elif name == "zeros_like":
                fills[out.id] = _python_number_of(0, out_dtype)
            elif name == "full_like" and isinstance(params.get("fill_value"), bool | int | float):
                fills[out.id] = _python_number_of(params["fill_value"], out_dtype)
        elif name in _FILL_PRESERVING or name == "astype":
            f = fill_of(inputs[0]) if inputs else None
            if f is not None:
                fills[out.id] = _python_number_of(f, out_dtype)
        elif name == "negative":
            f = fill_of(inputs[0])
            if f is not None and not isinstance(f, bool):
                fills[out.id] = -f
    return rw.finish()


def _zero_product(zero, f_zero, other, f_other, consts):
    """``zero`` when it holds zeros and ``other`` is never inf or nan, so their product is ``zero``."""
    if not _is_zero(f_zero) or not isinstance(zero, Var | Const):
        return None
    kind = _dtype_of(other, consts) if isinstance(other, Var | Const) else type(other).__name__
    finite = f_other is not None and math.isfinite(f_other)
    if finite or kind == "bool" or "int" in (kind or ""):
        return zero
    return None


def _python_number_of(value, dtype_name):
    """``value`` converted as a cast to ``dtype_name`` would (None when unsure: complex)."""
    if dtype_name.startswith("complex"):
        return None
    if dtype_name == "bool":
        return bool(value)
    if "int" in dtype_name:
        return int(value) if not isinstance(value, float) or math.isfinite(value) else None
    return float(value)


# The casts that are exact for every value: astype(x, wider) * 1 == astype(x, wider)
_EXACT_WIDENING = {
    "bool": {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64"},
    "int8": {"int16", "int32", "int64", "float32", "float64"},
    "int16": {"int32", "int64", "float32", "float64"},
    "int32": {"int64", "float64"},
    "uint8": {"int16", "int32", "int64", "uint16", "uint32", "uint64", "float32", "float64"},
    "uint16": {"int32", "int64", "uint32", "uint64", "float32", "float64"},
    "uint32": {"int64", "uint64", "float64"},
    "float32": {"float64"},
}


def _widens(source, target):
    return target in _EXACT_WIDENING.get(source, ())


# ------------------------------------------------------------------------------ fold_constants


def _backend_of_graph(graph):
    for c in graph.consts:
        backend = dispatch.backend_of_array(c)
        if backend is not None:
            return backend
    return dispatch.default_backend()


def fold_constants(graph):
    """Evaluate, once, each node whose inputs are all constants or literals, and each ``*_like``
    creation; the results become constants of the graph. A result of more than ``FOLD_LIMIT``
    elements that is also larger than every constant it reads stays a node.

    Args:
        graph: a ``polyad.graph.Graph``.

    Returns:
        A new ``Graph`` computing the same values (constants no node reads any more are left for
        ``eliminate_dead_code``).

    Example:
        >>> import numpy as np, polyad as pa
        >>> from polyad.graph.compiler.optimize import fold_constants
        >>> g = pa.make_graph(pa.grad(lambda x: pa.xp.sum(x * 3.0)), np.ones(2))
        >>> [n.op.name for n in g.nodes]
        ['multiply', 'sum', 'ones_like', 'reshape', 'broadcast_to', 'multiply']
        >>> [n.op.name for n in fold_constants(g).nodes]  # the gradient is a constant: 3 everywhere
        ['multiply', 'sum']
    """
    rw = _Rewrite(graph)
    consts = rw.consts
    backend = None
    for node in graph.nodes:
        inputs = rw.inputs_of(node)
        op = node.op
        sizes = [math.prod(o.shape) for o in node.outputs]
        if _opaque(op) or op.higher_order is not None:
            rw.keep(node, inputs)
            continue
        values = None
        if op.shape_only is not None and isinstance(inputs[0], Var | Const) and max(sizes) <= FOLD_LIMIT:
            like = inputs[0]
            if backend is None:
                backend = _backend_of_graph(graph)
            shape = _shape_of(like, consts)
            dtype = node.params.get("dtype") or (
                like.dtype if isinstance(like, Var) else consts[like.index].dtype
            )
            rest = {k: v for k, v in node.params.items() if k != "dtype"}
            try:
                values = [op.shape_only(backend.xp, shape, param_to_backend(dtype, backend), **rest)]
            except Exception:  # a creation this backend refuses at compile time: leave it to run time
                values = None
        elif (
            inputs
            and not any(isinstance(r, Var) for r in inputs)
            and any(isinstance(r, Const) for r in inputs)
        ):
            largest = max(math.prod(consts[r.index].shape) for r in inputs if isinstance(r, Const))
            if max(sizes) <= max(FOLD_LIMIT, largest):
                args = [consts[r.index] if isinstance(r, Const) else r for r in inputs]
                try:
                    out = core.eval_raw(op, args, node.params)
                    values = list(out) if op.multiple_results else [out]
                except Exception:  # the op fails on these constants: it fails at run time too, as eager does
                    values = None
        if values is None or not all(_matches(v, o) for v, o in zip(values, node.outputs)):
            rw.keep(node, inputs)
            continue
        for o, v in zip(node.outputs, values):
            rw.alias(o, rw.add_const(v))
    return rw.finish()


def _matches(value, var):
    return tuple(getattr(value, "shape", ())) == var.shape and dtype_name(getattr(value, "dtype", None)) == (
        dtype_name(var.dtype)
    )


# ------------------------------------------------------------------------------ common subexpressions


_SAFE_SCALARS = (bool, int, str, type(None), type(Ellipsis))


def _freeze(value):
    """A hashable key equal for equal parameters (floats by bits: ``0.0`` and ``-0.0`` differ, ``1`` and
    ``1.0`` and ``True`` differ); anything not understood is keyed by identity."""
    if isinstance(value, float):
        return ("float", value.hex())
    if isinstance(value, complex):
        return ("complex", value.real.hex(), value.imag.hex())
    if isinstance(value, _SAFE_SCALARS):
        return (type(value).__name__, value)
    if isinstance(value, tuple | list):
        return (type(value).__name__, tuple(_freeze(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((k, _freeze(v)) for k, v in sorted(value.items())))
    if isinstance(value, slice):
        return ("slice", _freeze(value.start), _freeze(value.stop), _freeze(value.step))
    if isinstance(value, type) or "dtype" in type(value).__name__.lower():
        return ("dtype", dtype_name(value))
    return ("id", id(value))


def _ref_key(ref):
    if isinstance(ref, Var):
        return ("var", ref.id)
    if isinstance(ref, Const):
        return ("const", ref.index)
    return _freeze(ref)


def eliminate_common_subexpressions(graph):
    """Make each node that repeats an earlier one (same op, same inputs, equal parameters) that one.

    Uninitialised creations, device moves and user ops are never merged.

    Args:
        graph: a ``polyad.graph.Graph``.

    Returns:
        A new ``Graph`` computing the same values.

    Example:
        >>> import numpy as np, polyad as pa
        >>> from polyad.graph.compiler.optimize import eliminate_common_subexpressions
        >>> g = pa.make_graph(lambda x: pa.xp.sin(x) + pa.xp.sin(x), np.ones(3))
        >>> [n.op.name for n in eliminate_common_subexpressions(g).nodes]
        ['sin', 'add']
    """
    rw = _Rewrite(graph)
    seen = {}
    for node in graph.nodes:
        inputs = rw.inputs_of(node)
        if _opaque(node.op):
            rw.keep(node, inputs)
            continue
        key = (
            node.op,
            tuple(_ref_key(r) for r in inputs),
            _freeze(node.params),
            tuple((o.shape, dtype_name(o.dtype)) for o in node.outputs),
        )
        earlier = seen.get(key)
        if earlier is not None:
            for o, e in zip(node.outputs, earlier.outputs):
                rw.alias(o, e)
            continue
        seen[key] = rw.keep(node, inputs)
    return rw.finish()


# ------------------------------------------------------------------------------ dead code


def eliminate_dead_code(graph):
    """Drop the nodes whose results reach no output (ops are pure), and the constants no node reads.

    Unlike the code generator's pruning (the same ``live_nodes``), a ``*_like`` creation keeps its input
    alive here, since
    replaying the graph (``graph(x)``, transforms of it) reads it; ``fold_constants`` and
    ``simplify_algebra`` are what free such inputs.

    Args:
        graph: a ``polyad.graph.Graph``.

    Returns:
        A new ``Graph`` with the live nodes in their order and its constants renumbered.

    Example:
        >>> import numpy as np, polyad as pa
        >>> from polyad.graph.compiler.optimize import eliminate_dead_code
        >>> def f(x):
        ...     unused = pa.xp.exp(x)
        ...     return pa.xp.sin(x)
        >>> [n.op.name for n in eliminate_dead_code(pa.make_graph(f, np.ones(3))).nodes]
        ['sin']
    """
    live = [node for _, node in live_nodes(graph.nodes, graph.outputs, shape_only_frees=False)]
    # renumber the constants still read
    used = {}
    consts = []

    def renumber(ref):
        if not isinstance(ref, Const):
            return ref
        if ref.index not in used:
            # the same object when its number does not change, so an unchanged graph is recognisable
            used[ref.index] = ref if ref.index == len(consts) else Const(len(consts), graph.consts[ref.index])
            consts.append(graph.consts[ref.index])
        return used[ref.index]

    nodes = []
    for node in live:
        inputs = [renumber(r) for r in node.inputs]
        if any(a is not b for a, b in zip(inputs, node.inputs)):
            node = Node(node.op, inputs, node.params, node.outputs)
        nodes.append(node)
    outputs = [renumber(r) for r in graph.outputs]
    return graph.replace(nodes=nodes, outputs=outputs, consts=consts)


# ------------------------------------------------------------------------------ the pipeline


PASSES = (
    simplify_algebra,
    fold_symbolic,
    fold_constants,
    eliminate_common_subexpressions,
    eliminate_dead_code,
)


def _protect_outputs(original, optimized):
    """Outputs that optimisation turned into an input, a constant or a repeat of another output are
    copied: eager evaluation returned a new array there, and a caller writing into it must not change
    the argument, the next call's result or the other output."""
    made = {o.id for n in original.nodes for o in n.outputs}
    seen = set()
    rw = None
    outputs = list(optimized.outputs)
    inputs = {v.id for v in optimized.inputs}
    for i, (before, after) in enumerate(zip(original.outputs, optimized.outputs)):
        key = _ref_key(after)
        aliased = isinstance(after, Const) or (isinstance(after, Var) and after.id in inputs) or key in seen
        seen.add(key)
        if not (isinstance(before, Var) and before.id in made and aliased and isinstance(after, Var | Const)):
            continue
        if rw is None:
            rw = _Rewrite(optimized)
            for node in optimized.nodes:
                rw.keep(node, node.inputs)
        like = before
        outputs[i] = rw.emit(core.OPS["asarray_copy"], [after], {}, like)
    if rw is None:
        return optimized
    g = optimized
    return g.replace(nodes=rw.nodes, outputs=outputs, consts=rw.consts)


def _fingerprint(graph):
    """Identifies an unchanged graph: the passes hand back the very node objects they did not change."""
    return tuple(map(id, graph.nodes)), len(graph.consts), tuple(_ref_key(r) for r in graph.outputs)


def optimize(graph, *, passes=PASSES, max_rounds=8):
    """``graph`` simplified by ``passes`` (default ``PASSES``), run in order until nothing changes.

    Args:
        graph: a ``polyad.graph.Graph`` (``pa.make_graph``); it is not modified.
        passes: the passes to run, each a function ``Graph -> Graph``.
        max_rounds: at most this many rounds of the whole list.

    Returns:
        A new ``Graph`` computing the same values, with the same inputs and output structure; outputs
        that became an input, a constant or a repeat of another output are fresh copies. A pre-dispatch
        graph (``make_graph(..., pre_dispatch=True)``, with transform nodes) comes back unchanged.

    Example:
        >>> import numpy as np, polyad as pa
        >>> from polyad.graph.compiler import optimize
        >>> g = optimize(pa.make_graph(pa.grad(lambda x: pa.xp.sum(x * x)), np.ones(2)))
        >>> g(np.array([1.0, 3.0]))
        array([2., 6.])
    """
    check_graph(graph, "optimize(graph)")
    if any(hasattr(n, "run") for n in graph.nodes):
        return graph  # a pre-dispatch graph: its transform nodes read free variables the passes cannot see
    result = graph
    for _ in range(max_rounds):
        before = _fingerprint(result)
        for p in passes:
            result = p(result)
        if _fingerprint(result) == before:
            break
    return _protect_outputs(graph, result)
