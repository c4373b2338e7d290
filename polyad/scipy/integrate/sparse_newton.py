"""Sparse Newton matrices of the stiff methods (``jac_sparsity=``, outside transforms): ``df/dy`` by
``pa.sparse_jacfwd`` with the pattern coloured once, the Newton matrices ``I - c J`` (BDF), ``I - h (A x
J)`` (Radau's real ``3n`` system) and ``mu / h I - J`` (Radau's error estimate) assembled in the backend's
CSR container from ``J``'s entries by index arithmetic (the structures are computed once on the host from
the pattern), and factorised by the backend's sparse LU (the contract's ``sparse.splu``: SuperLU for
NumPy, cupyx for CuPy; array_api_strict's ``ArrayCSR`` goes to SuperLU by counted host copies: the
three CSR arrays per factorisation, one per solve and its result back).

The pattern has the diagonal added, so the identity's entries have a place in the matrix; the Jacobian
values there are exact zeros where ``f`` does not depend on them.
"""

import polyad.core.dispatch as dispatch
from polyad.api.sparse import sparse_jacfwd
from polyad.api.sparsity import jacobian_sparsity
from polyad.backends.host import np, scipy_sparse_modules


class SparseNewton:
    """The sparse Jacobian of one solve and the structures of its Newton matrices (made at the first
    Jacobian, reused at every one after).

    Args:
        problem: the ``Problem`` (its ``rhs``, ``n`` and ``jac_sparsity``: a pattern or "detect").
        t, y: the first point (a detected pattern is found there, once: structural, it holds at every
            point).
    """

    def __init__(self, problem, t, y):
        n = problem.n
        backend = dispatch.backend_of_array(y)
        self.support = backend.sparse
        if self.support is None:
            raise TypeError(
                f"solve_ivp: jac_sparsity needs the backend's sparse linear algebra (the contract's "
                f"``sparse`` field); backend {backend.name!r} declares none"
            )
        pattern = problem.jac_sparsity
        if isinstance(pattern, str):  # "detect"
            pattern = jacobian_sparsity(lambda v: problem.rhs(t, v))(y)
        sp, _ = scipy_sparse_modules()
        host = sp.csr_array(pattern) if sp.issparse(pattern) else sp.csr_array(np.asarray(pattern))
        if host.shape != (n, n):
            raise ValueError(
                f"solve_ivp: jac_sparsity must be of shape {(n, n)} (df/dy's pattern), got {host.shape}"
            )
        host = (host.astype(bool) + sp.eye_array(n, dtype=bool, format="csr")).tocsr()
        host.sort_indices()
        self.jacobian = sparse_jacfwd(lambda v, s: problem.rhs(s, v), sparsity=host)
        structure = self.jacobian.sparsity  # the coloured pattern: the CSR structure J comes in
        indptr, indices = np.asarray(structure.indptr), np.asarray(structure.indices)
        rows = np.repeat(np.arange(n), np.diff(indptr))
        self.n, self.like = n, y
        self._bxp = backend.xp
        self.diagonal = self._put((rows == indices).astype(np.float64))
        self._radau = None
        self._host_structure = (indptr, indices, rows)

    def _put(self, host, dtype=None):
        like = self.like
        return self._bxp.asarray(host, dtype=dtype or like.dtype, device=like.device)

    def __call__(self, t, y):
        """``df/dy`` at ``(t, y)``: the backend's CSR matrix."""
        return self.jacobian(y, t)

    def _csr(self, data, J):
        return self.support.csr(data, J.indices, J.indptr, J.shape)

    def shifted(self, J, a, b):
        """The factors of ``a I + b J`` (``a``, ``b`` floats): ``.solve(v)`` of backend vectors."""
        return self.support.splu(self._csr(a * self.diagonal + b * J.data, J))

    def radau(self, J, h, A):
        """The factors of ``I - h (A x J)``, the stages' Newton matrix (row-major ``(3, n)`` stages)."""
        if self._radau is None:
            self._radau = self._kron_structure(A)
        data_index, coefficient, diagonal, indices, indptr = self._radau
        data = diagonal - h * coefficient * self._bxp.take(J.data, data_index)
        shape = (3 * self.n, 3 * self.n)
        return self.support.splu(self.support.csr(data, indices, indptr, shape))

    def _kron_structure(self, A):
        """The CSR structure of ``A x J`` (3 x 3 blocks of ``J``'s pattern), the entry of ``J`` and of
        ``A`` each of its entries reads, and its diagonal (all made once on the host)."""
        indptr, indices, rows = self._host_structure
        n, nnz = self.n, indices.shape[0]
        a = np.asarray(A, dtype=np.float64)
        parts = []
        for i in range(3):
            for j in range(3):
                parts.append((i * n + rows, j * n + indices, np.arange(nnz), np.full(nnz, a[i, j])))
        r, c, src, coef = (np.concatenate(p) for p in zip(*parts))
        order = np.lexsort((c, r))
        r, c, src, coef = r[order], c[order], src[order], coef[order]
        kron_indptr = np.concatenate([[0], np.cumsum(np.bincount(r, minlength=3 * n))])
        return (
            self._put(src, self._bxp.int64),
            self._put(coef),
            self._put((r == c).astype(np.float64)),
            self._put(c, self._bxp.int64),
            self._put(kron_indptr, self._bxp.int64),
        )
