"""Sparse Newton matrices of the stiff methods (``jac_sparsity=``): ``df/dy`` by
``pa.sparse_jacfwd`` with the pattern coloured once, the Newton matrices ``I - c J`` (BDF), ``I - h (A x
J)`` (Radau's real ``3n`` system) and ``mu / h I - J`` (Radau's error estimate) assembled in the backend's
CSR container from ``J``'s entries by index arithmetic (the structures are computed once on the host from
the pattern), and factorised by the backend's sparse LU (the contract's ``sparse.splu``: SuperLU for
NumPy, cupyx for CuPy; array_api_strict's ``ArrayCSR`` goes to SuperLU by counted host copies: the
three CSR arrays per factorisation, one per solve and its result back).

The pattern has the diagonal added, so the identity's entries have a place in the matrix; the Jacobian
values there are exact zeros where ``f`` does not depend on them.

Under a transform (grad, jvp, vmap, jit) the Jacobian is its CSR values alone, a vector of the pattern's
non-zeros carried through the solver's loop (``traced_values``: one JVP per colour, as polyad ops). The
factorisations stay kernel calls on concrete values: the Newton solves inside ``pa.custom_root``'s
``solve`` and the tangent and adjoint solves inside its ``tangent_solve`` (``factor``, ``solve_linear``)
run on plain arrays, where the values are known; there the CSR values are assembled and factorised by the
backend's sparse LU, never a dense matrix. A factorisation is kept while its matrix's values stay the
same (the Newton matrix of BDF is reused over steps, as SciPy's). Under vmap the solves see a batch of
values: they raise ``TypeError``, so vmap's per-example loop runs them, one factorisation per example.
"""

import polyad.core.dispatch as dispatch
import polyad.xp as polyad_xp
from polyad.api.jacobians import jacfwd
from polyad.api.sparse import sparse_jacfwd
from polyad.api.sparsity import jacobian_sparsity
from polyad.backends.host import np, scipy_sparse_modules
from polyad.core import Tensor, plain
from polyad.core.avals import bottom
from polyad.custom.implicit import custom_linear_solve


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
        pattern = problem.jac_sparsity
        if isinstance(pattern, str):  # "detect"
            if isinstance(y, Tensor):  # under a transform: the structure at a plain state of y's shape
                inner = bottom(y)
                if dispatch.backend_of_array(inner) is None:
                    raise TypeError(
                        "solve_ivp: jac_sparsity='detect' under pa.jit has no concrete state to detect the "
                        "pattern at; pass the pattern (pa.jacobian_sparsity of fun, outside the jit)"
                    )
                y = dispatch.namespace_of(inner).zeros((n,), dtype=inner.dtype, device=inner.device)
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
        self.problem_rhs = problem.rhs
        structure = self.jacobian.sparsity  # the coloured pattern: the CSR structure J comes in
        indptr, indices = np.asarray(structure.indptr), np.asarray(structure.indices)
        rows = np.repeat(np.arange(n), np.diff(indptr))
        self.n, self.like = n, None
        self._radau = None
        self._host_structure = (indptr, indices, rows)
        self._host_pattern = host
        # under transforms: J's values from the coloured products (product k = J @ seed k)
        colors = np.asarray(self.jacobian.colors)
        self._seeds_T = np.zeros((n, self.jacobian.n_colors))
        self._seeds_T[np.arange(n), colors] = 1.0
        self._read = rows * self.jacobian.n_colors + colors[indices]
        self._kept = {}  # kind -> (a, b, values, factors): the last factorisation of each kind
        self._tangent = {}  # blocks -> the coloured structure of a tangent system
        # the backend's arrays: now from y's array, or (under pa.jit, y abstract) at the first kernel call
        if dispatch.backend_of_array(bottom(y)) is not None:
            self._bind(bottom(y))

    def _bind(self, like):
        """The backend of the concrete array ``like`` (its sparse support, dtype and device) and the
        structure's arrays there, once."""
        if self.like is not None:
            return
        backend = dispatch.backend_of_array(like)
        if backend is None or backend.sparse is None:
            name = "unknown" if backend is None else backend.name
            raise TypeError(
                f"solve_ivp: jac_sparsity needs the backend's sparse linear algebra (the contract's "
                f"``sparse`` field); backend {name!r} declares none"
            )
        self.support, self._bxp, self.like = backend.sparse, backend.xp, like
        indptr, indices, rows = self._host_structure
        self.diagonal = self._put((rows == indices).astype(np.float64))
        self._indices, self._indptr = self._put(indices, self._bxp.int64), self._put(indptr, self._bxp.int64)

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
        """The factors of ``I - h (A x J)``, the stages' Newton matrix (row-major ``(3, n)`` stages); ``J``
        the CSR matrix or its values."""
        if self._radau is None:
            self._radau = self._kron_structure(A)
        data_index, coefficient, diagonal, indices, indptr = self._radau
        values = getattr(J, "data", J)
        data = diagonal - h * coefficient * self._bxp.take(values, data_index)
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

    # ---------------------------------------------------------------------------- under a transform

    def traced_values(self, t, y):
        """``df/dy``'s CSR values at ``(t, y)`` in polyad ops (``y`` may be a tensor of a transform; not
        differentiated): the products ``J @ seeds`` by ``pa.jacfwd`` along the colours, read at each
        non-zero (``n_colors`` JVPs, no ``n x n`` array)."""
        xp = polyad_xp
        device = getattr(y, "device", None)
        seeds_T = xp.asarray(self._seeds_T.tolist(), dtype=y.dtype, device=device)
        zeros = xp.zeros((seeds_T.shape[1],), dtype=y.dtype, device=device)
        products = jacfwd(lambda w: self.problem_rhs(t, y + seeds_T @ w))(zeros)
        return xp.take(xp.reshape(products, (-1,)), xp.asarray(self._read, device=device))

    def factor(self, kind, values, a, b, A=None):
        """The factors of ``a I + b J`` (``kind`` "shifted") or of ``I + b (A x J)`` ("radau", ``a``
        unused) from ``J``'s CSR ``values``, on concrete arrays (inside a kernel); the last one of each
        kind is kept and reused while ``a``, ``b`` and the values are the same."""
        values, a, b = self.concrete(values), float(self.concrete(a)), float(self.concrete(b))
        self._bind(values)
        kept = self._kept.get(kind)
        if kept is not None and kept[:2] == (a, b) and bool(self._bxp.all(kept[2] == values)):
            return kept[3]
        if kind == "radau":
            made = self.radau(values, -b, A)
        else:
            csr = self.support.csr(a * self.diagonal + b * values, self._indices, self._indptr, (self.n,) * 2)
            made = self.support.splu(csr)
        self._kept[kind] = (a, b, values, made)
        return made

    def concrete(self, value):
        """``value`` as a plain array, or ``TypeError`` for a tensor: a batch of values (vmap), which
        vmap's per-example loop then hands over one at a time."""
        value = plain(value)  # an array made inside the kernel comes as a FreshTensor
        if isinstance(value, Tensor):
            raise TypeError(
                "solve_ivp: a sparse factorisation (jac_sparsity) needs one example's concrete values, got a "
                f"{type(value).__name__}; vmap runs it per example"
            )
        return value

    def traced_shifted_solve(self, values, a, b, rhs):
        """``x`` solving ``(a I + b J) x = rhs`` with ``J``'s CSR ``values`` (tensors of a transform, not
        differentiated: the error estimate's) by ``pa.custom_linear_solve``: the sparse LU in its kernel,
        the matrix-vector product in polyad ops for its derivatives."""
        xp = polyad_xp
        device = getattr(rhs, "device", None)
        indptr, indices, _ = self._host_structure
        columns = xp.asarray(indices, device=device)
        starts, ends = xp.asarray(indptr[:-1], device=device), xp.asarray(indptr[1:], device=device)

        def matvec(v):
            sums = xp.cumulative_sum(values * xp.take(v, columns), include_initial=True)
            return a * v + b * (xp.take(sums, ends) - xp.take(sums, starts))

        def solve(_, v):
            return self.factor("shifted", values, a, b).solve(self.concrete(v))

        return custom_linear_solve(matvec, rhs, solve, transpose_solve=self._transpose_unavailable)

    @staticmethod
    def _transpose_unavailable(_, v):
        raise TypeError(
            "solve_ivp: the error estimate's sparse solve has no derivative (its inputs carry none)"
        )

    def solve_linear(self, g, b, blocks):
        """``x`` solving ``g(x) = b`` for a linear ``g`` of ``(blocks, n)`` (``blocks`` 1: of ``(n,)``)
        arrays: ``dG/dZ`` of a Newton system at its root or its transpose (a tangent or adjoint solve),
        whose pattern lies in ``blocks x blocks`` copies of ``J``'s pattern and its transpose. Its CSR
        values come from ``g`` along the colours of that pattern (``pa.jacfwd`` along them: one batched
        call), factorised by the sparse LU: no dense matrix."""
        b = self.concrete(b)
        self._bind(b)
        seeds_T, read, indices, indptr = self._tangent_structure(blocks)
        shape = (self.n,) if blocks == 1 else (blocks, self.n)
        bxp, size = self._bxp, blocks * self.n
        zeros = bxp.zeros((seeds_T.shape[1],), dtype=b.dtype, device=b.device)
        products = jacfwd(lambda w: polyad_xp.reshape(g(polyad_xp.reshape(seeds_T @ w, shape)), (size,)))(
            zeros
        )
        data = bxp.take(bxp.reshape(self.concrete(products), (-1,)), read)
        lu = self.support.splu(self.support.csr(data, indices, indptr, (size, size)))
        return bxp.reshape(lu.solve(bxp.reshape(b, (size,))), shape)

    def _tangent_structure(self, blocks):
        if blocks not in self._tangent:
            sp, _ = scipy_sparse_modules()
            both = (self._host_pattern + self._host_pattern.T).astype(bool)
            pattern = sp.csr_array(sp.kron(np.ones((blocks, blocks), dtype=bool), both).astype(bool))
            pattern.sort_indices()
            coloured = sparse_jacfwd(lambda v: v, sparsity=pattern)
            colors, k, size = np.asarray(coloured.colors), coloured.n_colors, blocks * self.n
            structure = coloured.sparsity
            indptr, indices = np.asarray(structure.indptr), np.asarray(structure.indices)
            rows = np.repeat(np.arange(size), np.diff(indptr))
            seeds_T = np.zeros((size, k))  # products = G @ seeds_T: column c is g(seed c)
            seeds_T[np.arange(size), colors] = 1.0
            read = self._put(rows * k + colors[indices], self._bxp.int64)
            self._tangent[blocks] = (
                self._put(seeds_T),
                read,
                self._put(indices, self._bxp.int64),
                self._put(indptr, self._bxp.int64),
            )
        return self._tangent[blocks]
