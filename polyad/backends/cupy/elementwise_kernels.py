"""The CUDA source polyad ships for its own ops, as CuPy kernel objects (``kernels.py`` attaches them).

Kept apart from ``kernels.py``, which imports cupyx's linear algebra (and so needs cuBLAS): this module
needs CuPy alone, so that ``polyad.backends.cupy.nvrtc_check`` can compile every kernel here where there
is no GPU and no CUDA library but NVRTC (``tests/test_cuda_sources.py``). A kernel with CUDA source of its
own (``ElementwiseKernel``, ``ReductionKernel``, ``RawKernel``, ``RawModule``) belongs here, with the
argument dtypes it is launched on in ``DTYPES``.
"""

import cupy

softplus = cupy.ElementwiseKernel(
    "T x",
    "T y",
    "y = fmax(x, (T)0) + log1p(exp(-fabs(x)))",
    "polyad_softplus",
)

# kernel name -> the argument dtypes it is launched on (one tuple per instantiation)
DTYPES = {"polyad_softplus": (("float32",), ("float64",))}
