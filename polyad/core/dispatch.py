"""Backends and device policy: which library an array belongs to, and which kernel runs it.

Backends (``polyad.backends``, the layer below) declare what they provide and register themselves; this
module picks the default one, finds the owner of an array, and chooses kernels. Device policy is one
ordered list (``DEVICE_PRIORITY``, extended by ``register_device_type``; both live in ``polyad.backends``
so that backends declare their device types through them, and are re-exported here) and one lookup
(``device_type``); nothing else in polyad decides devices.
"""

import os
import threading
import types
from collections.abc import Iterator
from contextlib import contextmanager

import polyad.backends as backends
from polyad.backends import DEVICE_PRIORITY, DEVICE_TYPE_PREDICATES, BackendUnavailable, first_by_priority

# re-exported: the device types and the Backend class live in the layer below
from polyad.backends import Backend as Backend
from polyad.backends import register_device_type as register_device_type


class _DispatchState(threading.local):
    def __init__(self):
        self.block = None  # the backend of the innermost ``with backend(...)`` block of this thread


_state = _DispatchState()
# The process-wide default Backend (set_backend), loaded on first use from the name in _GLOBAL_DEFAULT
# (POLYAD_BACKEND, then the last set_backend): every thread reads it outside ``with backend`` blocks.
_PROCESS_DEFAULT = [None]
_DEFAULT_LOCK = threading.Lock()
BY_TYPE = {}  # array type -> Backend; filled on load and on first sight of a subclass
# Python's own types: never an array (a subclass of one, such as np.float64, may be: ``is_scalar``)
_PLAIN = frozenset((int, float, complex, bool, type(None), slice, type(Ellipsis), str, tuple, list))
_PLAIN_BASES = tuple(_PLAIN)
_NOT_ARRAY = set()  # types seen that belong to no backend (Python scalars, None, ...)


def _on_backend(event, backend):
    """Keep the type caches in step with the backends loaded (``backends.subscribe``)."""
    if event == "loaded":
        for t in backend.array_types:
            BY_TYPE[t] = backend
        _NOT_ARRAY.clear()  # a type seen before may belong to the new backend
    else:
        for t, b in list(BY_TYPE.items()):
            if b is backend:
                del BY_TYPE[t]
        with _DEFAULT_LOCK:
            if _PROCESS_DEFAULT[0] is backend:
                _PROCESS_DEFAULT[0] = None
        if _state.block is backend:
            _state.block = None


backends.subscribe(_on_backend)


def load_backend(name):
    """The Backend named ``name``, loaded (RuntimeError with the reason and the usable choices if it
    cannot load here)."""
    try:
        return backends.load(name)
    except BackendUnavailable as exc:
        raise RuntimeError(
            f"polyad backend {name!r} is unavailable: {exc}. "
            f"Valid choices are {', '.join(backends.names())}; usable here: {', '.join(usable_backends())}"
        ) from None


def usable_backends() -> list[str]:
    """Names of the backends that load on this machine (tries each once)."""
    return backends.usable()


def unavailable_backends() -> dict[str, str]:
    """``{name: reason}`` for backends that cannot be used here."""
    backends.usable()
    return backends.unavailable()


def get_backend() -> str:
    """Return the name of the default backend of the calling thread: the backend of its innermost
    ``with backend(...)`` block, else the process-wide default (``set_backend``, ``POLYAD_BACKEND``).
    It is where arrays are created when no input says where."""
    return default_backend().name


def default_backend():
    """The default Backend of the calling thread (see ``get_backend``)."""
    b = _state.block
    if b is None:
        b = _PROCESS_DEFAULT[0]
        if b is None:
            b = load_backend(_GLOBAL_DEFAULT[0])
            with _DEFAULT_LOCK:
                if _PROCESS_DEFAULT[0] is None:
                    _PROCESS_DEFAULT[0] = b
                b = _PROCESS_DEFAULT[0]
    return b


def set_backend(name: str) -> None:
    """Make ``name`` (one of ``polyad.backends.names()``: "numpy", "cupy", "array_api_strict", or one
    registered) the process-wide default backend: every thread, running or started later, uses it,
    except inside a ``with polyad.backend(...)`` block, which chooses for its own thread only (and keeps
    doing so until it exits, even in the thread that calls ``set_backend``).

    Raises ValueError for an unknown name and RuntimeError, with the reason, for one that cannot load here.

    Example:
        >>> import polyad as pa
        >>> previous = pa.get_backend()
        >>> pa.set_backend("numpy")
        >>> pa.get_backend()
        'numpy'
        >>> pa.set_backend(previous)
    """
    if not isinstance(name, str):
        raise TypeError(
            f"set_backend(name={name!r}): name must be a str, one of {', '.join(backends.names())}"
        )
    b = load_backend(name)
    with _DEFAULT_LOCK:
        _PROCESS_DEFAULT[0] = b
        _GLOBAL_DEFAULT[0] = name


@contextmanager
def backend(name: str) -> Iterator[None]:
    """Context manager: use backend ``name`` as the default inside the block, in this thread only (other
    threads keep theirs), restoring the previous one on exit.

    Example:
        >>> import polyad as pa
        >>> with pa.backend("numpy"):
        ...     pa.get_backend()
        'numpy'
    """
    if not isinstance(name, str):
        raise TypeError(f"backend(name={name!r}): name must be a str, one of {', '.join(backends.names())}")
    previous = _state.block
    _state.block = load_backend(name)
    try:
        yield _state.block
    finally:
        _state.block = previous


def backend_of_array(x):
    """The Backend owning array ``x``, or None if ``x`` is not an array of a loaded backend."""
    t = type(x)
    b = BY_TYPE.get(t)
    if b is not None or t in _NOT_ARRAY:
        return b
    if t in _PLAIN:
        _NOT_ARRAY.add(t)
        return None
    scalar = isinstance(x, _PLAIN_BASES)  # a subclass of a Python type: a backend must claim it
    for attempt in range(2):
        for loaded in backends.loaded().values():
            if loaded.is_scalar(x) if scalar else isinstance(x, loaded.array_types):
                BY_TYPE[t] = loaded
                return loaded
        if attempt == 0 and (scalar or _array_like(x)):
            usable_backends()  # an array of a backend not loaded yet: load every backend that can load
    _NOT_ARRAY.add(t)
    return None


def _array_like(x):
    """Whether ``x`` may be an array of a backend not loaded yet: the standard's arrays have a ``shape``
    and a ``dtype``; a module or a class with both (NumPy's) is none. Anything else (a module, a function,
    a ``threading.local`` that ``pa.jit`` meets among a function's globals) would load every installed
    backend for nothing: CuPy, Dask and array_api_strict cost 36 MiB of a NumPy process's memory."""
    return hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, types.ModuleType | type)


def persisted(values):
    """``values`` (a sequence) with the arrays of lazy backends computed and their values kept (the
    backend's ``persist``: Dask's), the rest as they are: a Python loop that reads a value at every step
    calls this on its state, so that a step's graph starts from the last step's values, not the loop's
    start (without it, step ``n`` of a while loop on Dask arrays computed all ``n`` steps again)."""
    lazy = {}  # persist -> the positions of its arrays
    for i, v in enumerate(values):
        b = backend_of_array(v)
        if b is None:
            continue
        if b.name not in _PERSIST:
            _PERSIST[b.name] = getattr(b.xp, "persist", None)
        if _PERSIST[b.name] is not None:
            lazy.setdefault(_PERSIST[b.name], []).append(i)
    if not lazy:
        return values
    out = list(values)
    for persist, where in lazy.items():
        for i, v in zip(where, persist(*[out[i] for i in where])):
            out[i] = v
    return out


_PERSIST = {}  # backend name -> its namespace's persist, or None (an eager library)


def namespace_of(x):
    """The Array API namespace of ``x``: a tensor's own (``polyad.xp``), else its backend's (CuPy's arrays
    have no ``__array_namespace__`` method)."""
    if hasattr(x, "__array_namespace__"):
        return x.__array_namespace__()
    return backend_of_array(x).xp


def device_key(device):
    """``device`` as a hashable value, for caches keyed on it (CuPy's ``Device`` cannot be hashed)."""
    try:
        hash(device)
    except TypeError:
        return (type(device).__name__, getattr(device, "id", repr(device)))
    return device


def backend_of(args):
    """The one Backend of the arrays among ``args`` (default backend if none); error if they mix libraries."""
    found = None
    first = None
    for a in args:
        t = type(a)
        b = BY_TYPE.get(t)
        if b is None:
            if t in _NOT_ARRAY:
                continue
            b = backend_of_array(a)
            if b is None:
                continue
        if found is None:
            found, first = b, a
        elif b is not found:
            if b.name in found.accepts:  # a NumPy array among Dask arrays: Dask takes it as it is
                continue
            if found.name in b.accepts:
                found, first = b, a
                continue
            raise TypeError(
                f"arrays of two libraries in one call: {found.name} ({type(first).__name__}) and "
                f"{b.name} ({type(a).__name__}); move them to one backend first"
            )
    return found if found is not None else default_backend()


def device_type(array, backend=None):
    """The device type of a backend array: the first registered predicate that recognises it
    (``register_device_type(name, predicate)``), else what its backend's ``device_type`` says.

    A device type outside ``DEVICE_PRIORITY`` is an error, never a silent fall to the generic kernel.

    Example:
        >>> import numpy as np
        >>> from polyad.core import dispatch
        >>> dispatch.device_type(np.ones(2))
        'cpu'
    """
    for name, predicate in DEVICE_TYPE_PREDICATES:
        if predicate(array):
            return name
    if backend is None:
        backend = backend_of_array(array)
        if backend is None:
            raise TypeError(f"device_type: {type(array).__name__} is not an array of a polyad backend")
    dt = backend.device_type(array)
    if dt not in DEVICE_PRIORITY:
        raise ValueError(
            f"backend {backend.name!r} gave device type {dt!r} for a {type(array).__name__}, which is not a "
            f"registered device type (the device types are {DEVICE_PRIORITY}); declare it in the backend's "
            "device_types or add it with polyad.register_device_type"
        )
    return dt


def check_device_type(name, where):
    """Raise unless ``name`` is a device type of ``DEVICE_PRIORITY`` (``where`` names the caller).

    Backends that declare their device types only when they load are loaded first (once) if ``name`` is
    not known yet.
    """
    if not isinstance(name, str):
        raise TypeError(f"{where}: a device type must be a str, got {name!r}")
    if name not in DEVICE_PRIORITY:
        usable_backends()  # a backend not loaded yet may declare it
    if name not in DEVICE_PRIORITY:
        raise ValueError(
            f"{where}: unknown device type {name!r}; the device types are {DEVICE_PRIORITY} "
            "(add one with polyad.register_device_type)"
        )


def choose_kernel(op, backend, arrays):
    """The kernel for one call: the op's kernel for the highest-priority device type present, else its
    generic kernel, else an error naming the op, the device types seen and the kernels registered."""
    if not DEVICE_TYPE_PREDICATES and len(backend.device_types) == 1:
        # the common case: a backend with one device type and no stand-in predicates: no per-array lookup
        (dt,) = backend.device_types
        kernel = op.kernels.get(dt)
        if kernel is not None:
            return kernel
        if op.generic is not None:
            return op.generic
        seen = {dt}
    else:
        seen = {device_type(a, backend_of_array(a)) for a in arrays if backend_of_array(a) is not None}
        dt = first_by_priority(seen)
        kernel = op.kernels.get(dt) if dt is not None else None
        if kernel is not None:
            return kernel
        if op.generic is not None:
            return op.generic
    raise NotImplementedError(
        f"op {op.name!r} has no kernel for device types {sorted(seen)} "
        f"(kernels registered: {sorted(op.kernels) or 'none'}, no generic kernel)"
    )


def _initial_default():
    name = os.environ.get("POLYAD_BACKEND", "numpy").strip() or "numpy"
    return name


_GLOBAL_DEFAULT = [_initial_default()]


def find_backend(owns):
    """The backend for which ``owns(backend)`` is true, the default backend first, loading the others if
    none of the loaded ones does; None if no backend owns it. (Used for devices and dtypes.)"""
    default = default_backend()
    for attempt in range(2):
        for b in [default, *(b for b in backends.loaded().values() if b is not default)]:
            if owns(b):
                return b
        if attempt == 0:
            usable_backends()  # it may belong to a library not loaded yet
    return None


def owns_device(backend, device):
    try:
        return any(device == d for d in backend.devices())
    except Exception:  # a device object of another library may refuse comparison
        return False


def owner_of_device(device):
    """The backend that has ``device``, or None."""
    return find_backend(lambda b: owns_device(b, device))


def same_device(a, b):
    """Whether devices ``a`` and ``b`` are the same (False where one library's device refuses comparison
    with another's)."""
    if a is b:
        return True
    try:
        return bool(a == b)
    except Exception:
        return False


def placement(backend, device):
    """``device`` where arrays of ``backend`` must be put there explicitly: None for no device or the
    backend's default one (creations land there by themselves), else ``device``. Code that makes arrays
    without an input to follow (a compiled graph's ``*_like`` and constants) asks this once."""
    if device is None:
        return None
    key = (backend.name, device_key(device))
    default = _DEFAULT_DEVICE.get(key)
    if default is None:
        try:
            info = backend.compat.__array_namespace_info__()
            default = same_device(info.default_device(), device)
        except Exception:  # a namespace without the inspection API: be explicit
            default = False
        _DEFAULT_DEVICE[key] = default
    return None if default else device


_DEFAULT_DEVICE = {}  # (backend name, device key) -> whether it is the backend's default device


def backend_of_device(device):
    """The Backend that owns ``device`` (the default backend when ``device`` is None or unknown)."""
    if device is None:
        return default_backend()
    return owner_of_device(device) or default_backend()
