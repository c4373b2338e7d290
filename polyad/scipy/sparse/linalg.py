"""SciPy's sparse linear solves, differentiable: ``spsolve``, ``splu``/``factorized`` (factorised
solves), and the Krylov methods ``cg``, ``gmres`` and ``bicgstab``, with ``scipy.sparse.linalg``'s
signatures, through ``polyad.custom_linear_solve``.

The solve runs on the primal values, by the sparse linear algebra the arrays' backend declares (the
``sparse`` field of the backend contract, ``polyad.backends``): SciPy for NumPy arrays,
``cupyx.scipy.sparse.linalg`` on the GPU for CuPy arrays (the tolerance passed under the name each
installed solver takes, ``rtol`` or the older ``tol``), SciPy on deliberate host copies for
array_api_strict and Dask arrays. The solution is differentiable with respect to ``b`` and, for the
Krylov methods, to whatever the operator depends on: ``A`` may be a SciPy sparse matrix or
``LinearOperator`` (a constant), a dense array (differentiable), or a function ``matvec(v)`` written
with polyad that closes over parameters
(differentiable with respect to them). The adjoint is the transposed solve: ``spsolve`` and ``splu``
factorise once and solve the transposed system with the same factors (one factorisation per
``value_and_grad``); ``cg`` assumes a symmetric ``A`` and ``M`` (its adjoint is ``cg`` again).

A Krylov solve that did not converge (``info != 0``) returns its result as SciPy does, but every
derivative of it raises ``SolverNotConvergedError`` (``on_failure="warn"``: a warning). The right-hand
sides are scaled to unit size before the solve, so that a tiny cotangent (1e-13 in float32) converges as
one of size 1.

Example:
    >>> import numpy as np, scipy.sparse as sp, polyad as pa
    >>> from polyad.scipy.sparse import linalg
    >>> A = sp.csr_matrix(np.array([[4.0, 1.0], [1.0, 3.0]]))
    >>> np.allclose(pa.jacrev(lambda b: linalg.spsolve(A, b))(np.ones(2)), np.linalg.inv(A.toarray()))
    True
"""

import polyad.core.dispatch as dispatch
import polyad.xp as xp
from polyad.api.sparsity import sparse_owner
from polyad.backends.host import np
from polyad.core import Op, Tensor, bind, plain
from polyad.core.avals import ShapeDtype, bottom, is_complex, shape_of
from polyad.custom.implicit import custom_linear_solve
from polyad.ops.base import moveaxis, reshape
from polyad.scipy.solver_support import (
    Convergence,
    SolverNotConvergedError,
    SolverNotConvergedWarning,
    krylov,
    sparse_support,
)
from polyad.transforms.batching import BatchedTensor
from polyad.transforms.sparsity import SPARSITY
from polyad.transforms.sparsity_rules import ALL, scipy_sparse

# ------------------------------------------------------------------------------ a constant operator as an op


def _support_of_matrix(matrix):
    """The sparse support (contract field) of the backend whose library made ``matrix``: cupyx's for a
    cupyx matrix, else NumPy's (SciPy's matrices and operators)."""
    return sparse_owner(matrix) or dispatch.load_backend("numpy").sparse


def _apply(matrix, v):
    """``matrix @ v`` on a backend array ``v`` (1-D or 2-D), by ``v``'s backend's sparse support: on the
    device for a cupyx matrix, SciPy's on host arrays for NumPy."""
    return sparse_support(dispatch.backend_of_array(v), "polyad.sparse.linalg").matvec(matrix, v)


def _kernel(xp_, v, *, matrix):
    return _apply(matrix, plain(v))


def _abstract(xp_, v, *, matrix):
    return ShapeDtype((matrix.shape[0], *tuple(v.shape)[1:]), v.dtype, getattr(v, "device", None))


def _adjoint(matrix):
    """The conjugate transpose of a SciPy/CuPy sparse matrix or LinearOperator."""
    return matrix.H if hasattr(matrix, "H") and not hasattr(matrix, "tocsr") else matrix.conj().T


def _vjp(g, out, v, *, matrix):
    return (bind(OPERATOR_MATVEC, g, matrix=_adjoint(matrix)),)


def _batch(info, dims, v, *, matrix):
    (d,) = dims
    moved = moveaxis(v, d, -1)  # (n, ..., B): the batch is more columns
    shape = tuple(shape_of(moved))
    flat = reshape(moved, (shape[0], -1))
    out = bind(OPERATOR_MATVEC, flat, matrix=matrix)
    return reshape(out, (matrix.shape[0], *shape[1:])), len(shape) - 1


def _sparsity(traced, out, v, *, matrix):
    """Output element (i, ...) depends on v's (j, ...) where ``matrix[i, j]`` is stored (a sparse
    matrix, 1-D ``v``); every element on every element otherwise (a LinearOperator)."""
    if not hasattr(matrix, "tocsr") or len(tuple(v.shape)) != 1:
        return (ALL,)
    csr = _support_of_matrix(matrix).to_scipy(matrix).tocsr()  # the pattern, on the host
    return (scipy_sparse().csr_array((np.ones(len(csr.indices), np.float32), csr.indices, csr.indptr),
                                     shape=csr.shape),)  # fmt: skip


OPERATOR_MATVEC = Op(
    "sparse_operator_matvec",
    _kernel,
    linear=True,  # in v: the JVP is the op on the tangent
    abstract_eval=_abstract,
    vjp=_vjp,
    batch=_batch,
)
OPERATOR_MATVEC.register_rule(SPARSITY, _sparsity)


def operator_matvec(matrix, v):
    """``matrix @ v`` for a constant SciPy (or CuPy) sparse matrix or ``LinearOperator`` and a polyad
    value ``v`` (1-D, or 2-D for several right-hand sides): an op, linear in ``v``, differentiable and
    batched (a batch is more columns).

    Args:
        matrix: the operator (a constant: its entries carry no derivative).
        v: a 1-D or 2-D array.

    Returns:
        ``matrix @ v``, an array of ``v``'s library.

    Example:
        >>> import numpy as np, scipy.sparse as sp, polyad as pa
        >>> from polyad.scipy.sparse import linalg
        >>> A = sp.csr_matrix(np.array([[1.0, 2.0], [0.0, 3.0]]))
        >>> pa.jacrev(lambda v: linalg.operator_matvec(A, v))(np.ones(2))
        array([[1., 2.],
               [0., 3.]])
    """
    return bind(OPERATOR_MATVEC, v, matrix=matrix)


def _matvec_of(A, where):
    """A function ``v -> A v`` for what the solvers accept as ``A``."""
    if callable(A) and not hasattr(A, "shape"):
        return A  # a polyad function (it may close over differentiable parameters)
    if isinstance(A, Tensor) or dispatch.backend_of_array(A) is not None:
        return lambda v: A @ v  # a dense array (differentiable)
    if hasattr(A, "shape") and (hasattr(A, "matvec") or hasattr(A, "tocsr")):
        return lambda v: operator_matvec(A, v)
    raise TypeError(
        f"{where}: A must be a SciPy (or CuPy) sparse matrix or LinearOperator, a dense array, or a function "
        f"matvec(v) written with polyad; got {type(A).__name__}"
    )


# ------------------------------------------------------------------------------ direct solves


class FactorizedSolve:
    """A sparse LU factorisation (the backend's ``splu``: SciPy's SuperLU, or cupyx's for CuPy) whose
    ``solve`` is differentiable with respect to the right-hand side; the adjoint solve reuses the factors
    (``trans="T"``). ``A`` is a constant. It is factorised once by the library that made it, and once more
    for right-hand sides of another backend (array_api_strict's: SciPy's factors with host copies)."""

    def __init__(self, A, **options):
        self.A = A
        self.shape = A.shape
        self.options = options
        support = _support_of_matrix(A)
        self.factors = {id(support): support.splu(A, **options)}

    def _solve_raw(self, b, trans):
        if isinstance(b, BatchedTensor):  # under vmap (jacrev's basis): the examples are more columns
            moved = moveaxis(b._value, b._aux, -1)
            shape = tuple(shape_of(moved))
            out = self._solve_raw(reshape(moved, (shape[0], -1)), trans)
            return BatchedTensor(reshape(out, shape), b._interp, len(shape) - 1)
        b = plain(b)
        support = sparse_support(dispatch.backend_of_array(b), "polyad.sparse.linalg.splu")
        lu = self.factors.get(id(support))
        if lu is None:
            lu = self.factors[id(support)] = support.splu(self.A, **self.options)
        return lu.solve(b, trans=trans)

    def solve(self, rhs, trans="N"):
        """``x`` with ``A x = rhs`` (``trans="T"``: ``A^T x = rhs``), differentiable with respect to ``rhs``.

        Args:
            rhs: a 1-D or 2-D array (a polyad value inside transforms).
            trans: "N" or "T" ("H" for the conjugate transpose), as SciPy's.

        Returns:
            The solution, an array of ``rhs``'s shape.
        """
        if trans not in ("N", "T", "H"):
            raise ValueError(f"FactorizedSolve.solve: trans must be 'N', 'T' or 'H', got {trans!r}")
        matrix = {"N": self.A, "T": self.A.T, "H": _adjoint(self.A)}[trans]

        def solve(mv, b):
            return self._solve_raw(b, trans)

        def transpose_solve(mv, b):
            # the adjoint system (polyad's pullbacks are conjugate transposes), with the same factors:
            # (A)^H -> "H", (A^H)^H -> "N", (A^T)^H = conj(A) -> conj(solve(conj(b)))
            if trans == "T":
                return _conj(self._solve_raw(_conj(b), "N"))
            return self._solve_raw(b, "H" if trans == "N" else "N")

        return custom_linear_solve(lambda v: operator_matvec(matrix, v), rhs, solve, transpose_solve)

    def __call__(self, rhs):
        return self.solve(rhs)


def _conj(x):
    return xp.conj(x) if is_complex(x) else x


def splu(A, permc_spec=None, diag_pivot_thresh=None, relax=None, panel_size=None, options=None):
    """An LU factorisation of the sparse ``A`` for differentiable solves, as ``scipy.sparse.linalg.splu``.

    Args:
        A: a SciPy (or CuPy) sparse matrix (a constant). The other arguments are SciPy's.

    Returns:
        A ``FactorizedSolve``: ``lu.solve(rhs, trans="N")``, differentiable with respect to ``rhs``.

    Example:
        >>> import numpy as np, scipy.sparse as sp, polyad as pa
        >>> from polyad.scipy.sparse import linalg
        >>> lu = linalg.splu(sp.csc_matrix(np.array([[2.0, 0.0], [1.0, 4.0]])))
        >>> pa.grad(lambda b: pa.xp.sum(lu.solve(b)))(np.ones(2))  # A^-T 1
        array([0.375, 0.25 ])
    """
    options_ = dict(permc_spec=permc_spec, diag_pivot_thresh=diag_pivot_thresh, relax=relax,
                    panel_size=panel_size, options=options)  # fmt: skip
    return FactorizedSolve(A, **{k: v for k, v in options_.items() if v is not None})


def factorized(A):
    """``solve(b)`` for the sparse ``A``, factorised once, as ``scipy.sparse.linalg.factorized``;
    differentiable with respect to ``b``.

    Args:
        A: a SciPy (or CuPy) sparse matrix (a constant).

    Returns:
        ``solve(b)``, the solution of ``A x = b`` for each ``b`` it is given (the same factors each time).

    Example:
        >>> import numpy as np, scipy.sparse as sp, polyad as pa
        >>> from polyad.scipy.sparse import linalg
        >>> solve = linalg.factorized(sp.csc_matrix(np.array([[2.0, 0.0], [0.0, 4.0]])))
        >>> pa.jacfwd(solve)(np.ones(2))
        array([[0.5 , 0.  ],
               [0.  , 0.25]])
    """
    return FactorizedSolve(A).solve


def spsolve(A, b, permc_spec=None, use_umfpack=True):
    """``x`` with ``A x = b`` for a sparse ``A``, as ``scipy.sparse.linalg.spsolve``, differentiable with
    respect to ``b``. One LU factorisation serves the solve and its adjoint (``use_umfpack`` is accepted
    and ignored: SuperLU factorises).

    Args:
        A: a SciPy (or CuPy) sparse matrix (a constant).
        b: a 1-D or 2-D array.
        permc_spec: as SciPy's.

    Returns:
        The solution.

    Example:
        >>> import numpy as np, scipy.sparse as sp, polyad as pa
        >>> from polyad.scipy.sparse import linalg
        >>> A = sp.csr_matrix(np.array([[2.0, 1.0], [0.0, 4.0]]))
        >>> pa.grad(lambda b: pa.xp.sum(linalg.spsolve(A, b)))(np.ones(2))  # A^-T 1
        array([0.5  , 0.125])
    """
    del use_umfpack
    return splu(A, permc_spec=permc_spec).solve(b)


# ------------------------------------------------------------------------------ Krylov solves


def _krylov_solve(method, A, b, x0, rtol, atol, maxiter, M, on_failure, symmetric):
    where = f"polyad.sparse.linalg.{method}"
    matvec = _matvec_of(A, where)
    convergence = Convergence(where, on_failure)

    def run(mv, rhs, precond, derivative):
        start = None if derivative else x0
        x, info = krylov(method, mv, rhs, rtol=rtol, atol=atol, maxiter=maxiter,
                         M=precond, x0=start, where=where)  # fmt: skip
        if derivative and info != 0:
            convergence.record(False, f"its derivative's solve did not converge: info={info}")
            convergence.check()
        elif not derivative:
            convergence.record(info == 0, f"info={info}")
        return x, xp_int(info, x)

    def solve(mv, rhs):
        return run(mv, rhs, M, False)

    def derivative_solve(mv, rhs):
        convergence.check()
        return run(mv, rhs, M, True)

    def transpose_solve(vm, rhs):
        convergence.check()
        # the adjoint's preconditioner: M^H where M has one (a function M: none; the solve is still exact)
        transposed = (M.H if hasattr(M, "H") else M.T) if M is not None and hasattr(M, "T") else None
        return run(vm, rhs, transposed, True)

    solve.derivative = derivative_solve
    transpose_solve.derivative = transpose_solve
    transpose = None if symmetric else transpose_solve
    return custom_linear_solve(matvec, b, solve, transpose, symmetric=symmetric, has_aux=True)


def xp_int(info, like):
    """SciPy's integer ``info`` as a 0-d integer array of ``like``'s backend (the solve's aux output)."""
    backend = dispatch.backend_of_array(plain(bottom(like))) or dispatch.default_backend()
    return backend.xp.asarray(int(info))


def cg(A, b, x0=None, *, rtol=1e-05, atol=0.0, maxiter=None, M=None, callback=None, on_failure="raise"):
    """Conjugate gradients for a symmetric positive definite ``A``, as ``scipy.sparse.linalg.cg``,
    differentiable at the solution (its adjoint is ``cg`` on the same system).

    Args:
        A: a SciPy/CuPy sparse matrix or LinearOperator, a dense array, or a function ``matvec(v)`` written
            with polyad (differentiable with respect to what it closes over).
        b: the right-hand side (differentiable). x0: the starting point (no derivative).
        rtol, atol, maxiter: as SciPy's. M: the preconditioner (SciPy's object, or a function of arrays);
            symmetric, as ``A``. callback: not supported (None).
        on_failure: "raise" or "warn": what a derivative does when ``info != 0``.

    Returns:
        ``(x, info)``, as SciPy's (``info`` a 0-d integer array).

    Example:
        >>> import numpy as np, polyad as pa
        >>> from polyad.scipy.sparse import linalg
        >>> K = np.array([[4.0, 1.0], [1.0, 3.0]])
        >>> def x_of(k):  # A(k) = K + k I
        ...     return linalg.cg(lambda v: K @ v + k * v, np.ones(2), rtol=1e-12)[0]
        >>> np.allclose(pa.jacfwd(x_of)(np.float64(1.0)), -np.linalg.solve(K + np.eye(2), x_of(1.0)))
        True
    """
    _no_callback(callback, "cg")
    return _krylov_solve("cg", A, b, x0, rtol, atol, maxiter, M, on_failure, True)


def gmres(A, b, x0=None, *, rtol=1e-05, atol=0.0, restart=None, maxiter=None, M=None, callback=None,
          callback_type=None, on_failure="raise"):  # fmt: skip
    """GMRES, as ``scipy.sparse.linalg.gmres``, differentiable at the solution (its adjoint is GMRES on
    ``A^T``).

    Args:
        A, b, x0, rtol, atol, maxiter, M, callback, on_failure: as ``cg``'s (``A`` need not be symmetric).
        restart, callback_type: accepted; SciPy's defaults are used.

    Returns:
        ``(x, info)``, as SciPy's (``info`` a 0-d integer array).

    Example:
        >>> import numpy as np, polyad as pa
        >>> from polyad.scipy.sparse import linalg
        >>> A = np.array([[3.0, 1.0], [-1.0, 2.0]])
        >>> J = pa.jacrev(lambda b: linalg.gmres(A, b, rtol=1e-12)[0])(np.ones(2))
        >>> np.allclose(J, np.linalg.inv(A))
        True
    """
    _no_callback(callback, "gmres")
    del restart, callback_type
    return _krylov_solve("gmres", A, b, x0, rtol, atol, maxiter, M, on_failure, False)


def bicgstab(A, b, x0=None, *, rtol=1e-05, atol=0.0, maxiter=None, M=None, callback=None, on_failure="raise"):
    """BiCGSTAB, as ``scipy.sparse.linalg.bicgstab``, differentiable at the solution (its adjoint is
    BiCGSTAB on ``A^T``).

    Args:
        A, b, x0, rtol, atol, maxiter, M, callback, on_failure: as ``cg``'s (``A`` need not be symmetric).

    Returns:
        ``(x, info)``, as SciPy's (``info`` a 0-d integer array).

    Example:
        >>> import numpy as np, polyad as pa
        >>> from polyad.scipy.sparse import linalg
        >>> A = np.array([[3.0, 1.0], [-1.0, 2.0]])
        >>> J = pa.jacfwd(lambda b: linalg.bicgstab(A, b, rtol=1e-12)[0])(np.ones(2))
        >>> np.allclose(J, np.linalg.inv(A))
        True
    """
    _no_callback(callback, "bicgstab")
    return _krylov_solve("bicgstab", A, b, x0, rtol, atol, maxiter, M, on_failure, False)


def _no_callback(callback, name):
    if callback is not None:
        raise NotImplementedError(
            f"polyad.sparse.linalg.{name}: callback is not supported (it would see host copies)"
        )


__all__ = [
    "FactorizedSolve",
    "SolverNotConvergedError",
    "SolverNotConvergedWarning",
    "bicgstab",
    "cg",
    "factorized",
    "gmres",
    "operator_matvec",
    "splu",
    "spsolve",
]
