"""Backends and device policy: which library an array belongs to, and which kernel runs it.

Device policy is one ordered constant (``DEVICE_PRIORITY``) and one lookup (``device_type``);
nothing else in polyad decides devices.
"""

import os
import threading
import types
from contextlib import contextmanager

# Highest priority first. Extend with ``register_device_type``.
DEVICE_PRIORITY = ["cuda", "cpu"]

# Stand-in device types registered at run time: list of (device_type, predicate(array) -> bool).
_DEVICE_TYPE_OVERRIDES = []


class Backend:
    """One concrete array library: its Array API namespace and how to recognise its arrays.

    ``xp`` is the library's array-api-compat namespace plus the backend's ``extras`` (kernels the standard
    lacks, such as ``scatter_add``); generic kernels receive it as their first argument.
    """

    def __init__(self, name, compat, extras, array_types, device_type, devices, version, native):
        self.name = name
        self.compat = compat
        self.array_types = array_types
        self._device_type = device_type
        self.devices = devices
        self.version = version
        self.native = native
        xp = types.ModuleType(f"polyad.backends.{name}.xp")
        xp.__dict__.update({k: v for k, v in vars(compat).items() if not k.startswith("__")})
        xp.__dict__.update({k: v for k, v in vars(extras).items() if not k.startswith("_")})
        xp.__array_api_version__ = getattr(compat, "__array_api_version__", "2024.12")
        xp.__array_namespace_info__ = compat.__array_namespace_info__
        for ext in ("linalg", "fft"):  # array_api_strict serves its extensions from a module __getattr__
            if ext not in xp.__dict__ and hasattr(compat, ext):
                setattr(xp, ext, getattr(compat, ext))
        self.xp = xp

    def __repr__(self):
        return f"Backend({self.name!r})"


class _DispatchState(threading.local):
    def __init__(self):
        self.default = None  # set below from POLYAD_BACKEND


_state = _DispatchState()
_LOADED = {}  # name -> Backend
_BY_TYPE = {}  # array type -> Backend; filled on load and on first sight of a subclass
_UNAVAILABLE = {}  # name -> reason
_PLAIN = (int, float, complex, bool, type(None), slice, type(Ellipsis), str, tuple, list)
_NOT_ARRAY = set()  # types seen that belong to no backend (Python scalars, None, ...)


def _load(name):
    from polyad import backends

    if name in _LOADED:
        return _LOADED[name]
    if name not in backends.NAMES:
        raise ValueError(f"unknown polyad backend {name!r}; valid choices are {', '.join(backends.NAMES)}")
    try:
        backend = backends.load(name)
    except backends.BackendUnavailable as exc:
        _UNAVAILABLE[name] = str(exc)
        raise RuntimeError(
            f"polyad backend {name!r} is unavailable: {exc}. "
            f"Valid choices are {', '.join(backends.NAMES)}; usable here: {', '.join(usable_backends())}"
        ) from None
    _LOADED[name] = backend
    for t in backend.array_types:
        _BY_TYPE[t] = backend
    return backend


def usable_backends():
    """Names of the backends that load on this machine (tries each once)."""
    from polyad import backends

    names = []
    for name in backends.NAMES:
        if name in _LOADED:
            names.append(name)
        elif name not in _UNAVAILABLE:
            try:
                _LOADED[name] = backends.load(name)
                for t in _LOADED[name].array_types:
                    _BY_TYPE[t] = _LOADED[name]
                names.append(name)
            except backends.BackendUnavailable as exc:
                _UNAVAILABLE[name] = str(exc)
    return names


def unavailable_backends():
    """``{name: reason}`` for backends that cannot be used here."""
    usable_backends()
    return dict(_UNAVAILABLE)


def get_backend():
    """Return the name of the default backend (used where no input array says where to create)."""
    return default_backend().name


def default_backend():
    b = _state.default
    if b is None:
        b = _state.default = _load(_GLOBAL_DEFAULT[0])
    return b


def set_backend(name):
    """Make ``name`` ("numpy", "cupy" or "array_api_strict") the default backend of this thread.

    Raises ValueError for an unknown name and RuntimeError, with the reason, for one that cannot load here.
    """
    _state.default = _load(name)
    _GLOBAL_DEFAULT[0] = name


@contextmanager
def backend(name):
    """Context manager: use backend ``name`` as the default inside the block, restoring it on exit.

    Example:
        >>> import polyad as pa
        >>> with pa.backend("numpy"):
        ...     pa.get_backend()
        'numpy'
    """
    previous = default_backend()
    _state.default = _load(name)
    try:
        yield _state.default
    finally:
        _state.default = previous


def backend_of_array(x):
    """The Backend owning array ``x``, or None if ``x`` is not an array of a loaded backend."""
    t = type(x)
    b = _BY_TYPE.get(t)
    if b is not None or t in _NOT_ARRAY:
        return b
    if isinstance(x, _PLAIN) and not _is_backend_scalar(x):
        _NOT_ARRAY.add(t)
        return None
    for attempt in range(2):
        for loaded in list(_LOADED.values()):
            if isinstance(x, loaded.array_types):  # a subclass, or a NumPy scalar such as np.float64
                _BY_TYPE[t] = loaded
                return loaded
        if attempt == 0:
            usable_backends()  # an array of a backend not loaded yet: load every backend that can load
    _NOT_ARRAY.add(t)
    return None


def _is_backend_scalar(x):
    # NumPy's float64 and complex128 subclass Python's float and complex
    return type(x).__module__ == "numpy"


def backend_of(args):
    """The one Backend of the arrays among ``args`` (default backend if none); error if they mix libraries."""
    found = None
    first = None
    for a in args:
        t = type(a)
        b = _BY_TYPE.get(t)
        if b is None:
            if t in _NOT_ARRAY:
                continue
            b = backend_of_array(a)
            if b is None:
                continue
        if found is None:
            found, first = b, a
        elif b is not found:
            raise TypeError(
                f"arrays of two libraries in one call: {found.name} ({type(first).__name__}) and "
                f"{b.name} ({type(a).__name__}); move them to one backend first"
            )
    return found if found is not None else default_backend()


def device_type(array, backend=None):
    """The device type ("cpu", "cuda", or a registered stand-in) of a backend array."""
    for name, predicate in _DEVICE_TYPE_OVERRIDES:
        if predicate(array):
            return name
    if backend is None:
        backend = backend_of_array(array)
    return backend._device_type(array)


def register_device_type(name, predicate, *, above="cpu"):
    """Map arrays for which ``predicate(array)`` is true to device type ``name``.

    A new ``name`` is inserted in ``DEVICE_PRIORITY`` just above ``above``; a known one keeps its place.
    Returns a function that undoes the registration. Tests use it to stand in for a GPU without one.

    Example:
        >>> from polyad import dispatch
        >>> undo = dispatch.register_device_type("fake_gpu", lambda a: False)
        >>> dispatch.DEVICE_PRIORITY
        ['cuda', 'fake_gpu', 'cpu']
        >>> undo()
    """
    added = name not in DEVICE_PRIORITY
    if added:
        if above not in DEVICE_PRIORITY:
            raise ValueError(f"above={above!r} is not a known device type; known: {DEVICE_PRIORITY}")
        DEVICE_PRIORITY.insert(DEVICE_PRIORITY.index(above), name)
    entry = (name, predicate)
    _DEVICE_TYPE_OVERRIDES.append(entry)

    def unregister():
        if added:
            DEVICE_PRIORITY.remove(name)
        _DEVICE_TYPE_OVERRIDES.remove(entry)

    return unregister


def check_device_type(name, where):
    """Raise unless ``name`` is a device type of ``DEVICE_PRIORITY`` (``where`` names the caller)."""
    if not isinstance(name, str):
        raise TypeError(f"{where}: a device type must be a str, got {name!r}")
    if name not in DEVICE_PRIORITY:
        raise ValueError(
            f"{where}: unknown device type {name!r}; the device types are {DEVICE_PRIORITY} "
            "(add one with polyad.dispatch.register_device_type)"
        )


def choose_kernel(op, backend, arrays):
    """The kernel for one call: the op's kernel for the highest-priority device type present, else its
    generic kernel, else an error naming the op, the device types seen and the kernels registered."""
    seen = {device_type(a, backend_of_array(a)) for a in arrays if backend_of_array(a) is not None}
    for dt in DEVICE_PRIORITY:
        if dt in seen:
            kernel = op.kernels.get(dt)
            if kernel is not None:
                return kernel
            break
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
        for b in [default, *(b for b in list(_LOADED.values()) if b is not default)]:
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


def backend_of_device(device):
    """The Backend that owns ``device`` (the default backend when ``device`` is None or unknown)."""
    if device is None:
        return default_backend()
    return owner_of_device(device) or default_backend()
