"""Concrete array libraries. Each folder has the same files and exposes ``load() -> Backend``.

Nothing outside this package imports numpy, cupy or array_api_strict by name.
"""

import importlib

NAMES = ("numpy", "cupy", "array_api_strict")


class BackendUnavailable(RuntimeError):
    """Raised by a backend's ``load()`` when its library cannot be used on this machine."""


def load(name):
    """Import ``polyad.backends.<name>`` and return its Backend (raises BackendUnavailable)."""
    if name not in NAMES:
        raise BackendUnavailable(f"unknown backend {name!r}")
    try:
        module = importlib.import_module(f"{__name__}.{name}")
    except ImportError as exc:  # its library is not installed (array_api_strict imports it at top level)
        raise BackendUnavailable(f"{name} is not installed ({exc})") from exc
    return module.load()
