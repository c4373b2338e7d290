"""CUDA kernels for polyad's fused custom ops (registered when the cupy backend loads)."""

import cupy

_softplus = cupy.ElementwiseKernel(
    "T x",
    "T y",
    "y = fmax(x, (T)0) + log1p(exp(-fabs(x)))",
    "polyad_softplus",
)


def register():
    from polyad import fused

    fused.softplus.register_kernel("cuda", lambda x: _softplus(x))
