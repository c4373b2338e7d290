"""The CuPy backend: CUDA arrays through array_api_compat.cupy. Loading it needs CuPy and a GPU; importing
this module does not (CuPy is imported by ``load``)."""

from ..contract import Backend, BackendUnavailable
from . import (
    fusion,
    graphs,
)  # source text only: CuPy is imported when a kernel first runs (graphs: a capture)


def load():
    try:
        import cupy
    except ImportError as exc:
        raise BackendUnavailable(
            f"CuPy is not installed ({exc}); install polyad[cuda13] or polyad[cuda12] "
            "(python -m polyad info says which fits the driver)"
        ) from exc
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDA driver missing or broken: cupy raises its own runtime errors
        raise BackendUnavailable(f"CuPy sees no GPU ({exc})") from exc
    if count == 0:
        raise BackendUnavailable("CuPy sees no GPU (device count 0)")
    import array_api_compat.cupy as compat_cupy

    from . import extras, kernels, random

    return Backend(
        name="cupy",
        compat=compat_cupy,
        extras=extras,
        array_types=(cupy.ndarray,),
        device_type=lambda array: "cuda",
        device_types={"cuda": "cpu"},
        devices=lambda: [cupy.cuda.Device(i) for i in range(count)],
        generator=random.Generator,
        to_numpy=cupy.asnumpy,
        kernels=kernels.KERNELS,  # operators: CuPy calls NumPy's ufunc, then Tensor's __array_ufunc__
        version=cupy.__version__,
        native=cupy,
        ufunc_out=True,
        fusion=fusion,
        graph_capture=graphs,
    )
