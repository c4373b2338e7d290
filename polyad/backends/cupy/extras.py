"""Kernels the standard lacks, written with CuPy's own routines."""

import cupy
import cupyx
import cupyx.scipy.sparse as cupyx_sparse
import cupyx.scipy.sparse.linalg as cupyx_linalg

from ..host import note_host_copy, tolerance_keyword

# the dtypes cupy.add.at (behind cupyx.scatter_add) accepts; others go through the widest of their kind
_ADD_AT_DTYPES = frozenset("int32 int64 float16 float32 float64 uint32 uint64".split())


def _added_at(target, key, values):
    """A copy of ``target`` with ``values`` added at index ``key`` (repeats add up), for every dtype:
    cupy.add.at refuses complex, bool and 8- and 16-bit integer arrays, so a complex array adds its real
    and imaginary parts apart, and the small integers are widened and cast back."""
    if target.dtype.name in _ADD_AT_DTYPES:
        out = target.copy()
        cupyx.scatter_add(out, key, cupy.asarray(values, dtype=target.dtype))
        return out
    if target.dtype.kind == "c":
        values = cupy.asarray(values)
        real = _added_at(target.real, key, values.real)
        imag = _added_at(target.imag, key, values.imag)
        return (real + 1j * imag).astype(target.dtype, copy=False)
    wide = cupy.uint64 if target.dtype.kind == "u" else cupy.int64
    return _added_at(target.astype(wide), key, cupy.asarray(values).astype(wide)).astype(target.dtype)


def scatter_add(target, indices, values, axis):
    """Add ``values`` into a copy of ``target`` at integer ``indices`` along ``axis`` (repeats add up)."""
    moved = _added_at(cupy.moveaxis(target, axis, 0), indices, cupy.moveaxis(values, axis, 0))
    return cupy.moveaxis(moved, 0, axis)


def index_add(target, key, values):
    """Add ``values`` into a copy of ``target`` at a general index ``key``; repeated indices accumulate."""
    return _added_at(target, key, values)


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


def decompose_stack(f, x):
    """``f`` (eigh, svd: a tuple of arrays) of the stack of matrices ``x``, one matrix at a time.

    cuSOLVER's batched routines (syevj, gesvdj), which CuPy calls for a stack, pick other signs of the
    vectors than its one-matrix routines: vmap's one call on the stack then differed from the eager
    calls per example. One call per matrix gives each matrix the eager call's answer (and order)."""
    if x.ndim <= 2 or x.size == 0:
        return f(x)
    lead, core = x.shape[:-2], x.shape[-2:]
    flat = x.reshape((-1, *core))
    outs = [f(flat[i]) for i in range(flat.shape[0])]
    return tuple(cupy.stack(col).reshape(lead + col[0].shape) for col in zip(*outs))


def _raising(f):
    """``f`` raising ``numpy.linalg.LinAlgError`` for a singular matrix, as NumPy's does; by default CuPy
    returns what cuSOLVER left (inf, nan or finite garbage) without an error. The check reads cuSOLVER's
    status back from the GPU: a synchronisation, the price of a loud refusal over a silent wrong answer
    (the second derivatives of det at a singular matrix need an inverse that does not exist)."""

    def checked(*args, **kwargs):
        with cupyx.errstate(linalg="raise"):
            return f(*args, **kwargs)

    return checked


linalg = {"inv": _raising(cupy.linalg.inv)}  # merged into the namespace's linalg
