"""pytest's collection at the repository root: the CuPy backend's modules import CuPy at their top, so their
doctests are collected only where CuPy is installed (``make test`` runs ``--doctest-modules`` on polyad/).
``make test`` installs CuPy without a GPU (for the NVRTC check): there CUDA's libraries are absent, so the
modules that import cupyx's linear algebra (cuBLAS: the kernels, and the sparse support in extras.py)
cannot be imported and are not collected either."""

import importlib.util


def _cuda_libraries():
    try:
        importlib.import_module("cupyx.scipy.linalg")  # loads cuBLAS
    except ImportError:
        return False
    return True


if importlib.util.find_spec("cupy") is None:
    collect_ignore = ["polyad/backends/cupy"]
elif not _cuda_libraries():
    collect_ignore = [
        "polyad/backends/cupy/kernels.py",
        "polyad/backends/cupy/linalg_kernels.py",
        "polyad/backends/cupy/extras.py",
    ]
else:
    collect_ignore = []
