"""The NumPy backend: CPU arrays through array_api_compat.numpy."""

import array_api_compat.numpy as compat_numpy
import numpy as np

from ..contract import Backend
from . import compiler, extras, kernels, random


def _is_scalar(x):
    return isinstance(x, np.generic)  # np.float64 and np.complex128 subclass Python's float and complex


def load():
    return Backend(
        name="numpy",
        compat=compat_numpy,
        extras=extras,
        array_types=(np.ndarray, np.generic),
        is_scalar=_is_scalar,
        device_type=lambda array: "cpu",
        device_types={"cpu": None},
        devices=lambda: ["cpu"],
        generator=random.Generator,
        to_numpy=np.asarray,
        kernels=kernels.KERNELS,  # operator deferral: none needed, NumPy calls Tensor's __array_ufunc__
        version=np.__version__,
        native=np,
        host_arrays=True,
        ufunc_out=True,
        fusion=compiler,
    )
