"""Device kernels for polyad's fused custom ops on array_api_strict: none needed, the generic Array API
kernels serve the CPU. (Each backend folder has this file; the cupy one registers CUDA kernels.)"""


def register():
    pass
