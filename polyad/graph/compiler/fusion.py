"""Fusion for ``pa.jit``: maximal groups of element-wise ops (an element-wise group may end in sums) in a
captured ``Graph`` become one node each, whose op carries a kernel per device type.

What a fused node runs, by device (``dispatch.choose_kernel`` picks, as for any op with kernels):

- "cpu", on NumPy arrays: one Numba loop over the elements (``polyad/backends/numpy/compiler/fusion.py``); the
  library was chosen by measurement (``scripts/bench_fusion.py``): numexpr has no common subexpressions and no
  multiple outputs, so the gradient of W2 recomputes exp and tanh and ran slower than unfused NumPy;
- "cuda", on CuPy arrays: a generated ``ElementwiseKernel``, plus one ``ReductionKernel`` per sum
  (``polyad/backends/cupy/fusion.py``);
- anything else (array_api_strict, dask, a NumPy array where Numba is missing): the group's ops as
  straight-line calls, the generic kernel.

Transforms of a fused graph (``pa.grad(graph)``) run the group's ops on their own tensors (the fused op
is higher-order), so every derivative comes from the ops' own rules.

Fusable ops, one table (``FUSABLE``); each backend that fuses writes their code (its ``fusion`` field's
``expressions``: Numba's for the CPU, CUDA's); an op outside it is never fused. A group holds one floating
dtype (float32 or float64: every member's output, every array input; Python int/float literals are cast to it,
as NumPy's promotion does), so each fused kernel computes in the dtype eager code does, with the same
correctly-rounded arithmetic. Sums keep eager's rounding: on the CPU the fused loop writes the summand and
NumPy's pairwise sum reduces it. A ``where``'s condition is the one input that may be boolean.

Stencils (``STENCILS``): a ``roll`` with a static integer shift over the flattened elements (axis None,
or axis 0: a shift by whole rows) is a read at an offset, wrapped at the ends, so a time step of element-wise
ops and neighbour reads (``u + c (roll(u, 1) + roll(u, -1) - 2u)``) is one kernel, and so is its VJP,
whose rolls are the transposed shifts. A roll of an input reads memory at the offset; a roll of a value
of the group computes that value again at the offset (``FusionSpec.offsets`` gives which values each
kernel needs at which offsets), if it is cheap (at most ``STENCIL_RECOMPUTE`` members) and depends on no
other such roll (``STENCIL_DEPTH``); otherwise the roll starts a group that reads the stored value.
A basic slice of step 1 along axis 0 (``u[2:]``, ``m[1:-1, :]``; ``SLICES``) is a read of its longer
input from the slice's start, never wrapped; no roll recomputes a value computed from a slice (it would
wrap at the slice's end, not the array's). Rolls along another axis (they wrap inside each row), other
slices, ``concat`` and ``diff`` stay ops.

``math`` chooses the CPU loop's functions. "fast" (the default): vectorisable ones
(``polyad/backends/numpy/compiler/vecmath.py``), each within an ulp or two of the exact result, so a fused
result may differ from eager NumPy's in the last bits (the documentation of ``pa.jit`` has the table).
"exact": the CPU loop holds only the ops whose code gives NumPy's results bit for bit (the arithmetic, the
NumPy backend's ``fusion.exact_ops``); the transcendental functions stay NumPy calls between the groups. Other
backends are not affected (their fused kernels call the same functions as their eager ops).

Example:
    >>> import numpy as np, polyad as pa
    >>> from polyad.graph.compiler.fusion import fuse
    >>> f = lambda x: pa.xp.sum(pa.xp.sin(x) * pa.xp.exp(-x))
    >>> graph = pa.make_graph(f, np.linspace(0.0, 1.0, 5))
    >>> fused = fuse(graph, "array_api_strict")
    >>> [n.op.name for n in fused.nodes]
    ['fused[sin,negative,exp,multiply,sum]']
    >>> bool(np.isclose(fused(np.linspace(0.0, 1.0, 5)), graph(np.linspace(0.0, 1.0, 5))))
    True
"""

import heapq
import math
import numbers

import polyad.core.dispatch as dispatch
from polyad.core import KERNELS_OVERRIDDEN, Op, bind
from polyad.core.avals import dtype_name as _name_of
from polyad.graph.ir import Const, Node, Var, check_graph, param_to_backend
from polyad.transforms.abstract import eval_abstract

# op name -> arity: the element-wise ops a group may hold. Each backend that fuses writes the code of every
# one of them (its ``fusion.expressions``: CUDA's in polyad/backends/cupy/fusion_expressions.py, Numba's in
# polyad/backends/numpy/compiler/expressions.py); only ops whose code computes what the eager kernel
# computes, in the same dtype, are here.
FUSABLE = {
    "add": 2,
    "subtract": 2,
    "multiply": 2,
    "divide": 2,
    "pow": 2,
    "negative": 1,
    "positive": 1,
    "abs": 1,
    "square": 1,
    "reciprocal": 1,
    "sign": 1,
    "sqrt": 1,
    "exp": 1,
    "expm1": 1,
    "log": 1,
    "log1p": 1,
    "sin": 1,
    "cos": 1,
    "tan": 1,
    "asin": 1,
    "acos": 1,
    "atan": 1,
    "sinh": 1,
    "cosh": 1,
    "tanh": 1,
    "asinh": 1,
    "acosh": 1,
    "atanh": 1,
    "logaddexp": 2,
    "special.erf": 1,
    "zero_safe_multiply": 2,
    "zero_safe_divide": 2,
    "broadcast_to": 1,
    "where": 3,
    "maximum": 2,
    "minimum": 2,
    "stop_gradient": 1,
}
REDUCTIONS = ("sum",)  # a group may end in these (sum(..., dtype=None) over any axes)
# neighbour reads: ``roll`` over the flattened elements (axis None, or axis 0: whole rows) with a
# static shift becomes an indexed read of an input, or the recomputation of a group value at that offset
STENCILS = ("roll",)
# and ``getitem`` of one basic slice (step 1) along axis 0: a read of a longer input from an offset on
SLICES = ("getitem",)
# a roll may read a value of its group only if that value depends on fewer rolls of group values than
# this: each such roll recomputes what it reads at another offset, and a chain of them (the stages of a
# Runge-Kutta step) would recompute the first stages at every offset the later ones reach
STENCIL_DEPTH = 1
# nor if that value costs more than this many members to compute: each offset is a copy of its code,
# and Numba's compile time grows with the loop's code (the stages of W10's RK45 step, recomputed at
# three offsets each, compiled for 34 s of CPU against 14 s unfused: a cold first call)
STENCIL_RECOMPUTE = 8
FLOAT_DTYPES = ("float32", "float64")
MATH_MODES = ("fast", "exact")  # the CPU loop's functions: vectorised ones, or eager's bit for bit


class Statement:
    """One member of a group in the kernel's terms: ``target = op(args)``; each arg is ``("in", k)`` (the
    fused node's k-th input), ``("t", var id)`` (a value of the group) or ``("lit", number)``.
    ``elementwise``: whether the op is one of ``FUSABLE`` (False for a sum, a roll and a slice), whose code
    each backend writes from its own ``fusion.expressions``. ``shift``: a roll's shift over the flattened
    elements (``target[i] = arg[(i - shift) mod n]``), None for other ops."""

    __slots__ = ("target", "op", "args", "params", "elementwise", "shift")

    def __init__(self, target, op, args, params):
        self.target, self.op, self.args, self.params = target, op, args, params
        self.elementwise = op in FUSABLE
        self.shift = None  # set by _fused_node for a roll (its shift needs the shape)

    def __repr__(self):
        return f"t{self.target} = {self.op}({', '.join(map(repr, self.args))})"


class FusionSpec:
    """What a backend needs to generate a fused kernel: the group's element shape and dtype, the shapes
    of its inputs, the statements in order and its outputs, each ``(var id, kind, params)`` where kind is
    "elementwise" (a value of the group's shape) or "sum" (a reduction, ``params`` its axis/keepdims), and
    the math mode it was fused under."""

    def __init__(self, shape, dtype, input_shapes, statements, outputs, out_shapes, math="fast",
                 input_dtypes=None):  # fmt: skip
        self.shape = tuple(shape)
        self.dtype = dtype  # "float32" or "float64"
        self.input_shapes = [tuple(s) for s in input_shapes]
        self.statements = statements
        self.outputs = outputs
        self.out_shapes = [tuple(s) for s in out_shapes]
        self.math = math  # the CPU loop's functions: "fast" (vecmath) or "exact" (see fuse)
        # each input's dtype: the group's, or "bool" for the condition of a where
        self.input_dtypes = list(input_dtypes) if input_dtypes is not None else [dtype] * len(input_shapes)

    def summand_of(self, index):
        """The argument of the sum that produces output ``index``."""
        target = self.outputs[index][0]
        return next(s.args[0] for s in self.statements if s.target == target)

    @property
    def stencil(self):
        """Whether the group reads neighbours (holds a roll or a slice): its kernels index their inputs."""
        return any(st.shift is not None for st in self.statements)

    def offsets(self):
        """``(values, reads, plain)`` of a stencil group: for each group value (var id), the sorted offsets
        ``d`` at which the kernel needs it (``value[i + d]`` at element ``i``); for each input (its
        number), the offsets at which it is read; and the ``(input, offset)`` reads of slices, which never
        wrap (a slice's input is longer than the group). The outputs are needed at 0; a roll by ``s``
        needed at ``d`` needs its argument at ``d - s`` (and is no code of its own: a read at that
        offset); a slice starting at element ``b`` reads its argument at ``b`` (only ever at ``d = 0``:
        no roll recomputes a value that depends on a slice, ``_find_groups``)."""
        need = {}
        for index, (target, kind, _) in enumerate(self.outputs):
            value = target if kind == "elementwise" else self.summand_of(index)[1]
            need.setdefault(value, set()).add(0)
        reads, plain = {}, set()
        for st in reversed(self.statements):
            if st.target not in need or not st.elementwise and st.shift is None:
                continue  # not needed, or a sum (its summand was added above)
            for d in need[st.target]:
                at = d - st.shift if st.shift is not None else d
                if st.op in SLICES and d != 0:  # a read past the slice's end: refuse, never guess
                    raise RuntimeError(f"fusion: {st!r} is needed at offset {d}, which a slice cannot give")
                for kind, v in st.args:
                    if kind == "t":
                        need.setdefault(v, set()).add(at)
                    elif kind == "in":
                        reads.setdefault(v, set()).add(at)
                        if st.op in SLICES:
                            plain.add((v, at))
        return {v: sorted(ds) for v, ds in need.items()}, {k: sorted(ds) for k, ds in reads.items()}, plain


def _flat_shift(params, shape):
    """The shift of a roll over the flattened elements of an array of ``shape``: its own (axis None), or
    along axis 0 its shift times the size of a row."""
    shift = params.get("shift")
    if params.get("axis") is None:
        return int(shift)
    return int(shift[0]) * math.prod(shape[1:])


def _backend_name(backend):
    if backend is None:
        return dispatch.default_backend().name
    if isinstance(backend, str):
        return backend
    name = getattr(backend, "name", None)
    if not isinstance(name, str):
        raise TypeError(f"fuse(backend={backend!r}): backend must be a backend name (a str) or a Backend")
    return name


def fuse(graph, backend=None, math="fast"):
    """``graph`` with maximal element-wise(-then-sum) groups fused into one node each; same values.

    Args:
        graph: a ``polyad.graph.Graph`` (``pa.make_graph(f, *args)``).
        backend: the backend the graph will be compiled for (a name or a Backend; None: the default).
            Where its ``fusion`` is not available (NumPy without Numba) the graph is returned unchanged (a
            straight-line node would only add a call); elsewhere groups become nodes whose kernels are
            picked per device when they run.
        math: "fast" (the CPU loop's functions are vectorised ones, within an ulp or two of eager's) or
            "exact" (only the backend's ``fusion.exact_ops`` join groups: on "numpy" the transcendental
            functions stay out, so every result is eager NumPy's bit for bit).

    Returns:
        A new ``Graph`` computing the same outputs; nodes whose values nothing needs are dropped.

    Example:
        >>> import numpy as np, polyad as pa
        >>> g = pa.make_graph(pa.grad(lambda x: pa.xp.sum(pa.xp.tanh(x) ** 2)), np.ones(3))
        >>> fused = fuse(g, "array_api_strict")
        >>> len(fused.nodes) < len(g.nodes)
        True
        >>> np.allclose(fused.compile()(np.ones(3)), g(np.ones(3)))
        True
    """
    check_graph(graph, "fuse(graph=...)")
    check_math(math, "fuse")
    name = _backend_name(backend)
    codegen = dispatch.load_backend(name).fusion  # the backend's code generation (None: straight-line calls)
    if codegen is not None and not codegen.available():
        return graph
    pruned = _prune(graph, name)
    # under "exact" only the ops whose generated code is eager's bit for bit may join a group
    allowed = codegen.exact_ops if math == "exact" and codegen is not None else None
    groups = _find_groups(pruned, allowed)
    if not any(len(g.members) > 1 for g in groups):
        return graph
    return _rebuild(pruned, groups, math)


def check_math(math, where):
    """``math`` if it is one of ``MATH_MODES``, else a ValueError naming ``where``'s argument."""
    if not isinstance(math, str) or math not in MATH_MODES:
        raise ValueError(
            f'{where}(math={math!r}): math must be one of {", ".join(map(repr, MATH_MODES))} ("fast": '
            "vectorised functions within an ulp or two of eager's; \"exact\": eager's results bit for bit)"
        )
    return math


# ------------------------------------------------------------------------------------------ grouping


class _Group:
    __slots__ = ("id", "members", "shape", "dtype", "ext_deps", "parent", "mask")

    def __init__(self, id, shape, dtype):
        self.id = id
        self.members = []  # node indices, ascending
        self.shape = shape
        self.dtype = dtype
        # sets of groups as bit masks (bit k: the group of id k), so that unions and tests cost one integer
        # operation however many groups an unrolled loop makes (sets of them made fusing quadratic)
        self.ext_deps = 0  # groups some input from outside this group depends on
        self.mask = 1 << id  # the ids of this group and of every group merged into it
        self.parent = None  # union-find: the group this one was merged into


def _root(group):
    while group.parent is not None:
        group = group.parent
    return group


def _prune(graph, backend_name):
    """``graph`` without the nodes whose values no output needs, and with each ``*_like`` op that only
    needs the shape of an otherwise unneeded value reading a constant of that shape instead (the graph of
    ``grad(f)`` reads ``f``'s value that way: the forward pass's last steps then go, and the rest of the
    forward fuses with the backward). This is what ``Graph.compile`` runs, made explicit, so that
    replaying the graph (``Graph.__call__``) runs the same nodes."""
    needed = {r.id for r in graph.outputs if isinstance(r, Var)}
    shape_read = set()  # node indices whose first input only gives a shape
    for i in range(len(graph.nodes) - 1, -1, -1):
        node = graph.nodes[i]
        if not any(o.id in needed for o in node.outputs):
            continue
        refs = [r for r in node.inputs if isinstance(r, Var)]
        if node.op.shape_only is not None and node.inputs and isinstance(node.inputs[0], Var):
            shape_read.add(i)
            refs = refs[1:]
        needed.update(r.id for r in refs)
    consts = list(graph.consts)
    nodes = []
    backend = dispatch.load_backend(backend_name)
    for i, node in enumerate(graph.nodes):
        if not any(o.id in needed for o in node.outputs):
            continue
        if i in shape_read and node.inputs[0].id not in needed:
            like = node.inputs[0]
            const = Const(
                len(consts), backend.xp.empty(like.shape, dtype=param_to_backend(like.dtype, backend))
            )
            consts.append(const.value)
            node = Node(node.op, [const, *node.inputs[1:]], node.params, node.outputs)
        nodes.append(node)
    return graph.replace(nodes=nodes, consts=consts)


def _dtype_of(dtype):
    name = _name_of(dtype)
    return name if name in FLOAT_DTYPES else None


def _fusable(node, allowed=None):
    """ "elementwise", "sum" or None: how ``node`` may take part in a group (its op, params, arguments);
    ``allowed``: the element-wise ops that may (None: all of ``FUSABLE``)."""
    name = node.op.name
    if allowed is not None and name not in allowed and name not in REDUCTIONS:
        return None
    if name in KERNELS_OVERRIDDEN:  # a kernel swapped by library.override: generated code would ignore it
        return None
    if len(node.outputs) != 1 or node.op.multiple_results or _dtype_of(node.outputs[0].dtype) is None:
        return None
    for k, r in enumerate(node.inputs):
        if isinstance(r, Var | Const):
            # where's condition is boolean; every other array input has the group's dtype
            wanted = "bool" if name == "where" and k == 0 else _name_of(node.outputs[0].dtype)
            if _name_of(r.dtype if isinstance(r, Var) else r.value.dtype) != wanted:
                return None
        elif isinstance(r, bool) or not isinstance(r, numbers.Real) or name == "where" and k == 0:
            return None
    if name in STENCILS:
        return "roll" if _stencil_roll(node) else None
    if name in SLICES:
        return "slice" if _slice_start(node) is not None else None
    if name in REDUCTIONS:
        if node.params.get("dtype") is not None or not isinstance(node.inputs[0], Var):
            return None
        return "sum"
    arity = FUSABLE.get(name)
    if arity is None or len(node.inputs) != arity:
        return None
    if name == "broadcast_to":
        return "elementwise" if tuple(node.params.get("shape", ())) == node.outputs[0].shape else None
    return "elementwise" if not node.params else None


def _stencil_roll(node):
    """Whether a roll node can be a read at an offset: one array input of its output's shape, not empty,
    a static integer shift over the flattened elements (axis None, or axis 0: a multiple of a row)."""
    (x,) = node.inputs if len(node.inputs) == 1 else (None,)
    out = node.outputs[0]
    if not isinstance(x, Var | Const) or tuple(x.shape if isinstance(x, Var) else x.value.shape) != out.shape:
        return False
    shift, axis = node.params.get("shift"), node.params.get("axis")
    if axis is None:
        ok = isinstance(shift, numbers.Integral) and not isinstance(shift, bool)
    else:
        # along the first axis of a C-ordered array, a roll by s is a roll of the flattened elements by
        # s times a row's size; along any other axis it wraps inside each row: not one offset
        ok = tuple(axis) == (0,) and isinstance(shift, tuple) and len(shift) == 1
        ok = ok and isinstance(shift[0], numbers.Integral) and not isinstance(shift[0], bool)
    return ok and all(isinstance(d, int) for d in out.shape) and math.prod(out.shape) > 0


def _slice_start(node):
    """The flat element a ``getitem`` node starts reading at, if it is one basic slice of step 1 along
    axis 0 of one array (the rest of each row kept whole), else None."""
    key = node.params.get("key")
    if len(node.inputs) != 1 or not isinstance(node.inputs[0], Var | Const) or not isinstance(key, tuple):
        return None
    x = node.inputs[0]
    shape = tuple(x.shape if isinstance(x, Var) else x.value.shape)
    whole = all(k is Ellipsis or k == slice(None) for k in key[1:])  # the rest of each row, kept whole
    if not key or not whole or not isinstance(key[0], slice) or key[0].step not in (None, 1) or not shape:
        return None
    if not all(isinstance(d, int) for d in shape) or not all(
        b is None or isinstance(b, int) and not isinstance(b, bool) for b in (key[0].start, key[0].stop)
    ):
        return None
    start, stop, _ = key[0].indices(shape[0])
    if stop <= start or node.outputs[0].shape != (stop - start, *shape[1:]):
        return None
    return start * math.prod(shape[1:])


def _find_groups(graph, allowed=None):
    producer = {}  # var id -> node index
    group_of = {}  # node index -> _Group (resolve with _root)
    reduced = set()  # var ids that sums of a group produced: no member of that group reads them
    deps = {}  # var id -> mask of the groups its value depends on
    depth = {}  # var id -> the rolls of group values on its longest path inside its group
    cone = {}  # var id -> the members its value needs inside its group (shared ones counted per use)
    groups = []
    for i, node in enumerate(graph.nodes):
        for o in node.outputs:
            producer[o.id] = i
        kind = _fusable(node, allowed)
        in_vars = [r for r in node.inputs if isinstance(r, Var)]
        group = None
        if kind is not None:
            group = _place(node, kind, in_vars, producer, group_of, reduced, deps, groups, (depth, cone))
        if group is not None:
            inner = [v.id for v in in_vars if _produced_in(v, group, producer, group_of)]
            out = node.outputs[0].id
            depth[out] = max((depth[v] for v in inner), default=0) + (1 if kind == "roll" and inner else 0)
            if kind == "slice":  # no roll may recompute what reads a slice: it would read past its end
                depth[out] = STENCIL_DEPTH
            own = 0 if kind == "roll" else 1  # a roll is a read at an offset: no code of its own
            cone[out] = min(own + sum(cone[v] for v in inner), STENCIL_RECOMPUTE + 1)
        mine = 0
        for v in in_vars:
            mine |= deps.get(v.id, 0)
        if group is not None:
            group_of[i] = group
            group.members.append(i)
            mine |= group.mask
            if kind == "sum":
                reduced.add(node.outputs[0].id)
        for o in node.outputs:
            deps[o.id] = mine
    return [g for g in groups if g.parent is None]


def _place(node, kind, in_vars, producer, group_of, reduced, deps, groups, costs):
    """The group ``node`` joins (merging the groups of its producers where that keeps the graph acyclic),
    or a new one; None when it cannot be fused. ``costs``: the ``(depth, cone)`` of the group values
    (``_find_groups``), which decide whether a roll may recompute its argument."""
    depth, cone = costs
    out = node.outputs[0]
    dtype = _dtype_of(out.dtype)
    candidates = []
    for v in in_vars:
        p = producer.get(v.id)
        g = _root(group_of[p]) if p in group_of else None
        if g is None or g in candidates or g.dtype != dtype:
            continue
        if kind != "sum" and g.shape != out.shape:
            continue
        if kind == "roll" and (depth[v.id] >= STENCIL_DEPTH or cone[v.id] > STENCIL_RECOMPUTE):
            continue  # recomputing its argument at another offset would cost too much: it reads memory
        candidates.append(g)
    # a member must not read a sum of its own group, nor a value outside the group that depends on it
    candidates = [
        g
        for g in candidates
        if not any(
            (v.id in reduced and _root(group_of[producer[v.id]]) is g)
            or (not _produced_in(v, g, producer, group_of) and deps.get(v.id, 0) & g.mask)
            for v in in_vars
        )
    ]
    chosen = []
    for g in reversed(candidates):  # the nearest producer's group first
        # two groups merge only if no path leads from one to the other (it would pass outside both)
        if all(not (c.ext_deps & g.mask) and not (g.ext_deps & c.mask) for c in chosen):
            chosen.append(g)
    if kind == "sum":
        # a sum joins the group of its summand only
        p = producer.get(node.inputs[0].id)
        g = _root(group_of[p]) if p in group_of else None
        chosen = [g] if g is not None and g in chosen else []
        if not chosen:
            return None
    if not chosen:
        group = _Group(len(groups), out.shape, dtype)
        groups.append(group)
    else:
        group = chosen[0]
        for other in chosen[1:]:
            other.parent = group
            group.members = sorted(group.members + other.members)
            group.ext_deps |= other.ext_deps
            group.mask |= other.mask
    for v in in_vars:
        if not _produced_in(v, group, producer, group_of):
            group.ext_deps |= deps.get(v.id, 0)
    return group


def _produced_in(v, group, producer, group_of):
    p = producer.get(v.id)
    return p in group_of and _root(group_of[p]) is group


# ------------------------------------------------------------------------------------------ rebuilding


def _rebuild(graph, groups, math):
    nodes = graph.nodes
    readers = {}  # var id -> indices of the nodes that read it
    for i, node in enumerate(nodes):
        for r in node.inputs:
            if isinstance(r, Var):
                readers.setdefault(r.id, set()).add(i)
    graph_outputs = {r.id for r in graph.outputs if isinstance(r, Var)}
    fused = [g for g in groups if len(g.members) > 1]
    while True:
        member_of = {i: g for g in fused for i in g.members}
        units = []  # (first index, Node, its group or None)
        for i, node in enumerate(nodes):
            if i not in member_of:
                units.append((i, node, None))
        for g in fused:
            units.append((g.members[0], _fused_node(graph, g, readers, graph_outputs, math), g))
        units.sort(key=lambda u: u[0])
        order, stuck = _topological([n for _, n, _ in units])
        if not stuck:
            return graph.replace(nodes=order)
        # fused nodes that wait on each other: a group gained an input that depends on another group
        # after a value of that group was read into it (the grouping's dependency masks are taken when a
        # value is made). The groups on those cycles run unfused; the rest stays (a fused node merely
        # behind a cycle waits on it but is on none: unfusing it too cost a small ODE's pullback half
        # of its groups)
        cyclic = _on_cycles([units[k][1] for k in stuck])
        unfused = {id(units[stuck[k]][2]) for k in cyclic if units[stuck[k]][2] is not None}
        if not unfused:  # the graph itself has a cycle: not one a capture or a trace can make
            raise RuntimeError(f"fuse: the graph's nodes {stuck[:5]}... read each other's outputs")
        fused = [g for g in fused if id(g) not in unfused]


def _on_cycles(nodes):
    """The indices of ``nodes`` (those ``_topological`` left stuck: on a cycle, or behind one) that are
    on a cycle or between two: the stuck nodes less those no other stuck node waits on, repeatedly."""
    made = {o.id: k for k, n in enumerate(nodes) for o in n.outputs}
    readers = [set() for _ in nodes]
    for k, node in enumerate(nodes):
        for r in node.inputs:
            if isinstance(r, Var) and made.get(r.id, k) != k:
                readers[made[r.id]].add(k)
    left = set(range(len(nodes)))
    leaves = [k for k in left if not readers[k]]
    while leaves:
        k = leaves.pop()
        left.discard(k)
        for node in nodes[k].inputs:
            p = made.get(node.id) if isinstance(node, Var) else None
            if p is not None and p in left and p != k:
                readers[p].discard(k)
                if not readers[p]:
                    leaves.append(p)
    return sorted(left)


def _topological(nodes):
    """``(order, stuck)``: ``nodes`` in an order where every value is computed before it is read (groups
    may have moved a member's output later than one of its readers), ties in the given order; ``stuck``
    the indices of the nodes that a cycle keeps from being placed (none for a graph without one)."""
    producer = {o.id: k for k, n in enumerate(nodes) for o in n.outputs}
    waiting = [0] * len(nodes)
    readers = [[] for _ in nodes]
    for k, node in enumerate(nodes):
        needs = {producer[r.id] for r in node.inputs if isinstance(r, Var) and r.id in producer} - {k}
        waiting[k] = len(needs)
        for p in needs:
            readers[p].append(k)
    ready = [k for k in range(len(nodes)) if waiting[k] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        k = heapq.heappop(ready)
        order.append(nodes[k])
        for r in readers[k]:
            waiting[r] -= 1
            if waiting[r] == 0:
                heapq.heappush(ready, r)
    return order, [k for k in range(len(nodes)) if waiting[k] > 0]


def _fused_node(graph, group, readers, graph_outputs, math):
    members = [graph.nodes[i] for i in group.members]
    inside = {o.id for n in members for o in n.outputs}
    member_index = set(group.members)
    inputs, input_index, statements = [], {}, []
    for node in members:
        args = []
        for r in node.inputs:
            if isinstance(r, Var) and r.id in inside:
                args.append(("t", r.id))
            elif isinstance(r, Var | Const):
                key = ("v", r.id) if isinstance(r, Var) else ("c", r.index)
                if key not in input_index:
                    input_index[key] = len(inputs)
                    inputs.append(r)
                args.append(("in", input_index[key]))
            else:
                args.append(("lit", r))
        statements.append(Statement(node.outputs[0].id, node.op.name, args, dict(node.params)))
        if node.op.name in STENCILS:
            statements[-1].shift = _flat_shift(node.params, node.outputs[0].shape)
        elif node.op.name in SLICES:  # a read from the slice's start on: a shift of minus that
            statements[-1].shift = -_slice_start(node)
    outputs, out_vars = [], []
    for node in members:
        v = node.outputs[0]
        if v.id not in graph_outputs and readers.get(v.id, set()) <= member_index:
            continue  # read inside the group only: it stays in registers
        kind = "sum" if node.op.name in REDUCTIONS else "elementwise"
        params = {k: node.params.get(k) for k in ("axis", "keepdims")} if kind == "sum" else {}
        outputs.append((v.id, kind, params))
        out_vars.append(v)
    spec = FusionSpec(
        group.shape,
        group.dtype,
        [r.shape if isinstance(r, Var) else tuple(r.value.shape) for r in inputs],
        statements,
        outputs,
        [v.shape for v in out_vars],
        math,
        [_name_of(r.dtype if isinstance(r, Var) else r.value.dtype) for r in inputs],
    )
    op = _fused_op(spec, members, inputs, out_vars)
    return Node(op, list(inputs), {}, out_vars)


class FusedOp(Op):
    """The op of a fused group (not in the registry: one per group); ``fusion`` is its ``FusionSpec``."""

    __slots__ = ("fusion",)


def _fused_op(spec, members, inputs, out_vars):
    """The op of one group: generic kernel and transform body = the members as straight-line calls."""
    multiple = len(out_vars) > 1
    positions = {("v", r.id) if isinstance(r, Var) else ("c", r.index): k for k, r in enumerate(inputs)}
    # the group's values that each member reads for the last time: the body lets go of them there, as
    # compiled code does (it is what runs on NumPy arrays while the loop compiles)
    kept = {v.id for v in out_vars}
    produced = {n.outputs[0].id for n in members}
    last = {r.id: k for k, node in enumerate(members) for r in node.inputs if isinstance(r, Var)}
    dying = [[] for _ in members]
    for vid, k in last.items():
        if vid not in kept and vid in produced:
            dying[k].append(vid)

    def body(*args):
        env = {}

        def read(r):
            if isinstance(r, Var):
                return env[r.id] if r.id in env else args[positions[("v", r.id)]]
            if isinstance(r, Const):
                return args[positions[("c", r.index)]]
            return r

        for node, gone in zip(members, dying):
            env[node.outputs[0].id] = bind(node.op, *[read(r) for r in node.inputs], **node.params)
            for vid in gone:
                del env[vid]
        outs = tuple(env[v.id] for v in out_vars)
        return outs if multiple else outs[0]

    def generic(xp, *args):
        return body(*args)

    def abstract(xp, *avals):
        return eval_abstract(body, *avals)

    name = f"fused[{','.join(n.op.name for n in members)}]"
    # transforms run the members (the higher-order body), each by its own rules
    op = FusedOp(
        name, generic, register=False, multiple_results=multiple, abstract_eval=abstract, higher_order=body
    )
    op.fusion = spec
    # a kernel per device from each loaded backend that builds them (CuPy's only once a GPU is in use)
    for backend in set(dispatch.BY_TYPE.values()):
        if backend.fused_kernels is not None:
            op.kernels.update(backend.fused_kernels(spec, generic))
    return op


__all__ = [
    "FUSABLE",
    "MATH_MODES",
    "REDUCTIONS",
    "STENCIL_DEPTH",
    "STENCIL_RECOMPUTE",
    "STENCILS",
    "FusedOp",
    "FusionSpec",
    "check_math",
    "fuse",
]
