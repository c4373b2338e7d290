"""The strict reference backend: array_api_strict rejects anything outside the standard."""

import array_api_strict
import numpy as np

from ..contract import Backend
from . import extras, kernels, random

# polyad implements the 2025.12 revision of the standard; pin the reference to it.
array_api_strict.set_array_api_strict_flags(api_version="2025.12")

_Array = array_api_strict._array_object.Array
_BINARY = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor",
           "lshift", "rshift")  # fmt: skip
_COMPARE = ("eq", "ne", "lt", "le", "gt", "ge")


def _defer_to(tensor_type):
    """Make Array's operators return NotImplemented for a ``tensor_type`` operand, so Python calls the
    tensor's reflected operator (``W @ x`` with a raw array ``W``; NumPy reaches polyad through the
    tensor's ``__array_ufunc__``). array_api_strict otherwise raises TypeError for any operand that is not
    its own Array. Called by polyad's core with its Tensor type."""
    if getattr(_Array, "_polyad_defers_to", None) is tensor_type:
        return
    names = [f"__{n}__" for n in _BINARY] + [f"__r{n}__" for n in _BINARY] + [f"__{n}__" for n in _COMPARE]
    for name in names:
        method = getattr(_Array, name, None)
        if method is None:
            continue
        method = getattr(method, "_polyad_wrapped", method)  # patch the original once, whatever the type

        def deferring(self, other, _method=method):
            if isinstance(other, tensor_type):
                return NotImplemented
            return _method(self, other)

        deferring._polyad_wrapped = method
        setattr(_Array, name, deferring)
    _Array._polyad_defers_to = tensor_type


def _to_numpy(array):
    # NumPy reads arrays on the CPU device only; the stand-in devices move there first
    return np.asarray(array.to_device(array_api_strict.__array_namespace_info__().default_device()))


def load():
    return Backend(
        name="array_api_strict",
        compat=array_api_strict,
        extras=extras,
        array_types=(_Array,),
        device_type=lambda array: "cpu",
        device_types={"cpu": None},
        devices=lambda: list(array_api_strict.__array_namespace_info__().devices()),
        generator=random.Generator,
        defer_to=_defer_to,
        to_numpy=_to_numpy,
        kernels=kernels.KERNELS,
        version=array_api_strict.__version__,
        native=array_api_strict,
    )
