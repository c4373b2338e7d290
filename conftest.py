"""pytest's collection at the repository root: the CuPy backend's modules import CuPy at their top, so their
doctests are collected only where CuPy is installed (``make test`` runs ``--doctest-modules`` on polyad/)."""

import importlib.util

collect_ignore = [] if importlib.util.find_spec("cupy") is not None else ["polyad/backends/cupy"]
