"""The strict reference backend: array_api_strict rejects anything outside the standard."""

import array_api_strict

from polyad.dispatch import Backend

from . import extras

# polyad implements the 2024.12 revision of the standard; pin the reference to it.
array_api_strict.set_array_api_strict_flags(api_version="2024.12")

# The stand-in devices array_api_strict offers; tests map them to device types to exercise the priority.
_CPU = array_api_strict.Device("CPU_DEVICE")


def load():
    return Backend(
        name="array_api_strict",
        compat=array_api_strict,
        extras=extras,
        array_types=(array_api_strict._array_object.Array,),
        device_type=lambda array: "cpu",
        devices=lambda: list(array_api_strict.__array_namespace_info__().devices()),
        version=array_api_strict.__version__,
        native=array_api_strict,
    )
