"""In-place reuse of dead buffers for compiled graphs (``reuse_buffers``), on backends whose elementwise
functions take ``out=`` (NumPy's and CuPy's ufuncs; array_api_strict and Dask have no ``out=``).

A large elementwise result written into the buffer of an input that nothing reads afterwards saves an
allocation, and with it the page faults of touching fresh memory: on NumPy, for arrays of megabytes,
those cost as much as the arithmetic (``scripts/bench_optimize.py`` prints the figures). Small arrays
gain nothing (the allocator recycles them) and pay for the ``out=`` keyword, so only results of at least
``REUSE_MIN_BYTES`` are planned.

The plan is carried by the nodes themselves: a reused node's op is an in-place variant of the original
(``InPlace``) whose kernel calls the backend ufunc with ``out=`` set to one of its inputs, so
``Graph.compile`` needs nothing new. The variant is a higher-order op whose body is the original op:
transforms of the planned graph, and replay on a backend without ``out=``, compute out of place.
"""

import math

import polyad.backends as backends
import polyad.core as core
import polyad.core.dispatch as dispatch
from polyad.graph.ir import Node, Var, check_graph
from polyad.transforms.abstract import ABSTRACT_EVAL

REUSE_MIN_BYTES = 1 << 18  # 256 KiB: below this the allocator recycles freed blocks cheaply

_TAKES_OUT = {}  # a backend's namespace -> whether its ufuncs take out= (its ``ufunc_out``)

# Consumers that make a new array (never a view of their input): a buffer they read may still be reused
# once they have run.
_NEW_ARRAY_CONSUMERS = frozenset(
    {"sum", "prod", "max", "min", "mean", "std", "var", "matmul", "vecdot", "tensordot"}
)

_IN_PLACE = {}  # (op, argument number) -> its in-place variant


def _takes_out(xp):
    """Whether the backend whose namespace is ``xp`` declares ufuncs that take out= (``ufunc_out``)."""
    takes = _TAKES_OUT.get(xp)
    if takes is None:
        owner = next((b for b in backends.loaded().values() if b.xp is xp), None)
        takes = _TAKES_OUT[xp] = owner is not None and owner.ufunc_out
    return takes


def _ufunc_of(xp, path):
    if not _takes_out(xp):
        return None
    fn = xp
    for part in path:
        fn = getattr(fn, part, None)
        if fn is None:
            return None
    if type(fn).__name__ == "ufunc" and getattr(fn, "nout", 0) == 1:
        return fn
    return None


def _elementwise_path(op):
    """The backend function path of an op whose kernel is exactly one backend function, else None."""
    if op.multiple_results or op.kernels or op.from_device or op.higher_order is not None:
        return None
    return getattr(op.generic, "backend_path", None)


def in_place(op, argnum):
    """The variant of elementwise ``op`` that writes its result into positional argument ``argnum``.

    Args:
        op: a polyad ``Op`` whose kernel is one backend ufunc (``add``, ``sin``...).
        argnum: which array argument receives the result; it must have the result's shape and dtype
            and be read by nothing afterwards.

    Returns:
        An unregistered ``Op``; eagerly on NumPy or CuPy arrays it computes in place, elsewhere (other
        libraries, transforms, capture) it is ``op``.

    Example:
        >>> import numpy as np, polyad as pa
        >>> from polyad.graph.compiler.buffers import in_place
        >>> x = np.array([1.0, 2.0])
        >>> y = in_place(pa.xp.add.op, 0).bind(x, 1.0)
        >>> y is x, x
        (True, array([2., 3.]))
    """
    key = (op, argnum)
    variant = _IN_PLACE.get(key)
    if variant is not None:
        return variant
    path = _elementwise_path(op)
    if path is None:
        raise ValueError(f"in_place(op={op!r}): the op's kernel is not one backend function")

    def kernel(xp, *args, **params):
        fn = _ufunc_of(xp, path)
        if fn is None:  # a library without out=: out of place
            owner = dispatch.backend_of(args)
            return (op.impls.get(owner) or op.resolve(owner))(*args, **params)
        return fn(*args, out=args[argnum], **params)

    # transforms (and captures of transforms) see the original op: nothing is overwritten under them
    variant = core.Op(
        f"{op.name}[out={argnum}]",
        kernel,
        register=False,
        abstract_eval=core.rule_of(op, ABSTRACT_EVAL),
        higher_order=lambda *args, **params: core.bind(op, *args, **params),
    )
    _IN_PLACE[key] = variant
    return variant


def _nbytes(var):
    n = math.prod(var.shape)
    name = str(var.dtype)
    bits = "".join(ch for ch in name if ch.isdigit())
    return n * (int(bits) // 8 if bits else 1)


def reuse_buffers(graph, backend=None, *, min_bytes=REUSE_MIN_BYTES):
    """``graph`` with large elementwise nodes writing into the buffer of an input nothing reads later.

    A buffer is reused only when it was made by an elementwise node of this graph (so no view of it and
    no argument or constant is written), every reader of it is elementwise or makes a new array, it is
    not an output, and it has the result's shape and dtype. On backends without ``out=`` the graph comes
    back unchanged. Run it last, just before ``Graph.compile`` (after fusion): later passes do not know
    the in-place ops.

    Args:
        graph: a ``polyad.graph.Graph``.
        backend: the backend name the graph will be compiled for (default: the default backend).
        min_bytes: the smallest result to plan (``REUSE_MIN_BYTES``).

    Returns:
        A new ``Graph`` (or ``graph`` itself when nothing is planned) computing the same values.

    Example:
        >>> import numpy as np, polyad as pa
        >>> from polyad.graph.compiler import optimize, reuse_buffers
        >>> g = pa.make_graph(lambda x: pa.xp.exp(pa.xp.sin(x) * 2.0), np.zeros(100_000))
        >>> [n.op.name for n in reuse_buffers(optimize(g), "numpy").nodes]
        ['sin', 'multiply[out=0]', 'exp[out=0]']
    """
    check_graph(graph, "reuse_buffers(graph)")
    b = dispatch.default_backend() if backend is None else dispatch.load_backend(backend)
    if not b.ufunc_out or any(hasattr(n, "run") for n in graph.nodes):
        return graph  # no out=; or a pre-dispatch graph, whose transform nodes read unlisted variables
    nodes = graph.nodes

    def eligible(op):
        path = _elementwise_path(op)
        return path is not None and _ufunc_of(b.xp, path) is not None

    last_read = {}
    pinned = {r.id for r in graph.outputs if isinstance(r, Var)}  # read by something that may keep a view
    elementwise = []
    for i, node in enumerate(nodes):
        ok = eligible(node.op)
        elementwise.append(ok)
        for r in node.inputs:
            if isinstance(r, Var):
                last_read[r.id] = i
                if not ok and node.op.name not in _NEW_ARRAY_CONSUMERS:
                    pinned.add(r.id)
    owned = set()  # vars whose buffer this graph made and nothing else refers to
    planned = []
    changed = False
    for i, node in enumerate(nodes):
        if elementwise[i]:
            out = node.outputs[0]
            if _nbytes(out) >= min_bytes:
                for k, r in enumerate(node.inputs):
                    if (
                        isinstance(r, Var)
                        and r.id in owned
                        and r.id not in pinned
                        and last_read[r.id] == i
                        and r.shape == out.shape
                        and str(r.dtype) == str(out.dtype)
                    ):
                        node = Node(in_place(node.op, k), node.inputs, node.params, node.outputs)
                        owned.discard(r.id)
                        changed = True
                        break
            owned.add(out.id)
        planned.append(node)
    if not changed:
        return graph
    return graph.replace(nodes=planned)
