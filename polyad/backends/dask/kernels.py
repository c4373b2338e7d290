"""Device kernels for polyad's shipped custom ops on Dask, ``{op name: {device type: kernel}}``: none
needed, the generic Array API kernels build Dask graphs. (Each backend folder has this file; the cupy one
declares CUDA kernels.)"""

KERNELS = {}
