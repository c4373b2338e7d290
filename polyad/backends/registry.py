"""The registry of backends: registration (``register``, entry points of group ``polyad.backends``), lookup
by name (``load``) and loading.

``register(name, loader)`` makes a backend known; ``loader()`` runs on first use and returns the ``Backend``
(or raises ``BackendUnavailable`` with the reason it cannot run here). The four built-in backends are
registered below. Third-party packages declare an entry point in the group ``polyad.backends``
(``[project.entry-points."polyad.backends"] mylib = "mylib.polyad_backend:load"``), discovered when a name
is listed or looked up, and imported only when that backend loads. Finding the backend of an array is the
dispatcher's (``polyad.dispatch.backend_of_array``), from the loaded backends' ``array_types``.

Example:
    >>> from polyad.backends import registry
    >>> registry.load("numpy").name
    'numpy'
"""

import importlib
import importlib.metadata
import threading
import types

from .contract import BackendContractError, BackendUnavailable, check
from .devices import register_device_type

ENTRY_POINT_GROUP = "polyad.backends"
_LOCK = threading.RLock()  # guards the registry


def _register_device_types(declared, where):
    """Register each ``{device type: above}`` in order; the undo functions (all undone on an error)."""
    undos = []
    try:
        for dt, above in dict(declared).items():
            undos.append(register_device_type(dt, above=above if above is not None else "cpu"))
    except (TypeError, ValueError) as exc:
        for undo in reversed(undos):
            undo()
        raise BackendContractError(f"{where}: device_types: {exc}") from None
    return undos


# --------------------------------------------------------------------------------------------- registry

_REGISTRY = {}  # name -> _Entry, in registration order
_LOADED = {}  # name -> Backend
_UNAVAILABLE = {}  # name -> reason
_LISTENERS = []
_DISCOVERED = [False]


class _Entry:
    __slots__ = ("loader", "undos", "source")

    def __init__(self, loader, undos, source):
        self.loader = loader
        self.undos = undos  # device-type registrations to undo with the backend
        self.source = source


def register(name, loader, *, device_types=None):
    """Make backend ``name`` known; ``loader()`` runs on its first use and returns its ``Backend``.

    Args:
        name: the backend's name (``POLYAD_BACKEND``, ``set_backend``), a str not yet registered.
        loader: a function of no arguments returning a ``Backend``; it raises ``BackendUnavailable`` with
            the reason when the library cannot run here (not installed, no device).
        device_types: ``{device type: above}`` to declare now, before the backend loads, so that kernels
            for them can be registered on machines without the library (the built-in cupy backend
            declares ``{"cuda": "cpu"}``); the backend's own ``device_types`` are registered when it loads.

    Returns:
        A function of no arguments that unregisters the backend (as ``unregister(name)``).

    Example:
        >>> from polyad import backends
        >>> def load():  # a library that cannot run on this machine
        ...     raise backends.BackendUnavailable("mylib needs its accelerator")
        >>> undo = backends.register("mylib", load)
        >>> backends.names()
        ('numpy', 'cupy', 'array_api_strict', 'dask', 'mylib')
        >>> backends.load("mylib")
        Traceback (most recent call last):
        ...
        polyad.backends.BackendUnavailable: mylib needs its accelerator
        >>> undo()
        >>> "mylib" in backends.names()
        False
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"register: name must be a non-empty str, got {name!r}")
    if not callable(loader):
        raise TypeError(f"register({name!r}): loader must be a function returning a Backend, got {loader!r}")
    with _LOCK:
        if name in _REGISTRY:
            raise ValueError(
                f"register: a backend named {name!r} is already registered ({_REGISTRY[name].source})"
            )
        undos = _register_device_types(device_types or {}, f"register({name!r})")
        _REGISTRY[name] = _Entry(loader, undos, "registered")
    return lambda: unregister(name)


def unregister(name):
    """Forget backend ``name``: its loader, its loaded ``Backend`` (listeners see it removed) and the
    device types it declared.

    Args:
        name: a registered backend's name.

    Returns:
        None.

    Example:
        >>> from polyad import backends
        >>> backends.unregister("no_such_backend")
        Traceback (most recent call last):
        ...
        ValueError: unregister: no backend named 'no_such_backend' is registered
    """
    with _LOCK:
        entry = _REGISTRY.pop(name, None)
        if entry is None:
            raise ValueError(f"unregister: no backend named {name!r} is registered")
        _UNAVAILABLE.pop(name, None)
        backend = _LOADED.pop(name, None)
        if backend is not None:
            for listener in list(_LISTENERS):
                listener("removed", backend)
        for undo in reversed(entry.undos):
            undo()


def names():
    """The registered backends' names, built-in ones first, then those found through entry points (the
    entry points are scanned the first time).

    Returns:
        A tuple of names.

    Example:
        >>> from polyad import backends
        >>> backends.names()[:3]
        ('numpy', 'cupy', 'array_api_strict')
    """
    if not _DISCOVERED[0]:
        discover()
    return tuple(_REGISTRY)


def discover():
    """Register the backends that installed packages declare as entry points of group
    ``polyad.backends``; a name already registered keeps its loader. The package behind an entry point is
    imported only when its backend loads. Runs by itself the first time names are listed, and again when
    an unknown name is looked up; call it after installing a package at run time.

    Returns:
        The names of the entry points found (registered now or before).

    Example:
        >>> from polyad import backends
        >>> isinstance(backends.discover(), tuple)
        True
    """
    with _LOCK:
        _DISCOVERED[0] = True
        try:
            found = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
        except Exception:  # broken package metadata must not stop polyad
            return ()
        for ep in found:
            if ep.name not in _REGISTRY:
                _REGISTRY[ep.name] = _Entry(_entry_point_loader(ep), [], f"entry point {ep.value}")
        return tuple(ep.name for ep in found)


def _entry_point_loader(ep):
    def loader():
        try:
            target = ep.load()
        except ImportError as exc:
            raise BackendUnavailable(f"its entry point {ep.value} does not import ({exc})") from exc
        if isinstance(target, types.ModuleType):
            target = getattr(target, "load", None)
        if not callable(target):
            raise BackendContractError(
                f"backend {ep.name!r}: entry point {ep.value} must name a loader function (or a module with "
                f"load()), got {target!r}"
            )
        return target()

    return loader


def load(name):
    """The ``Backend`` named ``name``, loaded and checked on first use, then cached.

    Args:
        name: a registered backend's name (entry points are looked up when the name is not registered).

    Returns:
        The ``Backend``.

    Raises:
        ValueError: for an unknown name (the message lists the valid choices).
        BackendUnavailable: with the reason, when it cannot be used here (``BackendContractError`` when it
            breaks the contract).

    Example:
        >>> from polyad import backends
        >>> backends.load("numpy").device_types
        {'cpu': None}
    """
    backend = _LOADED.get(name)
    if backend is not None:
        return backend
    with _LOCK:
        backend = _LOADED.get(name)
        if backend is not None:
            return backend
        if name not in _REGISTRY:
            discover()
        entry = _REGISTRY.get(name)
        if entry is None:
            raise ValueError(f"unknown polyad backend {name!r}; valid choices are {', '.join(_REGISTRY)}")
        try:
            try:
                backend = entry.loader()
            except ImportError as exc:  # its library is not installed
                raise BackendUnavailable(f"{name} is not installed ({exc})") from exc
            check(backend, name)
            for other in _LOADED.values():
                for t in backend.array_types:
                    if t in other.array_types:
                        raise BackendContractError(
                            f"backend {name!r}: array type {t.__name__} already belongs to backend "
                            f"{other.name!r}"
                        )
            undos = _register_device_types(backend.device_types, f"backend {name!r}")
        except BackendUnavailable as exc:
            _UNAVAILABLE[name] = str(exc)
            raise
        entry.undos.extend(undos)
        _UNAVAILABLE.pop(name, None)
        _LOADED[name] = backend
        for listener in list(_LISTENERS):
            listener("loaded", backend)
        return backend


def loaded():
    """The backends loaded so far.

    Returns:
        ``{name: Backend}`` (a copy), in the order they loaded.

    Example:
        >>> from polyad import backends
        >>> backends.loaded()["numpy"]
        Backend('numpy')
    """
    return dict(_LOADED)


def usable():
    """The names of the backends that load here, trying each not yet tried once.

    Returns:
        A list of names, in registration order.

    Example:
        >>> from polyad import backends
        >>> "numpy" in backends.usable()
        True
    """
    out = []
    for name in names():
        if name in _LOADED:
            out.append(name)
        elif name not in _UNAVAILABLE:
            try:
                load(name)
                out.append(name)
            except BackendUnavailable:
                pass
    return out


def unavailable():
    """The backends that failed to load here, with the reason (a backend is tried when first used, or by
    ``usable``).

    Returns:
        ``{name: reason}`` (a copy).

    Example:
        >>> from polyad import backends
        >>> "numpy" in backends.unavailable()
        False
    """
    return dict(_UNAVAILABLE)


def subscribe(listener):
    """Call ``listener(event, backend)`` with event "loaded" for every backend loaded (those already
    loaded at once) and "removed" when one is unregistered. The dispatcher and the core subscribe: this is
    how they learn of a backend without the backend importing them.

    Args:
        listener: ``listener(event, backend)``.

    Returns:
        A function of no arguments that unsubscribes ``listener``.

    Example:
        >>> from polyad import backends
        >>> seen = []
        >>> stop = backends.subscribe(lambda event, b: seen.append((event, b.name)))
        >>> ("loaded", "numpy") in seen
        True
        >>> stop()
    """
    with _LOCK:
        _LISTENERS.append(listener)
        for backend in list(_LOADED.values()):
            listener("loaded", backend)
    return lambda: _LISTENERS.remove(listener)


def _builtin(name):
    def loader():
        module = importlib.import_module(f"polyad.backends.{name}")
        return module.load()

    return loader


register("numpy", _builtin("numpy"))
# "cuda" is declared before CuPy loads: kernels for it can be registered on a machine without CuPy
register("cupy", _builtin("cupy"), device_types={"cuda": "cpu"})
register("array_api_strict", _builtin("array_api_strict"))
register("dask", _builtin("dask"))
