"""Sparse linear algebra, differentiable: ``polyad.sparse.linalg`` (SciPy's ``scipy.sparse.linalg``
solves through ``polyad.custom_linear_solve``)."""

from polyad.scipy.sparse import linalg

__all__ = ["linalg"]
