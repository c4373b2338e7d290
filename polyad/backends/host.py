"""NumPy on the host: the one door through which polyad's own bookkeeping reaches NumPy (the index sets of
sparsity patterns and colourings, which live on the CPU as SciPy's sparse matrices do). The arrays of a
user's computation never pass here: they go through their backend (``polyad.backends.<name>``).

Example:
    >>> from polyad.backends.host import np
    >>> np.arange(3).tolist()
    [0, 1, 2]
"""

import inspect
import sys

import numpy as np

from .array_csr import ArrayCSR

__all__ = [
    "SparseSupport",
    "host_copies",
    "note_host_copy",
    "np",
    "scipy_sparse_modules",
    "tolerance_keyword",
]

_HOST_COPIES = [0]  # device-to-host copies so far: every backend's to_numpy, and SparseSupport's copies


def note_host_copy():
    """Count one device-to-host copy (``host_copies``)."""
    _HOST_COPIES[0] += 1


def host_copies() -> int:
    """How many device-to-host copies polyad has made in this process (every backend's ``to_numpy``, and
    the copies a backend's ``SparseSupport`` makes for SciPy): a test reads it before and after a call to
    prove the call made none.

    Returns:
        The count, an int.

    Example:
        >>> import numpy as np
        >>> from polyad import backends
        >>> before = backends.host_copies()
        >>> _ = backends.load("numpy").to_numpy(np.ones(2))
        >>> backends.host_copies() - before
        1
    """
    return _HOST_COPIES[0]


# ------------------------------------------------------------------------------ sparse linear algebra

SCIPY_EXTRA = "install it with pip install polyad[scipy] (or pip install scipy)"


def scipy_sparse_modules():
    """``(scipy.sparse, scipy.sparse.linalg)``, imported on first use; an ImportError naming the fix."""
    try:
        import scipy.sparse
        import scipy.sparse.linalg
    except ImportError as exc:
        raise ImportError(
            f"polyad's sparse linear algebra uses SciPy, which is not installed: {SCIPY_EXTRA}"
        ) from exc
    return scipy.sparse, scipy.sparse.linalg


def tolerance_keyword(solver):
    """The name ``solver`` gives its relative tolerance: ``rtol`` (SciPy >= 1.12), ``tol`` (older SciPy, and
    cupyx's Krylov solvers)."""
    try:
        parameters = inspect.signature(solver).parameters
    except (TypeError, ValueError):  # no signature to read: the current SciPy name
        return "rtol"
    return "rtol" if "rtol" in parameters else "tol"


class SparseSupport:
    """A backend's sparse linear algebra (the ``sparse`` field of the backend contract), here SciPy's on
    host arrays. NumPy's arrays are host arrays: no copies. A backend whose arrays live elsewhere and whose
    library has no sparse matrices (array_api_strict, Dask) passes ``to_host``/``from_host``: its solves then
    copy deliberately (each copy counted by ``polyad.backends.host_copies``), and its sparse Jacobians are
    ``ArrayCSR`` matrices of the library's arrays (``namespace``), built on their device.

    Args:
        to_host: ``array -> numpy.ndarray`` (the backend's ``to_numpy``), or None for NumPy's own arrays.
        from_host: ``(numpy.ndarray, like) -> array`` of ``like``'s library, dtype and device, or None.
        container: "csr" (sparse Jacobians are CSR matrices) or "dense" (dense arrays of the library).
        namespace: the library's namespace, for a library without sparse matrices: its CSR matrices are
            ``ArrayCSR`` in its arrays; None: SciPy's ``csr_array``.

    Example:
        >>> import numpy as np
        >>> from polyad.backends.host import SparseSupport
        >>> s = SparseSupport()
        >>> A = s.csr(np.array([2.0, 4.0]), np.array([0, 1]), np.array([0, 1, 2]), (2, 2))
        >>> s.splu(A).solve(np.array([1.0, 1.0])).tolist()
        [0.5, 0.25]
    """

    library = "scipy.sparse"

    def __init__(self, to_host=None, from_host=None, container="csr", namespace=None):
        self._to_host = to_host
        self._from_host = from_host
        self.container = container
        self._namespace = namespace  # a library without sparse matrices: ArrayCSR in its arrays

    def _host(self, x):
        if self._to_host is None:
            return x
        note_host_copy()
        return self._to_host(x)

    def _back(self, values, like):
        return values if self._from_host is None else self._from_host(values, like)

    def csr(self, data, indices, indptr, shape):
        """The CSR matrix with these arrays (no copy of ``data``): SciPy's, or an ``ArrayCSR`` on the
        arrays' device for a library without sparse matrices."""
        if self._namespace is not None:
            return ArrayCSR(self._namespace, data, indices, indptr, shape)
        sp, _ = scipy_sparse_modules()
        return sp.csr_array((data, indices, indptr), shape=shape)

    def is_sparse(self, obj):
        """Whether ``obj`` is a sparse matrix this support reads (SciPy's, or an ``ArrayCSR``)."""
        if isinstance(obj, ArrayCSR):
            return True
        sp = _scipy_sparse_if_imported()
        return sp is not None and sp.issparse(obj)

    def to_dense(self, matrix):
        """``matrix`` as a dense array (sparse ones of the library; the library's arrays as they are)."""
        return matrix.toarray() if self.is_sparse(matrix) else matrix

    def to_scipy(self, matrix):
        """A SciPy sparse matrix (or operator) with ``matrix``'s entries: SciPy's as they are, an
        ``ArrayCSR`` or a dense array of the library by host copies."""
        if isinstance(matrix, ArrayCSR):
            sp, _ = scipy_sparse_modules()
            parts = (np.asarray(self._host(a)) for a in (matrix.data, matrix.indices, matrix.indptr))
            return sp.csr_array(tuple(parts), shape=matrix.shape)
        if self.is_sparse(matrix) or hasattr(matrix, "matvec"):
            return matrix
        sp, _ = scipy_sparse_modules()
        return sp.csr_array(np.asarray(self._host(matrix)))

    def matvec(self, matrix, v):
        """``matrix @ v`` for a sparse matrix or LinearOperator and an array ``v`` of the backend."""
        host = self._host(v)
        out = np.asarray(self.to_scipy(matrix) @ host)
        return self._back(out.astype(host.dtype, copy=False), v)

    def splu(self, matrix, **options):
        """SuperLU's factors of ``matrix``: ``.solve(b, trans="N")`` takes and returns backend arrays."""
        sp, spla = scipy_sparse_modules()
        return _HostLU(spla.splu(sp.csc_array(self.to_scipy(matrix)), **options), self)

    def spsolve(self, matrix, b):
        """``x`` with ``matrix @ x = b`` (SuperLU)."""
        return self.splu(matrix).solve(b)

    def krylov(self, method, matvec, b, *, x0=None, rtol=1e-5, atol=0.0, maxiter=None, M=None):
        """``(x, info)``: SciPy's ``method`` ("cg", "gmres", "bicgstab") on the operator ``matvec`` (backend
        1-D arrays to backend 1-D arrays) and the 1-D backend array ``b``. ``M``: None, a SciPy matrix or
        operator, or a function of backend arrays."""
        _, spla = scipy_sparse_modules()
        host_b = np.asarray(self._host(b))
        n = host_b.shape[0]

        def on_host(f):  # a function of backend arrays as one of SciPy's host vectors
            return lambda v: np.asarray(
                self._host(f(self._back(np.asarray(v, dtype=host_b.dtype), b)))
            ).reshape(n)

        A = spla.LinearOperator((n, n), matvec=on_host(matvec), dtype=host_b.dtype)
        if M is not None and callable(M) and not hasattr(M, "shape"):
            M = spla.LinearOperator((n, n), matvec=on_host(M), dtype=host_b.dtype)

        start = None if x0 is None else np.asarray(self._host(x0))
        solver = getattr(spla, method)
        tolerance = {tolerance_keyword(solver): rtol}
        x, info = solver(A, host_b, x0=start, atol=atol, maxiter=maxiter, M=M, **tolerance)
        return self._back(np.asarray(x, dtype=host_b.dtype), b), int(info)


class _HostLU:
    """SciPy's SuperLU with backend arrays in and out."""

    def __init__(self, lu, support):
        self.lu, self.support = lu, support
        self.shape = lu.shape

    def solve(self, b, trans="N"):
        host = np.ascontiguousarray(self.support._host(b))
        return self.support._back(self.lu.solve(host, trans=trans), b)


def _scipy_sparse_if_imported():
    return sys.modules.get("scipy.sparse")
