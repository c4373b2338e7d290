"""The CUDA kernels of a fused group (``polyad.graph.compiler.fusion``): the source text of one CuPy
``ElementwiseKernel`` for the group's element-wise outputs and one ``ReductionKernel`` per sum.

Three steps, kept apart so that the first two run without a GPU: ``sources(spec)`` is plain text (tests
check it anywhere); ``build(spec)`` makes the CuPy kernel objects from it (CuPy compiles nothing until a
launch; ``polyad.backends.cupy.nvrtc_check`` expands and compiles them with NVRTC in CI, where there is
no GPU); ``kernel(spec)`` launches them on the first call on CUDA arrays (CuPy is imported there, not here).

A stencil group (one holding rolls) is one ``ElementwiseKernel`` whose rolled inputs are ``raw`` arrays
read at wrapped offsets of the element index ``i``; it also writes each sum's summand, which a
``ReductionKernel`` of that one array then reduces (a reduction's map sees one element, not its
neighbours).

Every input and output is declared ``T``, the group's one dtype (a where's condition ``bool``), so CuPy
instantiates the kernels for float32 or float64 as the arrays are; literals are cast to ``T``.

A reduction's kernel parameters are named ``x<k>`` and ``y<k>``, never ``in0``/``out0``: for a reduction
of one contiguous input CuPy takes its CUB path, whose template reads the types ``type_in0_raw`` and
``type_out0_raw``, and CuPy (14.x) declares those for a ``ReductionKernel`` only when its parameters have
other names (it then renames them itself, by text replacement in the map and post-map expressions:
``x0`` and ``y0`` cannot occur in them otherwise, the function names' digests being hexadecimal). Named
``in0``/``out0``, ``pa.jit`` of a scan followed by ``sum(u * u)`` failed on the GPU with ``identifier
"type_in0_raw" is undefined`` (issue 32); ``tests/test_cuda_sources.py`` compiles every path with NVRTC.
"""

import hashlib
import sys

from .fusion_expressions import CUDA


class ElementwiseSource:
    """The arguments of ``cupy.ElementwiseKernel(in_params, out_params, operation, name)``."""

    def __init__(self, in_params, out_params, operation, name):
        self.in_params, self.out_params, self.operation, self.name = in_params, out_params, operation, name


class ReductionSource:
    """The arguments of ``cupy.ReductionKernel``, the summand computed by a device function (``preamble``)
    of the group's statements; ``axis``/``keepdims`` are the sum's."""

    def __init__(self, in_params, out_params, map_expr, reduce_expr, post_map_expr, identity, name, preamble,
                 axis, keepdims):  # fmt: skip
        self.in_params, self.out_params = in_params, out_params
        self.map_expr, self.reduce_expr, self.post_map_expr = map_expr, reduce_expr, post_map_expr
        self.identity, self.name, self.preamble = identity, name, preamble
        self.axis, self.keepdims = axis, keepdims


def _literal(value):
    return f"(T){float(value)!r}"


def _body(spec):
    """The group's element-wise statements as CUDA C lines ``T t<id> = expr;``, in order."""
    lines = []
    for st in spec.statements:
        if not st.elementwise:
            continue  # a sum: a ReductionKernel of its own
        names = [f"in{v}" if kind == "in" else f"t{v}" if kind == "t" else _literal(v) for kind, v in st.args]
        lines.append(f"T t{st.target} = {CUDA[st.op].format(*names)};")
    return lines


def _digest(*parts):
    return hashlib.sha1("\n".join(parts).encode()).hexdigest()[:16]


def _type(spec, k):
    """The declared type of input ``k``: ``T`` (the group's dtype), or ``bool`` for a where's condition."""
    return "bool" if spec.input_dtypes[k] == "bool" else "T"


def _offset_name(d):
    return f"p{d}" if d > 0 else f"m{-d}" if d < 0 else "0"


def _is_one(shape):
    n = 1
    for s in shape:
        n *= s
    return n == 1


def raw_inputs(spec):
    """The inputs a stencil group's kernel declares ``raw`` (indexed at offsets): all but the one-element
    ones, which CuPy broadcasts. The launcher passes those whole, contiguous and of the group's shape."""
    return [k for k, s in enumerate(spec.input_shapes) if not _is_one(s)] if spec.stencil else []


def _stencil_body(spec):
    """The statements of a stencil group as CUDA C lines: inputs read at their offsets from raw arrays
    (wrapped at the ends: a roll is periodic), each value computed at every offset a roll needs it."""
    values, reads, plain = spec.offsets()
    raw = set(raw_inputs(spec))
    lines = ["const ptrdiff_t n_ = _ind.size();"]
    for k, ds in sorted(reads.items()):
        for d in ds if k in raw else ():
            j = f"j{k}_{_offset_name(d)}"
            lines.append(f"ptrdiff_t {j} = i + ({d});")
            if d and (k, d) not in plain:  # |d| may exceed n on a tiny array: wrap as often as it takes
                lines.append(f"while ({j} < 0) {j} += n_;" if d < 0 else f"while ({j} >= n_) {j} -= n_;")
            lines.append(f"const {_type(spec, k)} s{k}_{_offset_name(d)} = in{k}[{j}];")
    names = {}

    def name(arg, d):
        kind, v = arg
        if kind == "in":
            return f"s{v}_{_offset_name(d)}" if v in raw else f"in{v}"
        return names[(v, d)] if kind == "t" else _literal(v)

    for st in spec.statements:
        if not st.elementwise and st.shift is None:
            continue  # a sum: reduced from the stored summand
        for d in values.get(st.target, ()):
            if st.shift is not None:  # a roll: its argument at another offset
                names[(st.target, d)] = name(st.args[0], d - st.shift)
                continue
            names[(st.target, d)] = f"t{st.target}_{_offset_name(d)}"
            lines.append(f"T {names[(st.target, d)]} = {CUDA[st.op].format(*[name(a, d) for a in st.args])};")
    return lines, names


def _stencil_sources(spec):
    """``sources`` of a group that reads neighbours: one ``ElementwiseKernel`` over the group's elements
    that writes the element-wise outputs, then the summand of each sum (``out<k>`` in the order of
    ``spec.outputs``), and per sum a ``ReductionKernel`` of that summand alone (a reduction's map sees
    one element; the shifted reads need the element-wise kernel's index)."""
    raw = set(raw_inputs(spec))
    inputs = ", ".join(
        f"{'raw ' if k in raw else ''}{_type(spec, k)} in{k}" for k in range(len(spec.input_shapes))
    )
    lines, names = _stencil_body(spec)
    outs = []
    for index, (target, kind, _) in enumerate(spec.outputs):
        value = target if kind == "elementwise" else spec.summand_of(index)[1]
        outs.append(f"out{index} = {names[(value, 0)]};")
    operation = "\n".join(lines + outs)
    out_params = ", ".join(f"T out{k}" for k in range(len(spec.outputs)))
    name = f"polyad_fused_{_digest(inputs, out_params, operation)}"
    elementwise = ElementwiseSource(inputs, out_params, operation, name)
    # each sum reduces its summand, written by the element-wise kernel as out<index>
    return elementwise, _sum_sources(spec, lambda index: ("T x0", "x0", f"polyad_summed_{index}", ""))


def _sum_sources(spec, summand):
    """One entry per output of ``spec``: a ``ReductionSource`` summing ``summand(index)`` for a sum, None
    for the others. ``summand(index) -> (in_params, map_expr, name, preamble)``: what the kernel reads and
    maps to the summand; the reduction itself (a + b from 0, into ``y<index>``) is the same for all."""
    reductions = []
    for index, (_target, kind, params) in enumerate(spec.outputs):
        if kind != "sum":
            reductions.append(None)
            continue
        in_params, map_expr, name, preamble = summand(index)
        reductions.append(
            ReductionSource(in_params, f"T y{index}", map_expr, "a + b", f"y{index} = a", "0", name, preamble,
                            params.get("axis"), bool(params.get("keepdims")))
        )  # fmt: skip
    return reductions


def sources(spec):
    """``(elementwise, reductions)``: the ``ElementwiseSource`` of the group's element-wise outputs (None
    where it has none) and one ``ReductionSource`` per output that is a sum (None for the others). A
    stencil group (``spec.stencil``) has one element-wise kernel that also writes each sum's summand,
    and reductions of those (``_stencil_sources``)."""
    if spec.stencil:
        return _stencil_sources(spec)
    inputs = ", ".join(f"{_type(spec, k)} in{k}" for k in range(len(spec.input_shapes)))
    body = _body(spec)
    elementwise_outputs = [
        (k, target) for k, (target, kind, _) in enumerate(spec.outputs) if kind == "elementwise"
    ]
    elementwise = None
    if elementwise_outputs:
        operation = "\n".join(body + [f"out{k} = t{target};" for k, target in elementwise_outputs])
        out_params = ", ".join(f"T out{k}" for k, _ in elementwise_outputs)
        name = f"polyad_fused_{_digest(inputs, out_params, operation)}"
        elementwise = ElementwiseSource(inputs, out_params, operation, name)
    # the kernel's parameters (x<k>, y<index>; see the module's docstring), the device function's in<k>
    kernel_inputs = ", ".join(f"{_type(spec, k)} x{k}" for k in range(len(spec.input_shapes)))
    args = ", ".join(f"x{k}" for k in range(len(spec.input_shapes)))

    def summand(index):  # a device function of the group's statements computes the sum's summand
        target = spec.summand_of(index)[1]
        function = f"polyad_summand_{_digest(inputs, *body, str(target))}"
        preamble = "\n".join(
            [f"template <typename T>\n__device__ T {function}({inputs}) {{"]
            + [f"    {line}" for line in body]
            + [f"    return t{target};", "}"]
        )
        return kernel_inputs, f"{function}({args})", f"{function}_sum", preamble

    return elementwise, _sum_sources(spec, summand)


def build(spec, cupy):
    """``(elementwise, reductions)``: the CuPy kernel objects of ``sources(spec)`` (``cupy`` is the module),
    an ``ElementwiseKernel`` or None and per output a ``(ReductionKernel, axis, keepdims)`` or None. Making
    them compiles nothing and needs no GPU; CuPy compiles each at its first launch."""
    elementwise, reductions = sources(spec)
    if elementwise is not None:
        e = elementwise
        elementwise = cupy.ElementwiseKernel(e.in_params, e.out_params, e.operation, e.name)
    built = []
    for r in reductions:
        if r is None:
            built.append(None)
            continue
        reduction = cupy.ReductionKernel(
            r.in_params, r.out_params, r.map_expr, r.reduce_expr, r.post_map_expr, r.identity, r.name,
            preamble=r.preamble,
        )  # fmt: skip
        built.append((reduction, r.axis, r.keepdims))
    return elementwise, built


def kernel(spec, fallback):
    """The "cuda" kernel ``kernel(xp, *arrays)`` of a fused group; CuPy kernels are built at its first
    call on CuPy arrays. Other arrays of a "cuda" device type (a stand-in registered with
    ``register_device_type``) go to ``fallback``, the straight-line kernel."""
    built = []
    shape = spec.shape

    def run(xp, *args):
        cupy = sys.modules.get("cupy")
        if cupy is None or not all(isinstance(a, cupy.ndarray) for a in args):
            return fallback(xp, *args)
        if not built:
            built.extend(build(spec, cupy))
        elementwise, reductions = built
        dtype = cupy.dtype(spec.dtype)
        if spec.stencil:
            return _run_stencil(cupy, elementwise, reductions, args, dtype)
        full = [a if tuple(a.shape) == shape else cupy.broadcast_to(a, shape) for a in args]
        values = [None] * len(spec.outputs)
        ew = [k for k, (_, kind, _) in enumerate(spec.outputs) if kind == "elementwise"]
        if ew:
            outs = [cupy.empty(shape, dtype) for _ in ew]
            elementwise(*full, *outs)
            for k, o in zip(ew, outs):
                values[k] = o
        for k, (_, kind, _) in enumerate(spec.outputs):
            if kind == "sum":
                reduction, axis, keepdims = reductions[k]
                values[k] = reduction(*full, axis=axis, keepdims=keepdims)
        return tuple(values) if len(values) > 1 else values[0]

    def _run_stencil(cupy, elementwise, reductions, args, dtype):
        ins = [
            (
                cupy.ascontiguousarray(a)
                if k in sliced
                else cupy.ascontiguousarray(cupy.broadcast_to(a, shape))
            )
            if k in raw
            else a
            for k, a in enumerate(args)
        ]
        outs = [cupy.empty(shape, dtype) for _ in spec.outputs]
        elementwise(*ins, *outs)
        values = list(outs)
        for k, (_, kind, _) in enumerate(spec.outputs):
            if kind == "sum":
                reduction, axis, keepdims = reductions[k]
                values[k] = reduction(outs[k], axis=axis, keepdims=keepdims)
        return tuple(values) if len(values) > 1 else values[0]

    raw = set(raw_inputs(spec))
    # inputs a slice reads: longer than the group, read whole from the slice's start
    sliced = (
        {k for k, _ in spec.offsets()[2] if tuple(spec.input_shapes[k]) != shape} if spec.stencil else set()
    )
    return run


def kernels(spec, fallback):
    """The backend's ``fused_kernels`` field: ``{"cuda": kernel}``."""
    return {"cuda": kernel(spec, fallback)}


# the rest of the backend's ``fusion`` field (polyad.backends.contract): the compiler asks these
expressions = CUDA  # the code of every fusable op
exact_ops = None  # every op: a fused kernel calls the functions CuPy's eager kernels call


def available():
    """Whether fused kernels can be built here: always (CuPy is imported when a kernel first runs)."""
    return True
