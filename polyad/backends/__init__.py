"""Concrete array libraries, and the contract each one keeps.

This is polyad's bottom layer: it imports no polyad module above it, and nothing outside it imports
numpy, cupy, cupyx, numba, array_api_strict or dask by name, nor tests a backend's name: what differs
between libraries is a field of the contract. The dispatcher (``polyad.dispatch``) and the core
(``polyad.core``) read what a backend hands over; a backend never reaches up into them.

Three modules, re-exported here:

- ``contract.py``: the ``Backend`` contract, the fields each backend declares (its docstring lists them),
  and ``check``, which verifies them when a backend loads;
- ``devices.py``: the device types, ``DEVICE_PRIORITY`` (highest priority first) and
  ``register_device_type``;
- ``registry.py``: ``register``, entry points, ``load`` and the listeners of loaded backends.

``host.py`` is NumPy on the host, for polyad's own index bookkeeping; ``array_csr.py`` the CSR matrices of
libraries without sparse ones. ``fusion_compiler`` is the worker thread that compiles fused CPU loops
(``numpy/compiler/fusion_compile.py``), which ``pa.jit`` also hands the rest of a first call's pipeline.

**Each backend folder** has the same files: ``__init__.py`` (``load() -> Backend``), ``extras.py``
(``scatter_add``, ``index_add`` and direct library calls for hot functions), ``kernels.py``
(``KERNELS``: the ``kernels`` field) and ``random.py`` (``Generator``: the ``generator`` field). A backend
that generates fused kernels keeps that code in its folder too (``cupy/fusion.py``, ``numpy/compiler/``)
and hands it over as its ``fusion`` field.

Example:
    >>> from polyad import backends
    >>> backends.load("numpy").host_arrays, backends.DEVICE_PRIORITY[-1]
    (True, 'cpu')
"""

from .contract import (
    CONTRACT_EXTRAS,
    GENERATOR_METHODS,
    REQUIRED_EXTRAS,
    SPARSE_METHODS,
    Backend,
    BackendContractError,
    BackendUnavailable,
    check,
)
from .devices import DEVICE_PRIORITY as DEVICE_PRIORITY
from .devices import DEVICE_TYPE_PREDICATES as DEVICE_TYPE_PREDICATES
from .devices import first_by_priority as first_by_priority
from .devices import register_device_type as register_device_type
from .host import host_copies as host_copies  # the device-to-host copy counter, read by tests

# the worker thread fused CPU loops compile on, off the calling thread; pa.jit hands it the rest of a first
# call's pipeline (optimise, fuse) whatever the backend, so it is the package's, not one backend's field
from .numpy.compiler import fusion_compile as fusion_compiler
from .registry import ENTRY_POINT_GROUP as ENTRY_POINT_GROUP
from .registry import discover as discover
from .registry import load as load
from .registry import loaded as loaded
from .registry import names as names
from .registry import register as register
from .registry import subscribe as subscribe
from .registry import unavailable as unavailable
from .registry import unregister as unregister
from .registry import usable as usable

__all__ = [
    "CONTRACT_EXTRAS", "DEVICE_PRIORITY", "DEVICE_TYPE_PREDICATES", "ENTRY_POINT_GROUP", "GENERATOR_METHODS",
    "REQUIRED_EXTRAS", "SPARSE_METHODS", "Backend", "BackendContractError", "BackendUnavailable", "check",
    "discover", "first_by_priority", "fusion_compiler", "host_copies", "load", "loaded", "names", "register",
    "register_device_type", "subscribe", "unavailable", "unregister", "usable",
]  # fmt: skip
