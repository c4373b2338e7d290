"""Kernels the standard lacks, written with CuPy's own routines."""

import cupy
import cupyx
import cupyx.scipy.sparse as cupyx_sparse
import cupyx.scipy.sparse.linalg as cupyx_linalg

from ..host import note_host_copy, tolerance_keyword


def scatter_add(target, indices, values, axis):
    """Add ``values`` into a copy of ``target`` at integer ``indices`` along ``axis`` (repeats add up)."""
    out = target.copy()
    moved = cupy.moveaxis(out, axis, 0)
    cupyx.scatter_add(moved, indices, cupy.moveaxis(values, axis, 0))
    return out


def index_add(target, key, values):
    """Add ``values`` into a copy of ``target`` at a general index ``key``; repeated indices accumulate."""
    out = target.copy()
    cupyx.scatter_add(out, key, values)
    return out


class CupyxSparse:
    """The sparse linear algebra of the contract on CUDA: cupyx's CSR matrices, its ``splu`` and
    ``spsolve`` and its Krylov solvers, all on device arrays. The relative tolerance goes under the name
    the installed solver reads from its signature (CuPy 14's cupyx takes ``rtol``, as SciPy >= 1.12 does;
    older cupyx ``tol``; on an H200 with CuPy 14.2 the former code's ``tol=`` was refused)."""

    library = "cupyx.scipy.sparse"
    container = "csr"

    def csr(self, data, indices, indptr, shape):
        return cupyx_sparse.csr_matrix(
            (data, indices.astype(cupy.int32), indptr.astype(cupy.int32)), shape=shape
        )

    def is_sparse(self, obj):
        return cupyx_sparse.issparse(obj)

    def to_dense(self, matrix):
        return matrix.toarray() if self.is_sparse(matrix) else matrix

    def to_scipy(self, matrix):
        """A host SciPy copy (deliberate, counted): for sparsity patterns."""
        note_host_copy()
        return matrix.get() if self.is_sparse(matrix) else matrix

    def matvec(self, matrix, v):
        return matrix @ v

    def splu(self, matrix, **options):
        return cupyx_linalg.splu(matrix.tocsc(), **options)

    def spsolve(self, matrix, b):
        return cupyx_linalg.spsolve(matrix.tocsr(), b)

    def krylov(self, method, matvec, b, *, x0=None, rtol=1e-5, atol=0.0, maxiter=None, M=None):
        solver = getattr(cupyx_linalg, method, None)
        if solver is None:
            raise NotImplementedError(
                f"{method}: cupyx.scipy.sparse.linalg has no {method}; on CUDA arrays use cg or gmres"
            )
        n = b.shape[0]
        A = cupyx_linalg.LinearOperator((n, n), matvec=matvec, dtype=b.dtype)
        if M is not None and callable(M) and not hasattr(M, "shape"):
            M = cupyx_linalg.LinearOperator((n, n), matvec=M, dtype=b.dtype)
        tolerance = {tolerance_keyword(solver): rtol}
        x, info = solver(A, b, x0=x0, atol=atol, maxiter=maxiter, M=M, **tolerance)
        return x, int(info)


sparse = CupyxSparse()
