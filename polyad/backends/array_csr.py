"""A CSR matrix held in three arrays of any Array API library, on their device: the sparse container of
backends whose library has none (array_api_strict, Dask). It is built and densified by index arithmetic
in standard calls only (``take``, ``searchsorted``), so a sparse Jacobian stays where its arrays are; the
solvers copy it to the host deliberately (``SparseSupport.to_scipy``).

Example:
    >>> import array_api_strict as xp
    >>> from polyad.backends.array_csr import ArrayCSR
    >>> A = ArrayCSR(xp, xp.asarray([2.0, 3.0]), xp.asarray([1, 0]), xp.asarray([0, 1, 2]), (2, 2))
    >>> A.toarray()
    Array([[0., 2.],
           [3., 0.]], dtype=array_api_strict.float64)
"""


class ArrayCSR:
    """CSR arrays (``data``, ``indices``, ``indptr``: the column indices sorted within each row) of one
    library and device, with SciPy's names for what polyad reads: ``shape``, ``dtype``, ``nnz``,
    ``format``, ``toarray()``, ``abs(A)`` and ``A @ v`` (through the dense array: for checks on small
    matrices)."""

    format = "csr"

    def __init__(self, xp, data, indices, indptr, shape):
        self.xp, self.data, self.indices, self.indptr = xp, data, indices, indptr
        self.shape = tuple(shape)

    @property
    def dtype(self):
        return self.data.dtype

    @property
    def nnz(self):
        return self.data.shape[0]

    @property
    def device(self):
        return self.data.device

    def toarray(self):
        """The dense array, on the arrays' device: each dense position finds its entry by a binary search
        among the entries' positions (ascending in CSR order)."""
        xp, (m, n) = self.xp, self.shape
        device = self.data.device
        entries = xp.arange(self.nnz, dtype=self.indptr.dtype, device=device)
        rows = xp.searchsorted(self.indptr, entries, side="right") - 1
        positions = rows * n + xp.astype(self.indices, rows.dtype)
        wanted = xp.arange(m * n, dtype=positions.dtype, device=device)
        if self.nnz == 0:
            return xp.zeros((m, n), dtype=self.dtype, device=device)
        k = xp.clip(xp.searchsorted(positions, wanted), 0, self.nnz - 1)
        hit = xp.take(positions, k) == wanted
        zero = xp.zeros((), dtype=self.dtype, device=device)
        return xp.reshape(xp.where(hit, xp.take(self.data, k), zero), (m, n))

    def __abs__(self):
        return ArrayCSR(self.xp, self.xp.abs(self.data), self.indices, self.indptr, self.shape)

    def __matmul__(self, other):
        return self.toarray() @ other

    def __repr__(self):
        m, n = self.shape
        return f"<ArrayCSR {m}x{n}, {self.nnz} stored entries of {self.dtype} on {self.device}>"
