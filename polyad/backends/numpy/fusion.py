"""The CPU kernel of a fused group (``polyad.graph.compiler.fusion``): one Numba loop over the elements.

The loop reads each input element once, computes every member of the group in registers and writes the
group's outputs; sums are left to NumPy on the summand the loop wrote, so that their rounding is eager's
(pairwise summation). Numba is optional (the ``jit`` extra): without it ``available()`` is False and
``fuse`` leaves NumPy graphs as they are.

The generated source is written to a file under the cache directory (``$POLYAD_CACHE_DIR``, default
``~/.cache/polyad``) so that Numba's own cache can keep the machine code between processes; where that
directory cannot be written the source is compiled in memory.
"""

import hashlib
import importlib.util
import math
import os
import sys
import threading

import numpy as np

# Elements from which the loop runs on Numba's threads; None: always one thread. Measured on the 2-core VM
# (scripts/bench_fusion.py, W2 at 4e6): one thread was faster than Numba's two under the machine's load,
# and a parallel loop takes longer to compile.
PARALLEL_MIN = None
_COMPILED = {}  # (source, parallel) -> Numba dispatcher
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


def _literal(value, dtype):
    return f"np.{dtype}({float(value)!r})"


def source(spec):
    """The Python source of ``spec``'s loop: ``fused(n, in0, in1, ..., out0, ...)``, where a full input is
    a flat array of the group's ``n`` elements and a one-element input is read once before the loop."""
    modes = [_mode(s, spec.shape) for s in spec.input_shapes]
    stored = _stored(spec)
    params = ["n", *[f"in{k}" for k in range(len(modes))], *[f"out{k}" for k in range(len(stored))]]
    lines = [f"def fused({', '.join(params)}):", f"    one = np.{spec.dtype}(1.0)"]
    literals = {}
    for st in spec.statements:
        for kind, value in st.args:
            if kind == "lit" and value not in literals:
                literals[value] = f"c{len(literals)}"
                lines.append(f"    {literals[value]} = {_literal(value, spec.dtype)}")
    for k, mode in enumerate(modes):
        if mode == "one":
            lines.append(f"    s{k} = in{k}[0]")
    lines.append("    for i in prange(n):")
    for k, mode in enumerate(modes):
        if mode != "one":
            lines.append(f"        s{k} = in{k}[i]")
    for st in spec.statements:
        if st.cpu is None:
            continue  # a sum: NumPy reduces the stored summand
        names = [f"s{v}" if kind == "in" else f"t{v}" if kind == "t" else literals[v] for kind, v in st.args]
        expr = st.cpu.format(*names).replace("(1.0 / ", "(one / ")
        lines.append(f"        t{st.target} = {expr}")
    for k, target in enumerate(stored):
        lines.append(f"        out{k}[i] = t{target}")
    return "\n".join(lines) + "\n"


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


def _compile(text, parallel):
    key = (text, parallel)
    fn = _COMPILED.get(key)
    if fn is not None:
        return fn
    with _LOCK:
        fn = _COMPILED.get(key)
        if fn is None:
            fn = _COMPILED[key] = _build(text, parallel)
    return fn


def _build(text, parallel):
    numba = _numba()
    header = "import numpy as np\nimport numba\nfrom numba import prange\n\n"
    jit = "numba.njit(parallel={}, error_model='numpy', nogil=True, cache={})(fused)\n"
    digest = hashlib.sha1(f"{parallel}\n{text}\n{numba.__version__}".encode()).hexdigest()[:20]
    path = _cache_file(digest)
    if path is not None:
        try:
            if not os.path.exists(path):
                with open(f"{path}.{os.getpid()}.tmp", "w") as f:
                    f.write(header + text + "\n\nkernel = " + jit.format(parallel, True))
                os.replace(f"{path}.{os.getpid()}.tmp", path)
            name = f"polyad_fused_{digest}"
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
            return module.kernel
        except OSError:
            pass
    namespace = {}
    exec(compile(header + text + "\n\nkernel = " + jit.format(parallel, False), "<fused>", "exec"), namespace)
    return namespace["kernel"]


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
    text = source(spec)
    dtype = np.dtype(spec.dtype)
    shape = spec.shape
    n = math.prod(shape)
    modes = [_mode(s, shape) for s in spec.input_shapes]
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
    parallel = PARALLEL_MIN is not None and n >= PARALLEL_MIN

    def run(xp, *args):
        flat = []
        for a, mode in zip(args, modes):
            if type(a) is not np.ndarray or a.dtype != dtype:
                return fallback(xp, *args)
            if mode == "copy":
                a = np.broadcast_to(a, shape)
            flat.append(np.ascontiguousarray(a).reshape(-1))
        outs = [np.empty(n, dtype) for _ in stored]
        _compile(text, parallel)(n, *flat, *outs)
        values = []
        for how, where, params in results:
            if how == "stored":
                values.append(outs[where].reshape(shape))
            else:
                values.append(xp.sum(outs[where].reshape(shape), **params))
        return tuple(values) if multiple else values[0]

    run.source = text
    return run


def kernels(spec, fallback):
    """The backend's ``fused_kernels`` field: ``{"cpu": kernel}``, or nothing without Numba."""
    k = kernel(spec, fallback)
    return {} if k is None else {"cpu": k}
