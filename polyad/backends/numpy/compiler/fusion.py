"""The CPU kernel of a fused group (``polyad.graph.compiler.fusion``): one Numba loop over the elements.

The loop reads each input element once, computes every member of the group in registers and writes the
group's outputs; sums are left to NumPy on the summand the loop wrote, so that their rounding is eager's
(pairwise summation). Numba is optional (the ``jit`` extra): without it ``available()`` is False and
``fuse`` leaves NumPy graphs as they are.

Math (``spec.math``): with "fast" (the default of ``pa.jit``) the functions are the vectorisable ones of
``vecmath.py`` (within an ulp or two of the exact result; LLVM vectorises the whole loop); sin, cos and tan
count their arguments beyond the fast reduction and, if there are any, the call runs again with libm's
functions for those three. With "exact" the loop only holds the ops listed in ``EXACT``, whose results are
NumPy's bit for bit (the compiler leaves the others out of CPU groups: NumPy's own transcendental
functions differ from libm's in the last bit here and there).

Stencils (a group holding rolls, ``stencil_source``): the loop takes whole arrays and a range, reads each
rolled input through a view at its offset in the interior, and runs the few elements at both ends, whose
reads wrap around, through the same loop on small gathered arrays.

Threads: large calls run in chunks on several cores when that is measured to pay (``fusion_threads.py``).

Compilation: a kernel's first call hands its loop to a background thread and runs the group's ops as NumPy
calls until the loop is ready (``fusion_compile.py``); values in the loop are named by their place in the
group, so groups of the same structure (the steps of an unrolled Python loop) share one source and one
compiled loop.

The generated source is written to a file under the cache directory (``$POLYAD_CACHE_DIR``, default
``~/.cache/polyad``) so that Numba's own cache can keep the machine code between processes; where that
directory cannot be written the source is compiled in memory.
"""

import functools
import hashlib
import importlib.util
import math
import os
import sys
import threading
import weakref

import numpy as np

from . import fusion_compile, fusion_threads, vecmath_names
from .expressions import NUMBA

# ops whose code in the loop gives NumPy's result bit for bit (IEEE arithmetic, correctly rounded): the only
# element-wise ops of a CPU group under math="exact"
EXACT = frozenset(
    {"add", "subtract", "multiply", "divide", "negative", "positive", "abs", "square", "reciprocal", "sign",
     "sqrt", "broadcast_to", "where", "roll", "getitem", "maximum", "minimum", "stop_gradient"}
)  # fmt: skip
_COMPILED = {}  # (source, cache) -> Numba dispatcher
_MODULES = {}  # source -> the name of the module that holds its loop (in sys.modules, for Numba's cache)
_USERS = {}  # source -> how many live kernels run it: at 0 its loop is let go (``_let_go``)
_LOCK = threading.Lock()


def _numba():
    """The numba module, or None where it cannot be imported (it is an optional extra)."""
    try:
        import numba
    except ImportError:
        return None
    return numba


def available():
    """Whether fused CPU kernels can be built here: Numba is installed (it is imported when the first
    kernel is built, not here: the import takes a good part of a second)."""
    if "numba" in sys.modules:
        return sys.modules["numba"] is not None
    try:
        return importlib.util.find_spec("numba") is not None
    except (ImportError, ValueError):
        return False


def literals(spec):
    """The group's literal constants, each once, in the order the loop reads them: they are arguments of
    the loop (one-element arrays after its inputs), not part of its source, so that groups differing only
    in their constants (``pa.jit`` with a new static value per call) share one compiled loop."""
    found = {}
    for st in spec.statements:
        for kind, value in st.args:
            if kind == "lit" and value not in found:
                found[value] = len(found)
    return list(found)


def _literal_arrays(spec, dtype):
    return [np.array([float(v)]).astype(dtype) for v in literals(spec)]


def source(spec, libm=False):
    """The Python source of ``spec``'s loop: ``fused(n, in0, in1, ..., out0, ...)`` over ``n`` elements,
    where a full input and an output are flat arrays of those elements (a chunk's views, on threads) and
    a one-element input is read once before the loop. The index runs from 0, so that LLVM knows it is not
    negative: indexing from a ``start`` argument made Numba's wraparound of negative indices a gather.
    It returns the count of arguments that the fast functions hand to libm (``vecmath.range_check``);
    ``libm``: the source that computes those functions with libm instead (the second run when that count
    is not zero)."""
    modes = [_mode(s, spec.shape) for s in spec.input_shapes]
    stored = _stored(spec)
    constants = {value: f"c{j}" for j, value in enumerate(literals(spec))}
    params = [
        "n",
        *[f"in{k}" for k in range(len(modes) + len(constants))],  # the inputs, then the literals
        *[f"out{k}" for k in range(len(stored))],
    ]
    lines = [
        f"def fused({', '.join(params)}):",
        f"    # math={spec.math!r}",
        f"    one = np.{spec.dtype}(1.0)",
    ]
    lines.append("    outside = 0")
    for name in constants.values():
        lines.append(f"    {name} = in{len(modes) + int(name[1:])}[0]")
    for k, mode in enumerate(modes):
        if mode == "one":
            lines.append(f"    s{k} = in{k}[0]")
    lines.append("    for i in range(n):")
    for k, mode in enumerate(modes):
        if mode != "one":
            lines.append(f"        s{k} = in{k}[i]")
    checked = set()  # arguments counted already (sin(x) and cos(x) count x once)
    # values are named by their order in the group, not by their graph ids: groups of the same structure
    # (each step of an unrolled loop) then have the same source, and share one compiled kernel
    local = {}
    for st in spec.statements:
        if not st.elementwise:
            continue  # a sum: NumPy reduces the stored summand
        names = [
            f"s{v}" if kind == "in" else f"t{local[v]}" if kind == "t" else constants[v]
            for kind, v in st.args
        ]
        expr, check = _expression(st, names, spec, libm)
        local[st.target] = len(local)
        lines.append(f"        t{local[st.target]} = {expr}")
        if check is not None and names[0] not in checked:
            checked.add(names[0])
            lines.append(f"        outside += {check}")
    for k, target in enumerate(stored):
        lines.append(f"        out{k}[i] = t{local[target]}")
    lines.append("    return outside")
    return "\n".join(lines) + "\n"


def _offset_name(d):
    return f"p{d}" if d > 0 else f"m{-d}" if d < 0 else "0"


def stencil_source(spec, libm=False):
    """The Python source of the loop of a group that reads neighbours (``spec.stencil``):
    ``fused(start, stop, n, edges, in0, ..., out0, ...)`` writes the elements ``start`` to ``stop`` of the
    interior (where every offset read stays inside the array) and, if ``edges``, the few elements near
    both ends, whose reads wrap around (a roll is periodic). Inputs and outputs are whole flat arrays (the
    chunks of threads share them); an input read at offset ``d`` is a view starting ``d`` further, so the
    loop indexes from 0 as ``source``'s does (LLVM then vectorises it). The ends run through the same
    loop (its code once: Numba's compile time grows with it) on small arrays gathered with wrapped
    indices, whose results are then put in place. Values a roll reads from the group are computed again
    at its offset (``FusionSpec.offsets``); ``libm`` as for ``source``."""
    modes = _modes(spec)
    stored = _stored(spec)
    constants = {value: f"c{j}" for j, value in enumerate(literals(spec))}
    values, reads, plain = spec.offsets()
    pairs = [(k, d) for k, ds in sorted(reads.items()) if modes[k] != "one" for d in ds]
    wrapping = [d for k, d in pairs if (k, d) not in plain]  # a slice's reads stay inside its input
    low = max(0, -min(wrapping, default=0))
    high = max(0, max(wrapping, default=0))
    params = [
        "start", "stop", "n", "edges",
        *[f"in{k}" for k in range(len(modes) + len(constants))],
        *[f"out{k}" for k in range(len(stored))],
    ]  # fmt: skip
    view = {(k, d): f"v{k}_{_offset_name(d)}" for k, d in pairs}
    lines = [
        f"def fused({', '.join(params)}):",
        f"    # math={spec.math!r}, stencil",
        f"    one = np.{spec.dtype}(1.0)",
        "    outside = 0",
        *[f"    {name} = in{len(modes) + int(name[1:])}[0]" for name in constants.values()],
        *[f"    s{k} = in{k}[0]" for k, mode in enumerate(modes) if mode == "one"],
        f"    lo = {low} if {low} < n else n",  # the interior: lo <= i < hi
        f"    hi = n - {high} if n - {high} > lo else lo",
        "    a = start if start > lo else lo",
        "    b = stop if stop < hi else hi",
        "    for part in range(2):",
        "        if part == 0:  # the interior: views of the inputs at their offsets",
        "            count = b - a if b > a else 0",
        *[f"            {view[(k, d)]} = in{k}[a + {d}:]" for k, d in pairs],
        *[f"            w{k} = out{k}[a:]" for k in range(len(stored))],
        "        else:  # the ends: their reads gathered, wrapped",
        "            count = lo + n - hi if edges else 0",
        "            if count == 0:",
        "                break",
        *[f"            {view[(k, d)]} = np.empty(count, in{k}.dtype)" for k, d in pairs],
        *[f"            w{k} = np.empty(count, out{k}.dtype)" for k in range(len(stored))],
        "            for e in range(count):",
        "                i = e if e < lo else hi + e - lo",
        *[
            f"                {view[(k, d)]}[e] = in{k}[i + {d}]"
            if (k, d) in plain
            else f"                {view[(k, d)]}[e] = in{k}[(i + {d}) % n]"
            for k, d in pairs
        ],
        "        for j in range(count):",
    ]
    body = [f"s{k}_{_offset_name(d)} = {view[(k, d)]}[j]" for k, d in pairs]
    names, local, checked = {}, {}, set()

    def name(arg, d):
        kind, v = arg
        if kind == "in":
            return f"s{v}" if modes[v] == "one" else f"s{v}_{_offset_name(d)}"
        return names[(v, d)] if kind == "t" else constants[v]

    for st in spec.statements:
        if not st.elementwise and st.shift is None:
            continue  # a sum: NumPy reduces the stored summand
        local[st.target] = len(local)
        for d in values.get(st.target, ()):
            if st.shift is not None:  # a roll: its argument, read at another offset
                names[(st.target, d)] = name(st.args[0], d - st.shift)
                continue
            args = [name(arg, d) for arg in st.args]
            expr, check = _expression(st, args, spec, libm)
            names[(st.target, d)] = f"t{local[st.target]}_{_offset_name(d)}"
            body.append(f"{names[(st.target, d)]} = {expr}")
            if check is not None and args[0] not in checked:
                checked.add(args[0])
                body.append(f"outside += {check}")
    body += [f"w{k}[j] = {names[(target, 0)]}" for k, target in enumerate(stored)]
    lines += ["            " + t for t in body]
    lines += [
        "        if part == 1:",
        "            for e in range(count):",
        "                i = e if e < lo else hi + e - lo",
        *[f"                out{k}[i] = w{k}[e]" for k in range(len(stored))],
        "    return outside",
    ]
    return "\n".join(lines) + "\n"


def _expression(statement, names, spec, libm):
    """``(text, check)``: the statement's expression in the loop, and the text counting an argument the
    fast function leaves to libm (None if it never does)."""
    plain = NUMBA[statement.op].format(*names).replace("(1.0 / ", "(one / ")
    vm = vecmath_names  # the text only: Numba is not imported until a kernel is built
    if spec.math != "fast" or statement.op not in vm.FUNCTIONS:
        return plain, None
    if statement.op == "pow" and statement.args[1][0] == "lit" and statement.args[1][1] in _POWERS:
        return _POWERS[statement.args[1][1]].format(names[0]), None  # as exact as pow: no function call
    if libm and statement.op in vm.REDUCED:
        return vm.libm_expression(statement.op, spec.dtype, names), None
    return vm.expression(statement.op, spec.dtype, names), vm.range_check(statement.op, spec.dtype, names[0])


# literal exponents whose power is one correctly rounded operation (or none), as pow's result is
_POWERS = {2: "({0} * {0})", 1: "{0}", 0: "one", -1: "(one / {0})"}
_POWERS.update({float(k): v for k, v in _POWERS.items()})


def _vecmath():
    """The fast functions' module (it imports Numba: only kernel builders call this)."""
    from . import vecmath

    return vecmath


def _size(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _modes(spec):
    """Each input's ``_mode``; in a stencil group, "sliced" for an input a slice reads (longer than the
    group: read whole, from the slice's start)."""
    modes = [_mode(s, spec.shape) for s in spec.input_shapes]
    if spec.stencil:
        for k, _ in spec.offsets()[2]:
            if tuple(spec.input_shapes[k]) != tuple(spec.shape):
                modes[k] = "sliced"
    return modes


def _mode(shape, group_shape):
    """How the loop reads an input: "full" (its own elements), "one" (one element for all) or "copy"
    (another broadcast: made full by a copy first)."""
    if tuple(shape) == tuple(group_shape):
        return "full"
    if math.prod(shape) == 1:
        return "one"
    return "copy"


def _stored(spec):
    """The group values the loop writes: elementwise outputs and the summands of sums, each once."""
    stored = []
    for index, (target, kind, _) in enumerate(spec.outputs):
        if kind == "elementwise":
            value = target
        else:
            value = spec.summand_of(index)[1]
        if value not in stored:
            stored.append(value)
    return stored


def compile_source(text, cache=True):
    """The Numba dispatcher of loop source ``text``; ``cache=False``: compiled in memory only (its LLVM IR
    can then be inspected, which Numba refuses for code loaded from its cache)."""
    key = (text, cache)
    fn = _COMPILED.get(key)
    if fn is not None:
        return fn
    with _LOCK:
        fn = _COMPILED.get(key)
        if fn is None:
            fn = _COMPILED[key] = _build(text, cache)
    return fn


def _build(text, cache=True):
    numba = _numba()
    vm = _vecmath()
    name = vm.MODULE_NAME
    uses_vecmath = f"{name}." in text
    if uses_vecmath:
        vm.prepare(text)
    header = "import math\nimport numpy as np\nimport numba\n"
    if uses_vecmath:
        header += f"from polyad.backends.numpy.compiler import vecmath as {name}\n"
    header += "\n"
    jit = "numba.njit(error_model='numpy', nogil=True, cache={})(fused)\n"
    # the file's name is a hash of all that its machine code depends on beyond what Numba's cache checks
    # (its signatures, the CPU, Python): the whole file, the fast functions' source (Numba does not see a
    # callee change), Numba's and NumPy's versions. A change of any is a new file, never a stale kernel
    versions = f"{numba.__version__}\n{np.__version__}\n{_vecmath_digest() if uses_vecmath else ''}"
    whole = header + text + "\n\nkernel = " + jit.format(True)
    digest = hashlib.sha1(f"{whole}\n{versions}".encode()).hexdigest()[:20]
    path = _cache_file(digest) if cache else None
    if path is not None:
        try:
            if not os.path.exists(path):
                with open(f"{path}.{os.getpid()}.{threading.get_ident()}.tmp", "w") as f:
                    f.write(whole)
                os.replace(f"{path}.{os.getpid()}.{threading.get_ident()}.tmp", path)
            name = f"polyad_fused_{digest}"
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            _MODULES[text] = name
            spec.loader.exec_module(module)
            return module.kernel
        except OSError:
            pass
    namespace = {}
    exec(compile(header + text + "\n\nkernel = " + jit.format(False), "<fused>", "exec"), namespace)
    return namespace["kernel"]


_VECMATH_DIGEST = []


def _vecmath_digest():
    """A hash of the fast functions' source files."""
    if not _VECMATH_DIGEST:
        folder = os.path.dirname(os.path.abspath(__file__))
        h = hashlib.sha1()
        for name in sorted(os.listdir(folder)):
            if name.startswith("vecmath") and name.endswith(".py"):
                with open(os.path.join(folder, name), "rb") as f:
                    h.update(f.read())
        _VECMATH_DIGEST.append(h.hexdigest())
    return _VECMATH_DIGEST[0]


def _cache_file(digest):
    root = os.environ.get("POLYAD_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "polyad")
    folder = os.path.join(root, "fusion")
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError:
        return None
    return os.path.join(folder, f"k_{digest}.py")


def kernel(spec, fallback):
    """The "cpu" kernel ``kernel(xp, *arrays)`` of a fused group, or None without Numba. It runs the loop
    on NumPy arrays of the group's dtype and hands anything else (array_api_strict and dask arrays are
    "cpu" too) to ``fallback``, the straight-line kernel."""
    if not available():
        return None
    stencil = spec.stencil
    text = stencil_source(spec) if stencil else source(spec)
    dtype = np.dtype(spec.dtype)
    dtypes = [np.dtype(d) for d in spec.input_dtypes]  # the group's, or bool (a where's condition)
    shape = spec.shape
    n = math.prod(shape)
    modes = _modes(spec)
    constants = _literal_arrays(spec, dtype)  # read once per call, before the loop
    loop_modes = modes + ["one"] * len(constants)
    stored = _stored(spec)
    slot = {target: k for k, target in enumerate(stored)}
    results = []
    for index, (target, kind, params) in enumerate(spec.outputs):
        if kind == "elementwise":
            results.append(("stored", slot[target], None))
        elif kind == "sum":
            results.append(("sum", slot[spec.summand_of(index)[1]], params))
        else:
            raise ValueError(f"fused CPU kernel: unknown output kind {kind!r}")
    multiple = len(results) > 1
    checks = "outside +=" in text
    runner = fusion_threads.Runner()
    small = fusion_threads.PROBE  # below it a call runs serially, untimed (Runner)

    compiled = []  # the loop, once ready
    _hold(text)
    build = functools.partial(
        _compiled_loop, text, [*dtypes, *[dtype] * len(constants)], dtype, len(stored), stencil
    )

    flat_group = len(shape) == 1  # a 1-D group: its arrays are the loop's flat arrays, no reshape
    # a sum of a floating group by the ufunc itself (np.sum's wrapper is most of a small sum's time;
    # it only differs for small integers, which it widens)
    add_reduce = np.add.reduce if dtype.kind in "fc" else None

    def run(xp, *args):
        # the common case in few Python steps: the kernel's overhead is most of a small group's time
        flat = []
        for a, mode, want in zip(args, modes, dtypes):
            if type(a) is np.ndarray:
                if a.dtype != want:
                    return fallback(xp, *args)
                if not a.ndim:  # 0-d (a small state's scalars; never "copy"): a view of its one element
                    a = a.reshape(1)
                else:
                    if mode == "copy":
                        a = np.broadcast_to(a, shape)
                    if not a.flags.c_contiguous:
                        a = np.ascontiguousarray(a)
                    if a.ndim != 1:
                        a = a.reshape(-1)
            elif isinstance(a, np.generic):  # a NumPy scalar (np.float64(0.5) passed in, a 0-d result)
                if a.dtype != want:
                    return fallback(xp, *args)
                a = a.reshape(1)  # an ndarray of its one element (one element: never "copy")
            else:
                return fallback(xp, *args)
            flat.append(a)
        flat.extend(constants)
        if not compiled:
            loop = fusion_compile.ready(text, build)
            if loop is None:  # compiling in the background (fusion_compile.py): the group's ops meanwhile
                return fallback(xp, *args)
            compiled.append(loop)
        fused = compiled[0]
        outs = [np.empty(n, dtype) for _ in stored]
        if stencil:  # whole arrays, the range as arguments: chunks read their neighbours' elements
            if n < small:
                outside = fused(0, n, n, True, *flat, *outs)
            else:
                outside = runner(_ranges(fused, flat, outs, n), n, True)
        elif n < small:  # never threads: the loop itself, no chunking closure (most of a small call's time)
            outside = fused(n, *flat, *outs)
        else:
            outside = runner(_chunked(fused, flat, outs, loop_modes, n), n, True)
        if checks and outside:  # arguments beyond the fast reduction: the call again, with libm's
            if stencil:
                exact = compile_source(stencil_source(spec, libm=True))
                fusion_threads.Runner()(_ranges(exact, flat, outs, n), n, False)
            else:
                exact = compile_source(source(spec, libm=True))
                fusion_threads.Runner()(_chunked(exact, flat, outs, loop_modes, n), n, False)
        values = []
        for how, where, params in results:
            out = outs[where] if flat_group else outs[where].reshape(shape)
            if how == "stored":
                values.append(out)
            elif add_reduce is not None:
                values.append(add_reduce(out, axis=params["axis"], keepdims=bool(params["keepdims"])))
            else:
                values.append(xp.sum(out, **params))
        return tuple(values) if multiple else values[0]

    def warm():
        """Start compiling the loop now (in the background), not at the first call."""
        if not compiled:
            loop = fusion_compile.ready(text, build)
            if loop is not None:
                compiled.append(loop)

    run.source = text
    run.constants = constants  # the loop's literal arguments, after its inputs (``literals``)
    run.warm = warm
    libm_text = (stencil_source if stencil else source)(spec, libm=True) if checks else None
    weakref.finalize(run, _GONE.append, (text, libm_text))
    return run


def _hold(text):
    _let_go_of_the_gone()
    with _LOCK:
        _USERS[text] = _USERS.get(text, 0) + 1


# sources of kernels that are gone: a finalizer runs inside the garbage collector, possibly while this
# thread holds _LOCK (a deadlock if it took it), so it only appends, and the next kernel built or count
# asked for lets the loops go (``_let_go_of_the_gone``)
_GONE = []


def _let_go_of_the_gone():
    """With the last kernel of a loop gone (its graph dropped: ``pa.jit``'s ``clear_cache``, an evicted
    signature), the compiled loop and its libm twin are let go, so that a function retraced for ever new
    values does not hold a loop each."""
    later = []
    while _GONE:
        text, libm_text = _GONE.pop()
        if fusion_compile.compiling(text):
            # its loop is compiling (the background thread, or a waiting caller): Numba's cache loads the
            # module by its name, so popping it now failed that compile (ModuleNotFoundError); later
            later.append((text, libm_text))
            continue
        with _LOCK:
            users = _USERS.get(text, 0) - 1
            if users > 0:
                _USERS[text] = users
                continue
            _USERS.pop(text, None)
            for t in (text, libm_text):
                if t is not None:
                    _COMPILED.pop((t, True), None)
                    sys.modules.pop(_MODULES.pop(t, ""), None)
        fusion_compile.forget(text)
    _GONE.extend(later)


def loops_held():
    """The sources of the compiled CPU loops the process holds for kernels (frozenset): each loop is let
    go with the last kernel that runs it (``pa.jit``'s ``clear_cache`` drops a function's kernels)."""
    _let_go_of_the_gone()
    return fusion_compile.loops_held()


def _compiled_loop(text, in_dtypes, dtype, outputs, stencil=False):
    """The loop of source ``text`` compiled for flat arrays (inputs of ``in_dtypes``, then ``outputs`` of
    ``dtype``), by a call on empty ones: what ``fusion_compile`` runs in the background. ``stencil``: the
    loop takes a range and a flag first (``stencil_source``)."""
    loop = compile_source(text)
    one = [np.empty(1, d) for d in in_dtypes] + [np.empty(1, dtype) for _ in range(outputs)]
    if stencil:
        loop(0, 0, 1, False, *one)
    else:
        loop(0, *one)
    return loop


def _ranges(fused, flat, outs, n):
    """``loop(start, stop)``: the stencil loop ``fused`` on the elements ``start`` to ``stop`` of whole
    arrays; the chunk that starts at 0 also writes the wrapped elements at both ends."""

    def loop(start, stop):
        return fused(start, stop, n, start == 0, *flat, *outs)

    return loop


def _chunked(fused, flat, outs, modes, n):
    """``loop(start, stop)``: ``fused`` on the elements ``start`` to ``stop`` (views of the full inputs
    and of the outputs; one-element inputs whole)."""

    def loop(start, stop):
        if start == 0 and stop == n:
            return fused(n, *flat, *outs)
        ins = [a if mode == "one" else a[start:stop] for a, mode in zip(flat, modes)]
        return fused(stop - start, *ins, *[o[start:stop] for o in outs])

    return loop


def op_loop(op, dtype, cache=True):
    """``op`` (a key of ``vecmath.FUNCTIONS``) over NumPy arrays of ``dtype`` through the expression the
    fused loop gives it under math="fast", the second run with libm for large trigonometric arguments
    included: ``f(*arrays, fallback=True) -> array`` (the accuracy tests and benchmarks call it; ``f.loop``
    is the compiled loop; ``cache=False`` compiles it in memory, for its LLVM IR)."""
    vm = _vecmath()
    arity = 2 if op in ("pow", "logaddexp") else 1
    names = [f"in{k}[i]" for k in range(arity)]
    params = ", ".join(["n", *[f"in{k}" for k in range(arity)], "out0"])
    check = vm.range_check(op, dtype, names[0])

    def text(expr):
        lines = [f"def fused({params}):", "    outside = 0", "    for i in range(n):"]
        lines.append(f"        out0[i] = {expr}")
        if check is not None:
            lines.append(f"        outside += {check}")
        return "\n".join([*lines, "    return outside"]) + "\n"

    fast = compile_source(text(vm.expression(op, dtype, names)), cache)
    libm = compile_source(text(vm.libm_expression(op, dtype, names)), cache) if check is not None else None

    def run(*arrays, fallback=True):
        arrays = [np.ascontiguousarray(a, dtype=dtype).reshape(-1) for a in np.broadcast_arrays(*arrays)]
        out = np.empty(arrays[0].shape, dtype)
        if fast(out.size, *arrays, out) and fallback and libm is not None:
            libm(out.size, *arrays, out)
        return out

    run.loop = fast
    return run


def kernels(spec, fallback):
    """The backend's ``fused_kernels`` field: ``{"cpu": kernel}``, or nothing without Numba."""
    k = kernel(spec, fallback)
    return {} if k is None else {"cpu": k}
