"""What ``polyad.optimize`` and ``polyad.sparse.linalg`` share: host copies for SciPy, a record of the
solver's convergence that every derivative consults, and the tangent solves ``linear_solver=`` names.

A derivative at a point that is not a solution would be wrong with no sign of it, so every tangent or
adjoint solve first asks ``Convergence.check``: if the solver did not converge it raises
``SolverNotConvergedError`` with the solver's message (or warns, with ``on_failure="warn"``).
"""

import warnings

import polyad.core.dispatch as dispatch
import polyad.xp as xp
from polyad.api.jacobians import jacfwd
from polyad.api.sparse import sparse_jacfwd
from polyad.core import ConcretizationError, plain
from polyad.core.avals import bottom, shape_of
from polyad.custom.implicit import SolverNotConvergedError  # one class: custom_root raises it too

LINEAR_SOLVERS = ("dense", "sparse", "cg", "gmres", "bicgstab")
ON_FAILURE = ("raise", "warn")


class SolverNotConvergedWarning(UserWarning):
    """A derivative was computed at a solver's result that is not a solution (``on_failure="warn"``)."""


def to_host(x):
    """A backend array (or a FreshTensor of one) as a NumPy array, for SciPy."""
    x = plain(x)
    backend = dispatch.backend_of_array(x)
    return x if backend is None else backend.to_numpy(x)


def from_host(values, like):
    """NumPy ``values`` as an array of ``like``'s backend, dtype and device (SciPy's results go back to
    the device the inputs came from)."""
    backend = dispatch.backend_of_array(bottom(like)) or dispatch.default_backend()
    return backend.xp.asarray(values, dtype=like.dtype, device=getattr(like, "device", None))


def check_callable(fn, name, where):
    if not callable(fn):
        raise TypeError(f"{where}: {name} must be callable, got {type(fn).__name__}")


def check_choice(value, choices, name, where):
    if not (isinstance(value, str) and value in choices) and not (
        name == "linear_solver" and callable(value)
    ):
        extra = " or a callable linear_solver(matvec, b)" if name == "linear_solver" else ""
        raise ValueError(f"{where}: {name} must be one of {choices}{extra}, got {value!r}")


class Convergence:
    """The primal solver's outcome, kept for its derivatives: ``record(ok, message)`` after each solve
    (vmap's per-example loop records one per example); ``check()`` before each derivative. The first
    record after a check starts a new evaluation (``pa.jit`` reuses one record for every call)."""

    def __init__(self, where, on_failure):
        check_choice(on_failure, ON_FAILURE, "on_failure", where)
        self.where, self.on_failure = where, on_failure
        self.failures = []
        self.checked = False

    def record(self, ok, message):
        if self.checked:  # a new evaluation (a compiled function solves again at every call)
            self.failures.clear()
            self.checked = False
        if not ok:
            self.failures.append(str(message))

    def check(self):
        self.checked = True
        if not self.failures:
            return
        text = (
            f"{self.where} did not converge ({self.failures[-1]}); its result is not a solution, so the "
            "implicit derivative at it would be wrong"
        )
        if self.on_failure == "warn":
            warnings.warn(text, SolverNotConvergedWarning, stacklevel=3)
        else:
            raise SolverNotConvergedError(text + ' (on_failure="warn" computes it anyway, with a warning)')


def sparse_support(backend, where):
    """``backend``'s sparse linear algebra (its contract's ``sparse`` field): SciPy for NumPy, cupyx for
    CuPy, SciPy on deliberate host copies for array_api_strict and Dask; a clear error for a backend
    without one."""
    support = backend.sparse
    if support is None:
        raise TypeError(
            f"{where}: backend {backend.name!r} declares no sparse linear algebra (the ``sparse`` field of "
            "its backend contract, see polyad.backends), so its arrays cannot be solved for here"
        )
    return support


def krylov(method, matvec, b, *, rtol=1e-10, atol=0.0, maxiter=None, M=None, x0=None, where="a Krylov solve"):
    """``(x, info)``: ``method`` ("cg", "gmres", "bicgstab") on ``matvec`` (a function of arrays of
    ``b``'s shape and backend), by ``b``'s backend's Krylov solvers (its contract's ``sparse.krylov``:
    SciPy's for NumPy, cupyx's on the GPU for CuPy, each given the tolerance under its own keyword). ``M``:
    None, the library's matrix or operator, or a function of arrays of ``b``'s shape. The right-hand side
    is scaled to unit size first, so that a tiny one (a cotangent of 1e-13 in float32) converges as one of
    size 1 does (``rtol`` and ``atol`` refer to the unscaled system)."""
    b = plain(b)
    backend = dispatch.backend_of_array(b)
    if backend is None:  # a transform's value (vmap): the caller runs the solve per example
        raise ConcretizationError(f"{where} runs on plain arrays, got a {type(b).__name__}")
    support = sparse_support(backend, where)
    bxp = backend.xp
    shape, n = tuple(shape_of(b)), 1
    for s in shape:
        n *= s
    scale = float(bxp.max(bxp.abs(b))) if n else 0.0
    if scale == 0.0 or scale != scale:
        return bxp.zeros_like(b), 0

    def flat(f):  # a function of arrays of b's shape as one of vectors
        return lambda v: bxp.reshape(plain(f(bxp.reshape(v, shape))), (n,))

    if M is not None and callable(M) and not hasattr(M, "shape"):
        M = flat(M)
    rhs = bxp.reshape(b, (n,)) / scale
    start = None if x0 is None else bxp.reshape(plain(x0), (n,)) / scale
    x, info = support.krylov(
        method, flat(matvec), rhs, x0=start, rtol=rtol, atol=atol / scale, maxiter=maxiter, M=M
    )
    return bxp.reshape(x * scale, shape), int(info)


def sparse_direct(g, y, where):
    """``g(x) = y`` solved by the sparse Jacobian of ``g`` (``sparse_jacfwd``: its pattern found by the
    sparsity transform, one JVP per colour) and ``y``'s backend's direct sparse solve (SciPy's SuperLU;
    cupyx's ``spsolve`` on the GPU)."""
    y = plain(y)
    backend = dispatch.backend_of_array(y)
    if backend is None:  # vmap: the caller runs the solve per example
        raise ConcretizationError(f"{where}: a sparse tangent solve runs on plain arrays")
    support = sparse_support(backend, where)
    shape, n = tuple(shape_of(y)), 1
    for s in shape:
        n *= s

    def g_flat(v):
        return xp.reshape(g(xp.reshape(v, shape)), (n,))

    flat = xp.reshape(y, (n,))
    jac = sparse_jacfwd(g_flat)(flat)
    return xp.reshape(support.spsolve(jac, flat), shape)


def tangent_solver(linear_solver, convergence, where):
    """``tangent_solve(g, y)`` for ``custom_root``: solves ``g(x) = y`` for a linear ``g`` on arrays of
    ``y``'s shape, after checking the primal solve converged. "dense": the Jacobian of ``g`` (by
    ``jacfwd``) and ``xp.linalg.solve``; "sparse": its sparse Jacobian (``sparse_jacfwd``) and SuperLU;
    "cg" (a symmetric ``g``: a Hessian), "gmres", "bicgstab":
    matrix-free Krylov solves (``krylov``); a callable: ``linear_solver(g, y)``."""

    def solve(g, y):
        convergence.check()
        if callable(linear_solver):
            return linear_solver(g, y)
        shape = tuple(shape_of(y))
        if linear_solver == "sparse":
            return sparse_direct(g, y, where)
        if linear_solver == "dense":
            n = 1
            for s in shape:
                n *= s
            flat = xp.reshape(y, (n,))

            def g_flat(v):
                return xp.reshape(g(xp.reshape(v, shape)), (n,))

            jac = jacfwd(g_flat)(flat)
            if n == 1:
                return xp.reshape(flat / xp.reshape(jac, (1,)), shape)
            return xp.reshape(xp.linalg.solve(jac, flat), shape)
        x, info = krylov(linear_solver, g, y, where=where)
        if info != 0:
            raise SolverNotConvergedError(
                f"{where}: the {linear_solver} tangent solve did not converge (info={info}); use "
                'linear_solver="dense" or a preconditioned callable'
            )
        return x

    return solve
