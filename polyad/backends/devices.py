"""Device types: ``DEVICE_PRIORITY``, the one ordered list of them (highest priority first), and the one
lookup in that order (``first_by_priority``).

The dispatcher runs an op's kernel for the highest-priority device type among its arguments.
``register_device_type`` adds a type (a backend's declared ``device_types``, or a stand-in that a predicate
recognises); "cpu" is always there, lowest.

Example:
    >>> from polyad.backends import devices
    >>> devices.first_by_priority({"cpu"})
    'cpu'
"""

import threading
from collections.abc import Callable
from typing import Any

_LOCK = threading.RLock()  # guards the device types

# Highest priority first; "cpu" is always there, lowest. Extended by register_device_type.
DEVICE_PRIORITY = ["cpu"]
# Stand-in device types recognised by a predicate, checked before the backend's own device_type:
# a list of (device type, predicate(array) -> bool).
DEVICE_TYPE_PREDICATES = []
_DEVICE_TYPE_USERS = {"cpu": 1}  # device type -> registrations holding it (it leaves at zero)


def register_device_type(
    name: str, predicate: Callable[[Any], bool] | None = None, *, above: str | None = "cpu"
) -> Callable[[], None]:
    """Add device type ``name`` to ``DEVICE_PRIORITY``, just above ``above``; kernels can then be
    registered for it (``custom_op.register_kernel``, ``library.impl``, ``library.override``).

    A name already known keeps its place. Backends declare their device types through this function (their
    ``device_types``), and so can users: a ``rocm`` or ``xpu`` type for arrays a predicate recognises.

    Args:
        name: the device type, a str ("rocm", "xpu").
        predicate: ``predicate(array) -> bool``, or None. Arrays for which it is true have device type
            ``name``, whatever their backend says (checked before the backend's ``device_type``). None:
            only declare the type (a backend's ``device_type`` returns it).
        above: the known device type ``name`` ranks directly above ("cpu" by default; the first entry of
            ``DEVICE_PRIORITY`` to make it the highest).

    Returns:
        A function of no arguments that undoes this registration (the type leaves the priority when no
        registration holds it any longer; "cpu" never leaves).

    Example:
        >>> import numpy as np, polyad as pa
        >>> undo = pa.register_device_type("xpu", lambda a: a.dtype == np.float32, above="cpu")
        >>> pa.DEVICE_PRIORITY
        ['cuda', 'xpu', 'cpu']
        >>> undo()
        >>> pa.DEVICE_PRIORITY
        ['cuda', 'cpu']
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"register_device_type: name must be a non-empty str, got {name!r}")
    if predicate is not None and not callable(predicate):
        raise TypeError(
            f"register_device_type({name!r}): predicate must be callable or None, got {predicate!r}"
        )
    with _LOCK:
        if name not in DEVICE_PRIORITY:
            if above not in DEVICE_PRIORITY:
                raise ValueError(
                    f"register_device_type({name!r}): above={above!r} is not a known device type; "
                    f"known: {DEVICE_PRIORITY}"
                )
            DEVICE_PRIORITY.insert(DEVICE_PRIORITY.index(above), name)
        _DEVICE_TYPE_USERS[name] = _DEVICE_TYPE_USERS.get(name, 0) + 1
        entry = (name, predicate)
        if predicate is not None:
            DEVICE_TYPE_PREDICATES.append(entry)
    done = []

    def unregister():
        with _LOCK:
            if done:
                return
            done.append(True)
            if predicate is not None:
                DEVICE_TYPE_PREDICATES.remove(entry)
            _DEVICE_TYPE_USERS[name] -= 1
            if _DEVICE_TYPE_USERS[name] == 0:
                del _DEVICE_TYPE_USERS[name]
                DEVICE_PRIORITY.remove(name)

    return unregister


def first_by_priority(device_types):
    """The device type of ``device_types`` that ranks highest in ``DEVICE_PRIORITY`` (None if none is
    registered): the one place the priority order is read.

    Args:
        device_types: a collection of device type names.

    Returns:
        A name from ``device_types``, or None.

    Example:
        >>> from polyad.backends import devices
        >>> devices.first_by_priority(["cpu", "no such type"])
        'cpu'
    """
    for dt in DEVICE_PRIORITY:
        if dt in device_types:
            return dt
    return None
