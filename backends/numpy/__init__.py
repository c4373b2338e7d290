"""The NumPy backend: CPU arrays through array_api_compat.numpy."""

import array_api_compat.numpy as compat_numpy
import numpy as np

from polyad.dispatch import Backend

from . import extras


def load():
    backend = Backend(
        name="numpy",
        compat=compat_numpy,
        extras=extras,
        array_types=(np.ndarray, np.generic),
        device_type=lambda array: "cpu",
        devices=lambda: ["cpu"],
        version=np.__version__,
        native=np,
    )
    from . import kernels

    kernels.register()
    return backend
