"""The Dask backend: chunked, lazy arrays through ``array_api_compat.dask.array``.

Every op builds a task graph and computes nothing: values, gradients, tangents and batched results stay
Dask arrays until the user calls ``.compute()`` (or ``dask.compute``), and the reverse pass of ``grad`` is
part of the same graph, so Dask's scheduler decides memory and parallelism. Dask is an optional extra
(``pip install polyad[dask]``); importing this module does not import it (``load`` does).

Dask's arrays lack the standard's ``device`` attribute; loading the backend gives ``dask.array.Array`` a
read-only ``device`` property returning array-api-compat's Dask device (``DASK_DEVICE``), so that an
array created ``device=x.device`` from a Dask array ``x`` is a Dask array whatever the default backend.
Their chunks are NumPy arrays: the device type is "cpu", and CPU kernels that call NumPy functions run
chunk by chunk (``map_host``). A NumPy array in a call with Dask arrays is taken as it is, as Dask does
(``accepts``): ``dask_x[xp.asarray([0, 2])]`` works with NumPy as the default backend.
"""

from ..contract import Backend, BackendUnavailable
from . import kernels


def load():
    try:
        import dask
        import dask.array as da
        from array_api_compat.dask import array as compat_dask
    except ImportError as exc:
        raise BackendUnavailable(f"Dask is not installed ({exc}); install polyad[dask]") from exc

    from . import extras, random

    # array-api-compat's stand-in device for Dask arrays: its namespace lists it next to "cpu"
    dask_device = next(d for d in compat_dask.__array_namespace_info__().devices() if d != "cpu")
    if not hasattr(da.Array, "device"):
        da.Array.device = property(lambda self: dask_device, doc="The Dask device (array-api-compat's).")
    return Backend(
        name="dask",
        compat=compat_dask,
        extras=extras,
        array_types=(da.Array,),
        device_type=lambda array: "cpu",
        device_types={"cpu": None},
        devices=lambda: [dask_device],
        generator=random.Generator,
        to_numpy=extras.to_numpy,
        accepts=("numpy",),  # NumPy arrays (constants, index arrays) join Dask graphs as single chunks
        map_host=extras.map_host,
        kernels=kernels.KERNELS,  # operators: Dask defers to Tensor's own __array_ufunc__
        version=dask.__version__,
        native=da,
        lazy=True,
    )
