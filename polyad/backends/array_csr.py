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
    ``format``, ``toarray()``, ``abs(A)`` and ``A @ B`` (a vector or a matrix: by a segmented scan over the
    entries, never the dense ``A``)."""

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
        ndim = getattr(other, "ndim", None)
        if ndim not in (1, 2):
            raise TypeError(
                f"ArrayCSR @ other: other must be a 1-D or 2-D array of the same library, got "
                f"{type(other).__name__} with ndim {ndim}"
            )
        if ndim == 1:
            return self._product(self.xp.reshape(other, (-1, 1)))[:, 0]
        return self._product(other)

    def _product(self, B):
        """``A @ B`` for a matrix ``B`` (n, k): each entry times its column's row of ``B`` (nnz, k), summed
        along its row by a Hillis-Steele scan (log2(nnz) steps of a shift and an add where the shifted
        entry lies in the same row), read at each row's last entry. Standard calls only (the library has
        no scatter-add), O(nnz k) memory, never the dense A, and pairwise-like rounding (a cumulative sum's
        differences would cancel catastrophically)."""
        xp, (m, n) = self.xp, self.shape
        device = self.data.device
        if B.shape[0] != n:
            raise ValueError(
                f"ArrayCSR @ other: other must have {n} rows (A is {m}x{n}), got {tuple(B.shape)}"
            )
        k = B.shape[1]
        dtype = xp.result_type(self.data, B)
        if self.nnz == 0:
            return xp.zeros((m, k), dtype=dtype, device=device)
        values = xp.astype(self.data, dtype)[:, None] * xp.astype(xp.take(B, self.indices, axis=0), dtype)
        entries = xp.arange(self.nnz, dtype=self.indptr.dtype, device=device)
        rows = xp.searchsorted(self.indptr, entries, side="right") - 1
        zero = xp.zeros((), dtype=dtype, device=device)
        shift = 1
        while shift < self.nnz:
            before = xp.concat(
                [xp.zeros((shift, k), dtype=dtype, device=device), values[: self.nnz - shift, :]]
            )
            same = xp.concat(
                [xp.zeros((shift,), dtype=xp.bool, device=device), rows[shift:] == rows[:-shift]]
            )
            values = values + xp.where(same[:, None], before, zero)
            shift *= 2
        ends = self.indptr[1:]
        last = xp.take(values, xp.clip(ends - 1, 0, self.nnz - 1), axis=0)
        return xp.where((ends > self.indptr[:-1])[:, None], last, zero)

    def __repr__(self):
        m, n = self.shape
        return f"<ArrayCSR {m}x{n}, {self.nnz} stored entries of {self.dtype} on {self.device}>"
