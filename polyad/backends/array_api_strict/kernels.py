"""Device kernels for polyad's shipped custom ops on array_api_strict, ``{op name: {device type:
kernel}}``: none needed, the generic Array API kernels serve the CPU. (Each backend folder has this file;
the cupy one declares CUDA kernels.)"""

KERNELS = {}
