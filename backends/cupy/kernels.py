"""CUDA kernels for polyad's shipped custom ops, ``{op name: {device type: kernel(xp, *arrays,
**params)}}``; the core attaches them to the ops when the cupy backend loads."""

import cupy

_softplus = cupy.ElementwiseKernel(
    "T x",
    "T y",
    "y = fmax(x, (T)0) + log1p(exp(-fabs(x)))",
    "polyad_softplus",
)

KERNELS = {"polyad::softplus": {"cuda": lambda xp, x: _softplus(x)}}
