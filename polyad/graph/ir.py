"""The IR: a captured computation's atoms (``Var``, ``Const``, ``Node``), dead-code elimination
(``live_nodes``), the checks a graph's inputs must pass, and the moves of its values between backends.
``Graph`` (``polyad.graph.graph``) is built from these; so is the compiler's code (``polyad.graph.compiler``).
"""

import array_api_compat

import polyad.core.dispatch as dispatch
from polyad.core import Tensor
from polyad.core.avals import dtype_name


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
    nodes = getattr(v, "nodes", None)  # a graph carried as a parameter (call_delegate's, a loop's body)
    if isinstance(nodes, list):
        return f"<graph of {len(nodes)} nodes>"
    return repr(v)


def live_nodes(nodes, outputs, *, shape_only_frees=True):
    """``(index, node)`` of the nodes whose results reach an output, in order (ops have no side effects):
    dead-code elimination, for the optimiser and the code generator alike. With ``shape_only_frees``, a
    shape-only ``*_like`` node does not keep its input alive (compiled code creates it from the recorded
    shape); without, it does (a replay reads it)."""
    needed = {r.id for r in outputs if isinstance(r, Var)}
    live = []
    for i in range(len(nodes) - 1, -1, -1):
        node = nodes[i]
        if not any(o.id in needed for o in node.outputs):
            continue
        live.append((i, node))
        if shape_only_frees and node.op.shape_only is not None and node.inputs:
            if isinstance(node.inputs[0], Var):
                continue
        needed.update(r.id for r in node.inputs if isinstance(r, Var))
    return live[::-1]


def check_graph(graph, where):
    """Raise a TypeError naming ``where`` unless ``graph`` is a ``polyad.graph.Graph`` (anything with its
    structure and ``replace``: the compiler's passes take it, and build their results with it)."""
    if not all(hasattr(graph, a) for a in ("inputs", "nodes", "outputs", "consts", "replace")):
        raise TypeError(f"{where}: expected a polyad.graph.Graph, got {type(graph).__name__}")


def backend_arg(backend, where):
    """The Backend named ``backend`` (None: the default one); errors name ``where``."""
    if backend is None:
        return dispatch.default_backend()
    if not isinstance(backend, str):
        raise TypeError(f"{where}(backend={backend!r}): backend must be None or a backend name (a str)")
    return dispatch.load_backend(backend)


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
            f"has dtype {dtype_name(x.dtype)}, expected {_signature_of(v)}; capture the graph again for "
            "another dtype"
        )
    return None


def _same_dtype(a, b):
    """Whether dtypes ``a`` and ``b`` (perhaps of two libraries) are the same dtype; by name only across
    libraries (``str`` of a NumPy dtype costs microseconds)."""
    return a == b if type(a) is type(b) else dtype_name(a) == dtype_name(b)


def _signature_of(v):
    return f"shape {v.shape} and dtype {dtype_name(v.dtype)}"


def to_backend(array, backend, device=None):
    """``array`` as an array of ``backend`` (on ``device`` when given: the device a graph is compiled for,
    where constants folded at compile time on the default device must move once)."""
    if dispatch.backend_of_array(array) is not backend:
        try:
            array = backend.xp.from_dlpack(array)
        except Exception:  # a library without DLPack interchange for this pair: go through a copy
            array = backend.xp.asarray(array)
    if device is not None and not dispatch.same_device(array.device, device):
        array = array_api_compat.to_device(array, device)
    return array


_DTYPE_NAMES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                "float32", "float64", "complex64", "complex128")  # fmt: skip


def param_to_backend(value, backend):
    # dtypes recorded on one backend become the same-named dtypes of another; NumPy's scalar types too
    # (``polyad.xp.int64`` on the numpy default backend, recorded for another library's arrays)
    if isinstance(value, type) and value.__module__ == "numpy":
        name = value.__name__
        return getattr(backend.xp, name) if name in _DTYPE_NAMES else value
    name = str(value)
    if hasattr(value, "__class__") and (
        "dtype" in type(value).__name__.lower() or "DType" in type(value).__name__
    ):
        for candidate in _DTYPE_NAMES:
            if name.endswith(candidate) and not name.endswith("u" + candidate):
                return getattr(backend.xp, candidate)
    return value
