"""Device kernels for polyad's shipped custom ops on NumPy, ``{op name: {device type: kernel}}``: none
needed, the generic Array API kernels serve the CPU. (Each backend folder has this file; the cupy one
declares CUDA kernels.)"""

KERNELS = {}
