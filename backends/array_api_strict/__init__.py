"""The strict reference backend: array_api_strict rejects anything outside the standard."""

import array_api_strict

from polyad.dispatch import Backend

from . import extras

# polyad implements the 2024.12 revision of the standard; pin the reference to it.
array_api_strict.set_array_api_strict_flags(api_version="2024.12")

# The stand-in devices array_api_strict offers; tests map them to device types to exercise the priority.
_CPU = array_api_strict.Device("CPU_DEVICE")


_BINARY = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor",
           "lshift", "rshift")  # fmt: skip
_COMPARE = ("eq", "ne", "lt", "le", "gt", "ge")


def _defer_to_polyad_tensors():
    """Make Array's operators return NotImplemented for a polyad tensor, so Python calls the tensor's
    reflected operator (``W @ x`` with a raw array ``W``), as NumPy does through ``__array_ufunc__ = None``.
    array_api_strict otherwise raises TypeError for any operand that is not its own Array."""
    from polyad.core import Tensor

    Array = array_api_strict._array_object.Array
    if getattr(Array, "_polyad_defers", False):
        return
    names = [f"__{n}__" for n in _BINARY] + [f"__r{n}__" for n in _BINARY] + [f"__{n}__" for n in _COMPARE]
    for name in names:
        method = getattr(Array, name, None)
        if method is None:
            continue

        def deferring(self, other, _method=method):
            if isinstance(other, Tensor):
                return NotImplemented
            return _method(self, other)

        setattr(Array, name, deferring)
    Array._polyad_defers = True


def load():
    _defer_to_polyad_tensors()
    backend = Backend(
        name="array_api_strict",
        compat=array_api_strict,
        extras=extras,
        array_types=(array_api_strict._array_object.Array,),
        device_type=lambda array: "cpu",
        devices=lambda: list(array_api_strict.__array_namespace_info__().devices()),
        version=array_api_strict.__version__,
        native=array_api_strict,
    )
    from . import kernels

    kernels.register()
    return backend
