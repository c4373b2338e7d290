"""The backend contract: the fields each backend declares (``Backend``) and their check (``check``).

Whatever differs between array libraries is one of these fields, so that no code outside
``polyad/backends/`` tests a backend's name or imports its library.

**The contract.** A backend's loader returns a ``Backend``; ``check`` verifies it when it loads, and a
backend that breaks the contract is unusable, with an error naming the backend and each missing piece.
Its fields:

- ``name``: the name it is registered under.
- ``compat``: the library's Array API namespace (its array-api-compat module, or the library itself when
  it conforms, as array_api_strict does). It must have ``__array_namespace_info__``.
- ``extras``: a module (or mapping) of functions the standard lacks, merged over ``compat`` into the
  namespace ``xp`` that generic kernels receive. Required: ``scatter_add(target, indices, values, axis)``
  (add ``values`` into a copy of ``target`` at the 1-D integer ``indices`` along ``axis``, repeated
  indices accumulating) and ``index_add(target, key, values)`` (the same at a general index ``key``).
  Any other function there replaces the namespace's function of that name (a faster direct call); a
  mapping named ``linalg`` or ``fft`` adds to or replaces functions of that extension. Optional:
  ``product_without_nan(g, d, divide=False)`` (``g * d`` or ``g / d`` where that equals the zero-safe
  product, else None, by a check cheaper than a mask: NumPy's sums a factor much smaller than the product,
  else the product), which lets the zero-safe products of ``polyad.ops.zero_safe`` skip their mask; and, for
  a lazy library, ``persist(*arrays) -> arrays`` (each array computed, its value kept: Dask's persist),
  which a Python loop calls on its state at each step it reads a value (a while loop's condition, an ODE
  solver's step control), so that each step's graph starts from the last step's values, not from the
  loop's start (``polyad.dispatch.persisted``); and ``decompose_stack(f, x) -> f(x)``, for a library whose
  batched eigh/svd give other vectors (signs, bases of repeated values) than one matrix at a time: it runs
  ``f`` (a tuple-returning decomposition of matrices) on each matrix of the stack ``x`` and stacks the
  results, so that vmap of a function gives the answers its eager calls give (CuPy's cuSOLVER).
- ``array_types``: the types of the library's arrays (``isinstance`` decides which backend owns an array).
- ``is_scalar(x) -> bool``: True for the library's scalar objects that subclass a Python number yet
  belong to it (NumPy's ``float64`` subclasses ``float``); never for Python's own types. Default: never.
- ``device_type(array) -> str``: the device type of one of its arrays ("cpu", "cuda", ...).
- ``device_types``: ``{device type: the device type it ranks directly above}``, every type
  ``device_type`` can return; registered through ``register_device_type`` when the backend loads
  (``{"cpu": None}`` for a CPU library: "cpu" is always known, the lowest priority).
- ``devices() -> list``: its devices (default: those of ``compat``'s ``__array_namespace_info__``).
- ``generator``: the random generator class, ``generator(seed)`` with ``normal(shape, dtype, device)``,
  ``uniform(shape, dtype, device)``, ``integers(low, high, shape, dtype, device)``, ``get_state()`` and
  ``set_state(state)`` (``polyad.random`` builds one per backend from it).
- ``defer_to(tensor_type)`` or None: called by the core, once, with polyad's Tensor type; afterwards the
  library's binary operators must return NotImplemented for such operands, so that Python calls the
  tensor's reflected operator (``W @ x`` with a raw array ``W``). NumPy and CuPy need nothing (their
  operators call NumPy's ufunc, which Tensor's ``__array_ufunc__`` computes in polyad ops); Dask defers
  to an operand with its own ``__array_ufunc__``; array_api_strict patches its ``Array``.
- ``to_numpy(array) -> numpy.ndarray``: a NumPy copy (tests compare every backend against NumPy).
- ``accepts``: names of other backends whose arrays this library's functions take as operands as they
  are (Dask takes NumPy arrays, each as one chunk): a call mixing the two runs on this backend. Default
  none: mixing libraries in one call is an error.
- ``map_host(f, args)`` or None: for a library whose arrays hold NumPy chunks (Dask), NumPy element-wise
  function ``f`` (a SciPy ufunc: the "cpu" kernels of ``xp.special``) applied to the arrays among
  ``args`` without a host copy, in the library's arrays (a tuple when ``f`` returns one). None: such
  kernels run ``f`` on ``to_numpy`` copies and convert back.
- ``kernels``: device kernels for ops polyad ships, as data: ``{op name: {device type: kernel}}``, each
  ``kernel(xp, *arrays, **params)`` (e.g. ``{"polyad::softplus": {"cuda": fn}}``). The core attaches them
  to the op when both the backend and the op exist; a kernel registered on the op explicitly wins.
- ``fused_kernels(spec, fallback) -> {device type: kernel}`` or None: the kernels of a group that
  ``pa.jit`` fuses (``spec``: a ``polyad.graph.compiler.fusion.FusionSpec``; ``fallback``: the group as
  straight-line calls, for arrays the kernel does not take), an empty dict where it cannot build one.
  None: fused groups run as straight-line calls (NumPy's kernels are Numba loops, CuPy's an
  ``ElementwiseKernel``).
- ``sparse`` (optional; default: ``extras.sparse`` if the extras define one, else None): the backend's
  sparse linear algebra, a ``polyad.backends.host.SparseSupport`` (or an object with its methods):
  ``container`` ("csr": ``csr(data, indices, indptr, shape)`` builds the library's CSR matrix from arrays of
  the backend, with no host copy; "dense": the library has no sparse matrices, and sparse Jacobians are
  the library's dense arrays), ``is_sparse``, ``to_dense``, ``to_scipy`` (a host SciPy copy, for patterns),
  ``matvec``, ``splu(A, **options)`` (``.solve(b, trans)`` on backend arrays),
  ``spsolve(A, b)`` and ``krylov(method, matvec, b, *, x0, rtol, atol, maxiter,
  M)`` (``cg``, ``gmres``, ``bicgstab``; the tolerance's keyword mapped to the library's own). NumPy's is
  SciPy; CuPy's cupyx; array_api_strict's and Dask's run SciPy on deliberate host copies (each counted by
  ``host_copies``) and hold sparse Jacobians as ``array_csr.ArrayCSR`` (CSR arrays of the library, on
  their device). polyad reaches SciPy's and cupyx's sparse
  functions only through this field.
- ``host_arrays`` (default False): True when the library's arrays are NumPy arrays in host memory, which
  NumPy and SciPy functions take as they are (no copy): SciPy's kernels then run on them directly, and the
  fused CPU loops are called on them without dispatch.
- ``ufunc_out`` (default False): True when the library's element-wise functions are ufuncs that write
  into an ``out=`` array (NumPy's, CuPy's): ``pa.jit`` then reuses dead buffers for them.
- ``lazy`` (default False): True when the library's arrays are graphs computed when read (Dask).
- ``fusion`` (optional; default None): the backend's code generation for the groups ``pa.jit`` fuses, an
  object with ``kernels(spec, fallback)`` (the default of ``fused_kernels``), ``available()`` (False where
  the kernels cannot be built here, NumPy without Numba: ``pa.jit`` then leaves groups unfused for this
  backend), ``exact_ops`` (the element-wise ops whose code gives eager's results bit for bit, kept in
  groups under ``math="exact"``; None: every op) and ``expressions`` (``{op name: code template}``, one for
  every op of ``polyad.graph.compiler.fusion.FUSABLE``; ``{0}``, ``{1}`` are the arguments). The compiler
  asks it, never a backend's module. Optionally, for graphs of small values compiled whole (NumPy's:
  one Numba function of scalars): ``graph_function(graph, fallback)`` (a loop step as one call),
  ``while_function(cond, body, n_carry, n_cond)`` and ``sweep_function(body, pullback, n_carry,
  floats)`` (a while loop and its reverse sweep as one call each; ``polyad.control.compiled_loops``).
- ``graph_capture`` (optional; default None): replay of a Python function of device arrays as one
  device graph (CuPy's CUDA graphs), an object with ``capture(record) -> replay``: ``record()`` launches
  kernels that read and write only arrays allocated before the call and kept alive by the caller, and
  nothing in it synchronises with the host; ``replay.launch()`` runs what ``record`` launched again, on
  the current stream. ``capture`` may run ``record`` for real before recording it (a warm-up that
  compiles its kernels), so the caller writes the inputs after the capture; what ``record`` allocates
  comes from memory private to the replay, kept alive with it. A failure inside leaves no capture open
  and is raised. ``pa.jit``'s loops replay their compiled steps through it (``polyad.control.graph_steps``).
- ``version`` (a string) and ``native`` (the library module, or None): for ``python -m polyad info``.

**Each backend folder** has the same files: ``__init__.py`` (``load() -> Backend``), ``extras.py``
(``scatter_add``, ``index_add`` and direct library calls for hot functions), ``kernels.py``
(``KERNELS``: the ``kernels`` field) and ``random.py`` (``Generator``: the ``generator`` field).
"""

import inspect
import types
from collections.abc import Mapping

from .devices import DEVICE_PRIORITY
from .host import note_host_copy

# the required extras, with the positional parameters each takes
REQUIRED_EXTRAS = {
    "scatter_add": ("target", "indices", "values", "axis"),
    "index_add": ("target", "key", "values"),
}
GENERATOR_METHODS = ("normal", "uniform", "integers", "get_state", "set_state")
CONTRACT_EXTRAS = ("sparse",)  # fields a backend may give in its extras: not merged into its namespace
SPARSE_METHODS = ("is_sparse", "to_dense", "to_scipy", "matvec", "splu", "spsolve", "krylov")


def _counted(to_numpy):
    """``to_numpy`` counting its calls (``host_copies``)."""
    if not callable(to_numpy) or getattr(to_numpy, "_polyad_counted", False):
        return to_numpy

    def counted(array):
        note_host_copy()
        return to_numpy(array)

    counted._polyad_counted = True
    return counted


class BackendUnavailable(RuntimeError):
    """Raised by a backend's loader when its library cannot be used on this machine."""


class BackendContractError(BackendUnavailable):
    """A backend that breaks the contract (the message names the backend and each missing piece)."""


class Backend:
    """One concrete array library: the fields of the contract.

    ``xp`` is built from ``compat`` with ``extras`` merged over it; generic kernels receive it as their
    first argument. ``check`` verifies the fields; the registry runs it when the backend loads.

    Args:
        name, compat, extras, array_types, device_type, device_types, generator, to_numpy: required,
            keyword only; each is described in this module's docstring.
        is_scalar: default never; devices: default the devices of ``compat``'s namespace info;
            defer_to: default None (nothing to patch); accepts: default none; map_host: default None
            (host copies); kernels: default none; version: default "unknown"; native: default None;
            fused_kernels: default None (fused groups of ``pa.jit`` run as straight-line calls), else
            ``fused_kernels(spec, fallback) -> {device type: kernel}`` for a ``polyad.graph.compiler.fusion``
            group (an empty dict where it cannot build one); sparse: default ``extras.sparse``, else None
            (no sparse linear algebra); host_arrays, ufunc_out, lazy: default False; fusion: default
            None (no fused kernels of its own); graph_capture: default None (loop steps launched one by
            one).

    Example:
        >>> from polyad.backends import numpy as numpy_backend
        >>> b = numpy_backend.load()
        >>> b.name, b.device_types, b.xp.scatter_add is numpy_backend.extras.scatter_add
        ('numpy', {'cpu': None}, True)
    """

    def __init__(
        self,
        *,
        name,
        compat,
        extras,
        array_types,
        device_type,
        device_types,
        generator,
        to_numpy,
        is_scalar=None,
        devices=None,
        defer_to=None,
        accepts=(),
        map_host=None,
        kernels=None,
        version="unknown",
        native=None,
        fused_kernels=None,
        sparse=None,
        host_arrays=False,
        ufunc_out=False,
        lazy=False,
        fusion=None,
        graph_capture=None,
    ):
        self.name = name
        self.fusion = fusion
        self.graph_capture = graph_capture
        self.fused_kernels = fused_kernels if fused_kernels is not None else getattr(fusion, "kernels", None)
        self.host_arrays = host_arrays
        self.ufunc_out = ufunc_out
        self.lazy = lazy
        self.compat = compat
        self.extras = extras
        if isinstance(array_types, type):
            array_types = (array_types,)
        self.array_types = tuple(array_types) if isinstance(array_types, list | tuple) else array_types
        self.device_type = device_type
        self.device_types = dict(device_types) if isinstance(device_types, Mapping) else device_types
        self.generator = generator
        self.to_numpy = _counted(to_numpy)
        self.is_scalar = is_scalar if is_scalar is not None else _never
        self.devices = (
            devices if devices is not None else lambda: list(compat.__array_namespace_info__().devices())
        )
        self.defer_to = defer_to
        self.accepts = tuple(accepts) if isinstance(accepts, list | tuple) else accepts
        self.map_host = map_host
        self.kernels = {} if kernels is None else kernels
        self.version = version
        self.native = native
        xp = types.ModuleType(f"polyad.backends.{name}.xp")
        xp.__dict__.update({k: v for k, v in vars(compat).items() if not k.startswith("__")})
        members = _members(extras) if isinstance(extras, Mapping) or hasattr(extras, "__dict__") else {}
        self.sparse = sparse if sparse is not None else members.get("sparse")
        xp.__dict__.update(
            {
                k: v
                for k, v in members.items()
                if not k.startswith("_") and not _is_module(v) and k not in CONTRACT_EXTRAS
            }
        )
        xp.__array_api_version__ = getattr(compat, "__array_api_version__", "2024.12")
        info = getattr(compat, "__array_namespace_info__", None)
        if info is not None:
            xp.__array_namespace_info__ = info
        for ext in ("linalg", "fft"):  # array_api_strict serves its extensions from a module __getattr__
            base = vars(compat).get(ext) or getattr(compat, ext, None)
            more = members.get(ext)
            if isinstance(more, Mapping) and base is not None:  # the extras' fixes to the extension
                merged = types.ModuleType(f"polyad.backends.{name}.xp.{ext}")
                merged.__dict__.update({k: v for k, v in vars(base).items() if not k.startswith("__")})
                merged.__dict__.update(more)
                setattr(xp, ext, merged)
            elif base is not None:
                setattr(xp, ext, base)
        self.xp = xp

    def __repr__(self):
        return f"Backend({self.name!r})"


# the public names keep the package's path in tracebacks and reprs (polyad.backends.BackendUnavailable)
for _public in (BackendUnavailable, BackendContractError, Backend):
    _public.__module__ = "polyad.backends"


def _never(x):
    return False


def _is_module(v):
    return isinstance(v, types.ModuleType)


def _members(obj):
    return dict(obj) if isinstance(obj, Mapping) else dict(vars(obj))


# --------------------------------------------------------------------------------------------- checks


def check(backend, name=None):
    """Raise ``BackendContractError`` unless ``backend`` keeps the contract (this module's docstring).

    Args:
        backend: what a loader returned.
        name: the name it was registered under (its ``name`` must match), or None.

    Returns:
        ``backend``, unchanged.

    Example:
        >>> from polyad import backends
        >>> from polyad.backends import numpy as numpy_backend
        >>> backends.check(numpy_backend.load()).name
        'numpy'
    """
    label = name if name is not None else getattr(backend, "name", "?")
    if not isinstance(backend, Backend):
        raise BackendContractError(
            f"backend {label!r}: its loader must return a polyad.backends.Backend, "
            f"got {type(backend).__name__}"
        )
    problems = []
    if name is not None and backend.name != name:
        problems.append(f"name is {backend.name!r}, registered as {name!r}")
    if not hasattr(backend.compat, "__array_namespace_info__"):
        problems.append("compat (its Array API namespace) lacks __array_namespace_info__")
    if isinstance(backend.extras, Mapping) or hasattr(backend.extras, "__dict__"):
        extras = _members(backend.extras)
    else:
        problems.append(f"extras must be a module or a mapping, got {type(backend.extras).__name__}")
        extras = {}
    for fname, params in REQUIRED_EXTRAS.items():
        fn = extras.get(fname)
        signature = f"{fname}({', '.join(params)})"
        if fn is None:
            problems.append(f"extras lack the required {signature}")
        elif not callable(fn):
            problems.append(f"extras.{fname} must be callable, {signature}; got {type(fn).__name__}")
        elif not _accepts(fn, len(params)):
            problems.append(f"extras.{fname} must take {len(params)} positional arguments, {signature}")
    types_ok = isinstance(backend.array_types, tuple) and backend.array_types
    if not types_ok or not all(isinstance(t, type) for t in backend.array_types):
        problems.append(f"array_types must be a non-empty tuple of types, got {backend.array_types!r}")
    for field in ("device_type", "devices", "is_scalar", "to_numpy"):
        if not callable(getattr(backend, field)):
            problems.append(f"{field} must be callable, got {getattr(backend, field)!r}")
    if not isinstance(backend.accepts, tuple) or not all(isinstance(n, str) for n in backend.accepts):
        problems.append(f"accepts must be a tuple of backend names, got {backend.accepts!r}")
    for field in ("defer_to", "map_host", "fused_kernels"):
        if getattr(backend, field) is not None and not callable(getattr(backend, field)):
            problems.append(f"{field} must be callable or None, got {getattr(backend, field)!r}")
    if backend.sparse is not None:
        lacking = [m for m in SPARSE_METHODS if not callable(getattr(backend.sparse, m, None))]
        if getattr(backend.sparse, "container", None) not in ("csr", "dense"):
            lacking.append("container ('csr' or 'dense')")
        if getattr(backend.sparse, "container", None) == "csr" and not callable(
            getattr(backend.sparse, "csr", None)
        ):
            lacking.append("csr(data, indices, indptr, shape)")
        if lacking:
            problems.append(f"sparse lacks {', '.join(lacking)}")
    dts = backend.device_types
    if not isinstance(dts, dict) or not dts or not all(isinstance(k, str) for k in dts):
        problems.append(f"device_types must be a non-empty {{device type: above}} mapping, got {dts!r}")
        dts = {}
    for dt, above in dts.items():
        if dt not in DEVICE_PRIORITY and above not in DEVICE_PRIORITY and above not in dts:
            problems.append(f"device type {dt!r} is to rank above {above!r}, which is no device type")
    if dts and not problems and callable(backend.device_type):
        # the dispatcher trusts a backend with one declared device type to report it for every array
        dt = _sample_device_type(backend)
        if dt is not None and dt not in dts:
            problems.append(
                f"device_type gave {dt!r} for one of its arrays, which is not among its device_types {dts}"
            )
    gen = backend.generator
    missing = [m for m in GENERATOR_METHODS if not callable(getattr(gen, m, None))]
    if not callable(gen) or missing:
        problems.append(f"generator must be a class with {', '.join(GENERATOR_METHODS)}; lacks {missing}")
    if not isinstance(backend.kernels, Mapping):
        problems.append(
            f"kernels must be a {{op name: {{device type: kernel}}}} mapping, got {backend.kernels!r}"
        )
    else:
        known = set(DEVICE_PRIORITY) | set(dts)
        for op_name, by_type in backend.kernels.items():
            if not isinstance(by_type, Mapping):
                problems.append(f"kernels[{op_name!r}] must map device types to kernels, got {by_type!r}")
                continue
            for dt, kernel in by_type.items():
                if dt not in known:
                    problems.append(f"kernels[{op_name!r}] names device type {dt!r}, which is not declared")
                elif not callable(kernel):
                    problems.append(f"kernels[{op_name!r}][{dt!r}] must be callable, got {kernel!r}")
    for field in ("host_arrays", "ufunc_out", "lazy"):
        if not isinstance(getattr(backend, field), bool):
            problems.append(f"{field} must be a bool, got {getattr(backend, field)!r}")
    if backend.fusion is not None:
        lacking = [m for m in ("kernels", "available") if not callable(getattr(backend.fusion, m, None))]
        lacking += [m for m in ("exact_ops", "expressions") if not hasattr(backend.fusion, m)]
        if lacking:
            problems.append(f"fusion lacks {', '.join(lacking)}")
    if backend.graph_capture is not None and not callable(getattr(backend.graph_capture, "capture", None)):
        problems.append(f"graph_capture lacks capture(record), got {backend.graph_capture!r}")
    if not isinstance(backend.version, str):
        problems.append(f"version must be a str, got {backend.version!r}")
    if problems:
        raise BackendContractError(
            f"backend {label!r} breaks the backend contract (see polyad.backends): " + "; ".join(problems)
        )
    return backend


def _sample_device_type(backend):
    """The device type a backend reports for a small array of its own (None if it cannot make one)."""
    try:
        sample = backend.compat.zeros(1)
    except Exception:  # a library that cannot create an array here: nothing to sample
        return None
    return backend.device_type(sample)


def _accepts(fn, n):
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin without a signature: nothing to check
        return True
    try:
        sig.bind(*range(n))
    except TypeError:
        return False
    return True
