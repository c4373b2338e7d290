"""SciPy's optimisers and root finders, differentiable at their solution: ``root_scalar``, ``root``,
``fixed_point``, ``minimize`` and ``least_squares``, with ``scipy.optimize``'s signatures and result
objects.

SciPy runs on the primal values (host copies; CuPy arrays are copied to the host too, deliberately:
``cupyx.scipy`` has no optimisers, and ``polyad.backends.host_copies`` counts the copies; the solution
and the arrays of SciPy's report, ``fun``, ``jac``, ``grad``, are copied back to the inputs' library and
device), with the function's derivatives from polyad where SciPy takes them (``jac``, ``fprime``, ``hess``)
unless given. The solution (``.root``, ``.x``, or ``fixed_point``'s result) is a polyad value
differentiable with respect to ``args`` (and anything the function closes over) by the implicit function
theorem (``polyad.custom_root``): one linear solve at the solution, whatever SciPy did, and to every order
(``hessian``). ``x0`` carries no derivative. A solver that did not converge makes every derivative raise
``SolverNotConvergedError`` with SciPy's message (``on_failure="warn"``: a warning instead); the primal
result comes back as SciPy gives it. The tangent system is solved densely (``linear_solver="dense"``: the
Jacobian by ``jacfwd``), by a sparse direct solve (``"sparse"``: the Jacobian by ``sparse_jacfwd``,
factorised by SuperLU), or matrix-free (``"cg"``, ``"gmres"``, ``"bicgstab"``, or a callable
``linear_solver(matvec, b)``). ``root(method="newton_krylov")`` is polyad's own solver instead of SciPy's:
Jacobian-free Newton-Krylov on the inputs' device (``pa.jvp`` products, the backend's GMRES).

Example:
    >>> import numpy as np, polyad as pa
    >>> from polyad.scipy import optimize
    >>> def root_of(a, b):
    ...     return optimize.root_scalar(lambda x, a, b: x**3 + a * x - b, args=(a, b), bracket=(0.0, 2.0),
    ...                                 method="brentq", xtol=1e-14).root
    >>> [round(float(d), 10) for d in pa.grad(root_of, argnums=(0, 1))(np.float64(1.0), np.float64(2.0))]
    [-0.25, 0.25]
"""

import math

import polyad.core.dispatch as dispatch
from polyad.api.grad import grad
from polyad.api.jacobians import jacfwd
from polyad.api.jvp import jvp
from polyad.api.sparse import sparse_jacfwd
from polyad.api.sparsity import jacobian_sparsity
from polyad.backends.host import np
from polyad.core import ConcretizationError, Tensor, plain
from polyad.core.avals import bottom, is_array, is_floating
from polyad.custom.implicit import ImplicitError, custom_root
from polyad.scipy.solver_support import (
    LINEAR_SOLVERS,
    Convergence,
    SolverNotConvergedError,
    SolverNotConvergedWarning,
    check_callable,
    check_choice,
    from_host,
    krylov,
    sparse_support,
    tangent_solver,
    to_host,
)
from polyad.xp import asarray, float64, reshape

# custom_root's residual test off: SciPy's report judges convergence (a Convergence, with on_failure)
JUDGED = math.inf

# scipy.optimize's methods for root_scalar that use f' (newton without fprime is the secant method)
_NEEDS_FPRIME = ("newton", "halley")


def _as_float_array(x, like=None):
    """``x`` (a Python number, a NumPy or backend array, a tensor) as an array of a floating dtype."""
    if is_array(x):
        if like is not None and not isinstance(x, Tensor):
            owner, wanted = dispatch.backend_of_array(x), dispatch.backend_of_array(bottom(like))
            if wanted is not None and owner is not wanted:  # a NumPy x0 for array_api_strict arguments
                return from_host(to_host(x), like)
        return x if is_floating(x) else asarray(x, dtype=float64)
    if like is not None and hasattr(like, "dtype") and is_floating(like):  # like's library, dtype and device
        return asarray(x, dtype=like.dtype, device=like.device)
    return asarray(x, dtype=float64)


def _dtype_source(args, x0):
    """The floating array whose dtype the solution takes: ``x0`` if it is an array, else the first
    floating array among ``args``."""
    if hasattr(x0, "dtype") and is_floating(x0):
        return x0
    for a in args:
        if hasattr(a, "dtype") and hasattr(a, "shape") and is_floating(a):
            return a
    return None


def _result(found, **solution):
    """SciPy's result object (the last solve's) with the differentiable solution in place of its own.
    Under ``pa.jit``'s tracing no solve has run: a result with the solution only, its report unknown."""
    if not found:
        import scipy.optimize as so  # noqa: PLC0415  (optional)

        return so.OptimizeResult(**solution, success=None, converged=None,
                                 message="traced by pa.jit: SciPy's report is not available")  # fmt: skip
    result = found[-1]
    for k, v in solution.items():
        setattr(result, k, v)
        try:
            result[k] = v  # OptimizeResult is a dict too
        except TypeError:
            pass
    return result


def _report_on_device(res, like):
    """SciPy's report ``res`` with its arrays (``fun``, ``jac``, ``grad``, ``active_mask``...) moved to the
    library and device of ``like`` (the inputs'), as the solution is: results follow their inputs. They
    stay SciPy's numbers (no derivative); NumPy inputs keep SciPy's arrays as they are."""
    backend = dispatch.backend_of_array(bottom(like))
    if backend is None or backend.host_arrays:
        return res
    for key, value in list(res.items()):
        if isinstance(value, np.ndarray) and key != "x":  # x: the solution, set by _result
            res[key] = backend.xp.asarray(value, device=getattr(like, "device", None))
    return res


# ------------------------------------------------------------------------------ root_scalar


def root_scalar(f, args=(), method=None, bracket=None, fprime=None, fprime2=None, x0=None, x1=None,
                xtol=None, rtol=None, maxiter=None, options=None, *, on_failure="raise"):  # fmt: skip
    """A root of a scalar function, as ``scipy.optimize.root_scalar``, differentiable at the root.

    Args:
        f: ``f(x, *args)``, written with polyad (``pa.xp`` or NumPy on the arguments).
        args: extra arguments; the root is differentiable with respect to them.
        method, bracket, x0, x1, xtol, rtol, maxiter, options: as SciPy's (``"brentq"``, ``"bisect"``,
            ``"newton"``, ...).
        fprime, fprime2: as SciPy's; a method that uses them ("newton", "halley") gets polyad's
            derivatives of ``f`` when they are not given.
        on_failure: "raise" (default) or "warn": what a derivative does if SciPy did not converge.

    Returns:
        SciPy's ``RootResults`` whose ``.root`` is a 0-d array (a traced value inside transforms).

    Example:
        >>> import numpy as np, polyad as pa
        >>> from polyad.scipy import optimize
        >>> cube_root = lambda a: optimize.root_scalar(lambda x, a: x**3 - a, args=(a,), x0=1.0,
        ...                                            method="newton").root
        >>> round(float(pa.grad(cube_root)(np.float64(8.0))), 10)  # 1 / (3 a^(2/3))
        0.0833333333
    """
    import scipy.optimize as so  # noqa: PLC0415  (optional)

    where = f"polyad.optimize.root_scalar({getattr(f, '__name__', 'f')})"
    check_callable(f, "f", where)
    args = args if isinstance(args, tuple) else (args,)
    convergence = Convergence(where, on_failure)
    like = _dtype_source(args, x0)
    start = x0 if x0 is not None else (0.5 * (bracket[0] + bracket[1]) if bracket is not None else 0.0)
    guess = _as_float_array(start, like)
    if len(getattr(guess, "shape", ())) != 0:
        raise ValueError(f"{where}: x0 must be a scalar, got shape {tuple(guess.shape)}")
    found = []

    def solve(residual, x):
        def host_f(z):
            return float(to_host(residual(from_host(z, x))))

        def host_fprime(z):
            return float(to_host(jacfwd(residual)(from_host(z, x))))

        def host_fprime2(z):
            return float(to_host(jacfwd(jacfwd(residual))(from_host(z, x))))

        kw = dict(method=method, bracket=bracket, x0=None if x0 is None else float(to_host(x)), x1=x1,
                  xtol=xtol, rtol=rtol, maxiter=maxiter, options=options)  # fmt: skip
        kw = {k: v for k, v in kw.items() if v is not None}
        given_fprime = _host_callable(fprime, x, args) if callable(fprime) else fprime
        given_fprime2 = _host_callable(fprime2, x, args) if callable(fprime2) else fprime2
        if method in _NEEDS_FPRIME or (method is None and x0 is not None and bracket is None):
            given_fprime = host_fprime if given_fprime is None else given_fprime
        if method == "halley" and given_fprime2 is None:
            given_fprime2 = host_fprime2
        if given_fprime is not None:
            kw["fprime"] = given_fprime
        if given_fprime2 is not None:
            kw["fprime2"] = given_fprime2
        res = so.root_scalar(host_f, **kw)
        convergence.record(res.converged, res.flag)
        found[:] = [res]  # the last solve's report (a compiled function solves at every call)
        return from_host(np.asarray(res.root), x)

    root = custom_root(
        lambda x: f(x, *args), guess, solve, tangent_solver("dense", convergence, where), residual_rtol=JUDGED
    )
    return _result(found, root=root)


def _host_callable(fn, like, args):
    """A user's ``fprime(x, *args)`` (polyad code) called by SciPy on host floats."""

    def host(z):
        return float(to_host(fn(from_host(z, like), *args)))

    return host


# ------------------------------------------------------------------------------ vector roots


def _vector_problem(x0, args, where):
    like = _dtype_source(args, None)
    guess = _as_float_array(x0, _dtype_source((), x0) if like is None else like)
    return guess, tuple(guess.shape)


def root(fun, x0, args=(), method="hybr", jac=None, tol=None, callback=None, options=None, *,
         linear_solver=None, on_failure="raise"):  # fmt: skip
    """A root of a vector function, as ``scipy.optimize.root``, differentiable at the root.

    ``method="newton_krylov"`` is polyad's own Jacobian-free Newton-Krylov solver, on the inputs'
    device: each Newton step solves ``J dx = -fun(x)`` by GMRES (the backend's, its contract's
    ``sparse.krylov``: SciPy's for NumPy, cupyx's for CuPy) with ``J v`` from ``pa.jvp``, never forming
    ``J``; then a backtracking line search on ``max|fun|``. Its ``options``: "maxiter" (Newton steps, 50),
    "inner_maxiter" (GMRES iterations per step, 200), "inner_rtol" (GMRES's relative tolerance; default
    ``min(0.1, max|fun(x)| / max|fun(x0)|)``, tighter as Newton converges), "preconditioner" (None;
    "sparse": the sparse Jacobian, ``sparse_jacfwd`` with the pattern found once, factorised by the
    backend's ``splu`` at each step; or a function ``M(v)`` approximating ``J^{-1} v``); ``tol``: the
    largest ``max|fun(x)|`` accepted (default ``eps^0.75 max(1, max|fun(x0)|)``). Its result adds
    ``nmatvec``, the Jacobian-vector products taken. Under ``pa.vmap`` each example is solved on its own
    (its own Newton steps and GMRES iterations: a batch-wide count would change every example's
    iterates), and one that did not converge makes every derivative of the batch raise; under ``pa.jit``
    the solve runs at every call of the compiled function.

    Args:
        fun: ``fun(x, *args)`` returning an array of ``x``'s shape, written with polyad.
        x0: the initial guess (no derivative).
        args: extra arguments; the root is differentiable with respect to them.
        method, tol, callback, options: as SciPy's, or "newton_krylov" (above).
        jac: as SciPy's; None gives SciPy polyad's Jacobian (``jacfwd``) for the methods that take one.
        linear_solver: how the tangent system ``(dfun/dx) dx = -(dfun/dargs) dargs`` is solved: "dense"
            (the Jacobian, ``xp.linalg.solve``), "sparse" (``sparse_jacfwd`` and SuperLU: large sparse
            problems), "gmres", "bicgstab" (matrix-free), or a callable ``linear_solver(matvec, b)``;
            None: "dense" for SciPy's methods; for "newton_krylov", "sparse" when its preconditioner is
            "sparse" (the pattern is then known to be sparse, and SuperLU solves the tangent system far
            faster than unpreconditioned GMRES: 0.6 s against 8.8 s on a 96x96 Bratu grid), else "gmres".
        on_failure: "raise" (default) or "warn": what a derivative does if SciPy did not converge.

    Returns:
        SciPy's ``OptimizeResult`` whose ``.x`` is differentiable.

    Example:
        >>> import numpy as np, polyad as pa
        >>> from polyad.scipy import optimize
        >>> def x_of(p):  # x0^2 = p0, x1 = x0 p1
        ...     return optimize.root(lambda x, p: pa.xp.stack([x[0] ** 2 - p[0], x[1] - x[0] * p[1]]),
        ...                          np.ones(2), args=(p,)).x
        >>> np.round(pa.jacrev(x_of)(np.array([4.0, 3.0])), 8) + 0.0
        array([[0.25, 0.  ],
               [0.75, 2.  ]])
        >>> def y_of(c):  # y^3 + y = c, element-wise: Jacobian-free Newton-Krylov
        ...     return optimize.root(lambda y, c: y**3 + y - c, np.zeros(3), args=(c,),
        ...                          method="newton_krylov").x
        >>> np.round(y_of(np.array([2.0, 10.0, 30.0])), 12)
        array([1., 2., 3.])
        >>> c = np.array([2.0, 10.0, 30.0])
        >>> np.round(pa.jvp(y_of, (c,), (np.ones(3),))[1], 12)  # dy/dc = 1 / (3 y^2 + 1)
        array([0.25      , 0.07692308, 0.03571429])
    """
    import scipy.optimize as so  # noqa: PLC0415  (optional)

    where = f"polyad.optimize.root({getattr(fun, '__name__', 'fun')})"
    check_callable(fun, "fun", where)
    if linear_solver is None:
        sparse_pre = isinstance(options, dict) and isinstance(options.get("preconditioner"), str)
        sparse_pre = sparse_pre and options["preconditioner"] == "sparse"
        linear_solver = ("sparse" if sparse_pre else "gmres") if method == "newton_krylov" else "dense"
    check_choice(linear_solver, LINEAR_SOLVERS, "linear_solver", where)
    args = args if isinstance(args, tuple) else (args,)
    convergence = Convergence(where, on_failure)
    guess, shape = _vector_problem(x0, args, where)
    found, host_x = [], []

    def solve(residual, x):
        if method == "newton_krylov":
            found[:] = [_newton_krylov(residual, x, tol, options, callback, where)]
            convergence.record(found[0].success, found[0].message)
            return found[0].x

        def host_f(z):
            return to_host(residual(from_host(np.reshape(z, shape), x))).reshape(-1)

        def host_jac(z):
            n = int(np.prod(shape))
            return to_host(jacfwd(residual)(from_host(np.reshape(z, shape), x))).reshape(n, n)

        j = jac
        if j is None and method in ("hybr", "lm"):
            j = host_jac
        elif callable(j):
            user = j

            def j(z):
                return to_host(user(from_host(np.reshape(z, shape), x), *args))

        res = so.root(host_f, to_host(x).reshape(-1), method=method, jac=j, tol=tol, callback=callback,
                      options=options)  # fmt: skip
        convergence.record(res.success, res.message)
        found[:] = [_report_on_device(res, x)]  # the last solve's report (each call of a compiled f solves)
        host_x[:] = [np.array(res.x)]  # the result object's x becomes the traced solution
        return from_host(np.reshape(res.x, shape), x)

    tangent = tangent_solver(linear_solver, convergence, where)
    x = custom_root(lambda x: fun(x, *args), guess, solve, tangent, residual_rtol=JUDGED)
    return _result(found, x=x)


_NK_OPTIONS = ("maxiter", "inner_maxiter", "inner_rtol", "preconditioner")


def _newton_krylov(residual, x, tol, options, callback, where):
    """``root(method="newton_krylov")``'s solve on plain arrays of the inputs' backend and device: an
    ``OptimizeResult`` (x, success, message, nit, nfev, nmatvec, fun). Each step reads one scalar (the
    residual's size) to the host; GMRES runs where its backend's ``sparse.krylov`` runs."""
    import scipy.optimize as so  # noqa: PLC0415  (optional: the result object)

    opts = dict(options or {})
    unknown = sorted(set(opts) - set(_NK_OPTIONS))
    if unknown:
        raise ValueError(f"{where}: method='newton_krylov' takes options {_NK_OPTIONS}, got {unknown}")
    maxiter, inner_maxiter = int(opts.get("maxiter", 50)), int(opts.get("inner_maxiter", 200))
    inner_rtol, pre = opts.get("inner_rtol"), opts.get("preconditioner")
    if not (pre is None or pre == "sparse" or callable(pre)):
        raise ValueError(
            f"{where}: options['preconditioner'] must be None, 'sparse' or a function M(v), got {pre!r}"
        )
    x = plain(x)
    backend = dispatch.backend_of_array(x)
    if backend is None:  # vmap's batched values: its batch rule then runs this solve once per example
        raise ConcretizationError(
            f"{where}: method='newton_krylov' runs on plain arrays, got a {type(x).__name__}"
        )
    bxp, shape = backend.xp, tuple(x.shape)
    counts = {"nfev": 1, "nmatvec": 0}

    def size(r):  # max|r|: nan where r is not finite
        return float(bxp.max(bxp.abs(r))) if math.prod(shape) else 0.0

    fx = plain(residual(x))
    first = size(fx)
    atol = tol if tol is not None else float(bxp.finfo(x.dtype).eps) ** 0.75 * max(1.0, first)
    flat_residual = lambda v: reshape(residual(reshape(v, shape)), (-1,))  # noqa: E731
    sparse_jac = None
    ok, message, nit = False, f"did not converge in {maxiter} Newton steps", 0
    while True:
        norm = size(fx)
        if callback is not None:
            callback(x, fx)
        if norm <= atol:
            ok, message = True, "max|fun(x)| <= tol"
            break
        if not math.isfinite(norm) or nit == maxiter:
            message = "the residual is not finite" if not math.isfinite(norm) else message
            break

        def matvec(v, x=x):
            counts["nmatvec"] += 1
            return plain(jvp(residual, (x,), (v,))[1])

        M = pre if callable(pre) else None
        if pre == "sparse":  # the pattern once; the Jacobian at each step (its colouring reused)
            if sparse_jac is None:
                flat_x = reshape(x, (-1,))
                sparse_jac = sparse_jacfwd(flat_residual, sparsity=jacobian_sparsity(flat_residual)(flat_x))
            lu = sparse_support(backend, where).splu(sparse_jac(reshape(x, (-1,))))
            M = lambda v, lu=lu: reshape(lu.solve(reshape(v, (-1,))), shape)  # noqa: E731
        rtol = inner_rtol if inner_rtol is not None else min(0.1, norm / first)
        step, _ = krylov("gmres", matvec, -fx, rtol=rtol, maxiter=inner_maxiter, M=M, where=where)
        # an inexact step is still a step: the line search accepts it only if it reduces max|fun|
        t = 1.0
        for _ in range(30):
            trial = x + t * plain(step)
            f_trial = plain(residual(trial))
            counts["nfev"] += 1
            if size(f_trial) <= (1.0 - 1e-4 * t) * norm:
                break
            t *= 0.5
        else:
            message = "the line search found no step reducing max|fun(x)|"
            break
        x, fx, nit = trial, f_trial, nit + 1
    return so.OptimizeResult(
        x=x, fun=fx, success=ok, status=0 if ok else 1, message=message, nit=nit, **counts
    )


def fixed_point(func, x0, args=(), xtol=1e-08, maxiter=500, method="del2"):
    """A fixed point ``x = func(x, *args)``, as ``scipy.optimize.fixed_point``, differentiable at it.

    Args:
        func: ``func(x, *args)``, written with polyad.
        x0: the initial guess (no derivative); args: differentiable extra arguments.
        xtol, maxiter, method: as SciPy's (which raises RuntimeError when it does not converge).

    Returns:
        The fixed point, an array of ``x0``'s shape (differentiable with respect to ``args``: one linear
        solve with ``I - dfunc/dx`` whatever the iterations).

    Example:
        >>> import numpy as np, polyad as pa
        >>> from polyad.scipy import optimize
        >>> fp = lambda c: optimize.fixed_point(lambda x, c: 0.5 * pa.xp.cos(x) + c, np.zeros(1), args=(c,))
        >>> x = fp(np.array([0.3]))
        >>> np.allclose(pa.jacrev(fp)(np.array([0.3])), 1.0 / (1.0 + 0.5 * np.sin(x)))
        True
    """
    import scipy.optimize as so  # noqa: PLC0415  (optional)

    where = f"polyad.optimize.fixed_point({getattr(func, '__name__', 'func')})"
    check_callable(func, "func", where)
    args = args if isinstance(args, tuple) else (args,)
    guess, shape = _vector_problem(x0, args, where)
    convergence = Convergence(where, "raise")

    def solve(residual, x):
        def host_g(z):
            z = np.asarray(z)
            return to_host(from_host(z, x) - residual(from_host(z, x)))

        out = so.fixed_point(host_g, to_host(x), xtol=xtol, maxiter=maxiter, method=method)
        return from_host(np.reshape(out, shape), x)

    tangent = tangent_solver("dense", convergence, where)
    return custom_root(lambda x: x - func(x, *args), guess, solve, tangent, residual_rtol=JUDGED)


# ------------------------------------------------------------------------------ minimisation


def minimize(fun, x0, args=(), method=None, jac=None, hess=None, hessp=None, bounds=None, constraints=(),
             tol=None, callback=None, options=None, *, linear_solver="dense",
             on_failure="raise"):  # fmt: skip
    """A minimiser, as ``scipy.optimize.minimize``, differentiable with respect to ``args`` at it.

    The minimiser satisfies ``grad_x fun(x, args) = 0``; its derivative is
    ``-(d2fun/dx2)^{-1} d2fun/dx dargs``: one Hessian solve (``linear_solver``: "dense", or "cg" for a
    matrix-free one). With ``bounds``, a derivative needs every bound inactive at the solution (else
    ``ImplicitError``); with ``constraints`` the optimality condition is not the gradient's, and a
    derivative raises ``ImplicitError``.

    Args:
        fun: the objective ``fun(x, *args)``, a scalar, written with polyad.
        x0: the starting point (no derivative).
        args: extra arguments; the minimiser is differentiable with respect to them.
        method, bounds, constraints, tol, callback, options: as SciPy's.
        jac, hess, hessp: as SciPy's; when None SciPy gets polyad's gradient, and, for methods that use
            them, polyad's Hessian ("trust-exact", "dogleg") or Hessian-vector product ("Newton-CG",
            "trust-ncg", "trust-krylov").
        linear_solver: "dense", "sparse", "cg", "gmres", "bicgstab", or ``linear_solver(matvec, b)``.
        on_failure: "raise" (default) or "warn": what a derivative does if SciPy did not converge.

    Returns:
        SciPy's ``OptimizeResult`` whose ``.x`` is differentiable.

    Example:
        >>> import numpy as np, polyad as pa
        >>> from polyad.scipy import optimize
        >>> X, y = np.array([[1.0, 0.0], [1.0, 1.0], [1.0, 2.0]]), np.array([1.0, 2.0, 2.0])
        >>> def ridge(lam):
        ...     loss = lambda w, lam: pa.xp.sum((X @ w - y) ** 2) + lam * pa.xp.sum(w**2)
        ...     return optimize.minimize(loss, np.zeros(2), args=(lam,), method="BFGS", tol=1e-12).x
        >>> w = ridge(np.float64(0.5))
        >>> closed = -np.linalg.solve(X.T @ X + 0.5 * np.eye(2), w)  # dw/dlam
        >>> np.allclose(pa.jacfwd(ridge)(np.float64(0.5)), closed, rtol=1e-6)
        True
    """
    import scipy.optimize as so  # noqa: PLC0415  (optional)

    where = f"polyad.optimize.minimize({getattr(fun, '__name__', 'fun')})"
    check_callable(fun, "fun", where)
    check_choice(linear_solver, LINEAR_SOLVERS, "linear_solver", where)
    args = args if isinstance(args, tuple) else (args,)
    convergence = Convergence(where, on_failure)
    guess, shape = _vector_problem(x0, args, where)
    found, host_x = [], []
    method_name = (method or "").lower() if isinstance(method, str) else method

    def solve(gradient, x):
        def objective(z):
            return fun(from_host(np.reshape(z, shape), x), *args)

        def host_fun(z):
            return float(to_host(objective(z)))

        def host_jac(z):
            return to_host(grad(objective_x)(from_host(np.reshape(z, shape), x))).reshape(-1)

        def objective_x(v):
            return fun(v, *args)

        def host_hess(z):
            n = int(np.prod(shape))
            return to_host(jacfwd(grad(objective_x))(from_host(np.reshape(z, shape), x))).reshape(n, n)

        def host_hessp(z, p):
            point, direction = from_host(np.reshape(z, shape), x), from_host(np.reshape(p, shape), x)
            return to_host(jvp(grad(objective_x), (point,), (direction,))[1]).reshape(-1)

        kw = dict(method=method, bounds=bounds, constraints=constraints, tol=tol, callback=callback,
                  options=options)  # fmt: skip
        kw["jac"] = host_jac if jac is None else _host_any(jac, shape, x, args)
        if hess is not None:
            kw["hess"] = _host_any(hess, shape, x, args)
        elif method_name in ("trust-exact", "dogleg", "trust-constr") and hessp is None:
            kw["hess"] = host_hess
        if hessp is not None:
            kw["hessp"] = _host_any(hessp, shape, x, args)
        elif method_name in ("newton-cg", "trust-ncg", "trust-krylov"):
            kw["hessp"] = host_hessp
        res = so.minimize(host_fun, to_host(x).reshape(-1), **kw)
        convergence.record(res.success, res.message)
        found[:] = [_report_on_device(res, x)]  # the last solve's report (each call of a compiled f solves)
        host_x[:] = [np.array(res.x)]  # the result object's x becomes the traced solution
        return from_host(np.reshape(res.x, shape), x)

    tangent = tangent_solver(linear_solver, convergence, where)

    def checked_tangent(g, v):
        if constraints:
            raise ImplicitError(
                f"{where}: a derivative at a constrained minimiser is not given by the gradient's root; "
                "it needs the constraints' multipliers (not implemented)"
            )
        if bounds is not None:
            _check_bounds_inactive(host_x[-1], bounds, where)
        return tangent(g, v)

    x = custom_root(
        lambda w: grad(lambda v: fun(v, *args))(w), guess, solve, checked_tangent, residual_rtol=JUDGED
    )
    return _result(found, x=x)


def _host_any(fn, shape, like, args):
    """A user's ``jac``/``hess``/``hessp`` (polyad code) called by SciPy on host vectors; SciPy's strings
    and booleans pass through."""
    if not callable(fn):
        return fn

    def host(z, *rest):
        extra = [from_host(np.reshape(r, shape), like) for r in rest]
        return to_host(fn(from_host(np.reshape(z, shape), like), *extra, *args))

    return host


def _check_bounds_inactive(x, bounds, where):
    lo, hi = (bounds.lb, bounds.ub) if hasattr(bounds, "lb") else zip(*bounds) if bounds else ((), ())
    lo = np.broadcast_to(np.asarray([-np.inf if v is None else v for v in np.ravel(lo)], float), np.shape(x))
    hi = np.broadcast_to(np.asarray([np.inf if v is None else v for v in np.ravel(hi)], float), np.shape(x))
    tol = 1e-8 * (1.0 + np.abs(x))
    if np.any(x - lo <= tol) or np.any(hi - x <= tol):
        raise ImplicitError(
            f"{where}: a bound is active at the minimiser; the derivative there is not the unconstrained "
            "one (not implemented): loosen the bounds or reparametrise"
        )


def least_squares(fun, x0, jac=None, bounds=(-np.inf, np.inf), method="trf", ftol=1e-08, xtol=1e-08,
                  gtol=1e-08, x_scale=None, loss="linear", f_scale=1.0, diff_step=None, tr_solver=None,
                  tr_options=None, jac_sparsity=None, max_nfev=None, verbose=0, args=(), kwargs=None, *,
                  linear_solver="dense", on_failure="raise"):  # fmt: skip
    """Nonlinear least squares, as ``scipy.optimize.least_squares``, differentiable at the solution.

    The solution minimises ``0.5 * sum(fun(x, *args)**2)`` (``loss="linear"``); its derivative is that of
    the root of this cost's gradient (``minimize``'s). Other losses: the primal works, a derivative raises
    ``ImplicitError``.

    Args:
        fun: the residuals ``fun(x, *args, **kwargs)`` (a vector), written with polyad.
        x0: the starting point (no derivative). args, kwargs: differentiable extra arguments.
        jac: as SciPy's; None gives SciPy polyad's exact Jacobian (``jacfwd``) instead of finite
            differences. The other arguments are SciPy's.
        linear_solver, on_failure: as ``minimize``'s.

    Returns:
        SciPy's ``OptimizeResult`` whose ``.x`` is differentiable.

    Example:
        >>> import numpy as np, polyad as pa
        >>> from polyad.scipy import optimize
        >>> t = np.array([0.0, 1.0, 2.0])
        >>> def fit(y):  # an exponential decay fitted to data y
        ...     return optimize.least_squares(lambda p, y: p[0] * pa.xp.exp(-p[1] * t) - y, np.ones(2),
        ...                                   args=(y,)).x
        >>> y = 2.0 * np.exp(-0.5 * t)
        >>> np.allclose(fit(y), [2.0, 0.5]), pa.jacrev(fit)(y).shape
        (True, (2, 3))
    """
    import scipy.optimize as so  # noqa: PLC0415  (optional)

    where = f"polyad.optimize.least_squares({getattr(fun, '__name__', 'fun')})"
    check_callable(fun, "fun", where)
    check_choice(linear_solver, LINEAR_SOLVERS, "linear_solver", where)
    args = args if isinstance(args, tuple) else (args,)
    kwargs = dict(kwargs or {})
    convergence = Convergence(where, on_failure)
    guess, shape = _vector_problem(x0, args, where)
    found, host_x = [], []

    def residuals(v):
        return fun(v, *args, **kwargs)

    def solve(gradient, x):
        def host_fun(z):
            return to_host(residuals(from_host(np.reshape(z, shape), x))).reshape(-1)

        def host_jac(z):
            j = to_host(jacfwd(residuals)(from_host(np.reshape(z, shape), x)))
            return j.reshape(j.shape[0] if j.ndim else 1, -1)

        j = host_jac if jac is None else _host_any(jac, shape, x, args) if callable(jac) else jac
        kw = dict(bounds=bounds, method=method, ftol=ftol, xtol=xtol, gtol=gtol, loss=loss, f_scale=f_scale,
                  diff_step=diff_step, tr_solver=tr_solver, tr_options=tr_options or {},
                  jac_sparsity=jac_sparsity, max_nfev=max_nfev, verbose=verbose)  # fmt: skip
        if x_scale is not None:
            kw["x_scale"] = x_scale
        res = so.least_squares(host_fun, to_host(x).reshape(-1), jac=j, **kw)
        convergence.record(res.success, res.message)
        found[:] = [_report_on_device(res, x)]  # the last solve's report (each call of a compiled f solves)
        host_x[:] = [np.array(res.x)]  # the result object's x becomes the traced solution
        return from_host(np.reshape(res.x, shape), x)

    tangent = tangent_solver(linear_solver, convergence, where)
    finite = np.all(np.isinf(np.asarray(bounds[0]))) and np.all(np.isinf(np.asarray(bounds[1])))

    def checked_tangent(g, v):
        if loss != "linear":
            raise ImplicitError(f"{where}: derivatives are implemented for loss='linear' only, got {loss!r}")
        if not finite:
            _check_bounds_inactive(host_x[-1], list(zip(*np.broadcast_arrays(*bounds))), where)
        return tangent(g, v)

    def cost(v):
        return 0.5 * _sum_sq(residuals(v))

    x = custom_root(lambda w: grad(cost)(w), guess, solve, checked_tangent, residual_rtol=JUDGED)
    return _result(found, x=x)


def _sum_sq(r):
    r = asarray(r)
    return (r * r).__array_namespace__().sum(r * r)


__all__ = [
    "SolverNotConvergedError",
    "SolverNotConvergedWarning",
    "fixed_point",
    "least_squares",
    "minimize",
    "root",
    "root_scalar",
]
