"""What every method of ``solve_ivp`` shares: the ``Method`` protocol the driver calls, the ``Problem`` every
attempt reads, the status codes, SciPy's norm and initial step, and the Jacobian of the stiff methods.

A method is a ``Method`` (a named tuple of functions): the driver looks it up by name in its table and
calls only these fields, so a new method plugs in by adding its ``Method`` to the table:

- ``initial_state(problem, t0, y0, int_dtype, first_step) -> state``: a dict of arrays (``base_state``'s
  keys at least: ``t``, ``y``, ``f``, ``h_abs``, ``rejected``, ``status``, ``attempts``, ``nfev``).
- ``attempt(problem, state, max_steps, eager) -> (state, step)``: one attempted step (accepted, rejected or
  failed). ``eager``: outside every transform (a method may branch on Python values there); else every
  decision is a ``where`` on arrays (vmap takes each example's own). ``step`` is the ``Step`` just tried,
  whose interpolant is valid where the new state's ``rejected`` is false (eagerly: None for a step not
  accepted; an eager step's arrays may be buffers the next attempt overwrites, so use it before then).
- ``interpolate(problem, step, te) -> (m, n)``: the step's interpolant at the times ``te`` (shape
  ``(m,)``), differentiable like the solution; ``dense_evaluations``: the right-hand-side evaluations it
  makes (DOP853's three extra stages, else 0).
"""

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import polyad.core.dispatch as dispatch
import polyad.xp as polyad_xp
from polyad.api.jacobians import jacfwd
from polyad.backends.host import np
from polyad.ops.elementwise import stop_gradient as polyad_stop_gradient
from polyad.scipy.integrate.sparse_newton import SparseNewton

FINISHED, FAILED = 0, -1  # SciPy's status codes
RUNNING = 2  # not done yet (never the status of a result)
EPS = 2.220446049250313e-16


class Method(NamedTuple):
    """A method of ``solve_ivp``, as the driver calls it (see the module's note for each field)."""

    name: str
    order: int  # of the error estimator: SciPy's initial step selection uses it
    initial_state: Callable
    attempt: Callable
    interpolate: Callable
    dense_evaluations: int = 0
    stiff: bool = False  # takes jac= and jac_sparsity= (its Newton matrices need df/dy)
    tableau: Any = None  # an explicit method's Butcher tableau


class Step(NamedTuple):
    """One attempted step from ``t_old`` to ``t_new`` (``h = t_new - t_old``) and what its interpolant
    needs (``data``: the method's own tuple of arrays)."""

    t_old: Any
    t_new: Any
    h: Any
    data: tuple


class Problem:
    """What every attempt reads: the right-hand side and its extra arguments, the method, the bounds and
    the tolerances (arrays or Python numbers; arrays may be tensors of enclosing transforms)."""

    def __init__(self, fun, args, method, t_bound, direction, rtol, atol, max_step, t_eval, n,
                 namespace=None, jac_sparsity=None, jac=None):  # fmt: skip
        self.fun, self.args, self.method, self.tableau = fun, args, method, method.tableau
        # outside every transform the solver's own arithmetic runs on the backend's namespace (no
        # dispatch: nothing is differentiated); under one on polyad's
        self.xp = polyad_xp if namespace is None else namespace
        self.sg = polyad_stop_gradient if namespace is None else identity
        self.jac = jac  # the user's df/dy: a callable jac(t, y, *args), a matrix, or None (pa.jacfwd)
        self.jac_sparsity = jac_sparsity  # the Newton Jacobians' pattern, "detect" or None
        self.sparse_jacobian = None  # its sparse_newton.SparseNewton, made at the first use (coloured once)
        self.constants = {}  # a method's coefficients as the backend's arrays (outside transforms)
        self.stage_buffer = None  # outside transforms: the stages' array and weights (False: none)
        self.t_bound, self.direction = t_bound, direction
        self.rtol, self.atol, self.max_step = rtol, atol, max_step
        self.t_eval, self.n = t_eval, n

    def rhs(self, t, y):
        return as_state(self.fun(t, y, *self.args), y, self.fun)


def identity(x):
    return x


def as_state(value, y, fun):
    """What ``fun`` returned as an array shaped and typed like the state ``y``."""
    if isinstance(value, list | tuple):
        value = polyad_xp.stack([polyad_xp.asarray(v) for v in value])
    if not hasattr(value, "shape"):
        value = polyad_xp.asarray(value)
    if tuple(value.shape) != tuple(y.shape):
        name = getattr(fun, "__name__", type(fun).__name__)
        raise ValueError(
            f"solve_ivp: fun ({name}) must return an array of the state's shape {tuple(y.shape)}, "
            f"got shape {tuple(value.shape)}"
        )
    if value.dtype != y.dtype:
        value = polyad_xp.astype(value, y.dtype)
    return value


def rms(xp, x):
    """SciPy's norm, ``||x||_2 / sqrt(size)``, in its order of operations (the root before the division)."""
    return xp.sqrt(xp.sum(x * x)) / math.prod(x.shape) ** 0.5


def float_rms(xp, x):
    """``rms`` as a float, rounded as SciPy's ``norm``: ``np.linalg.norm`` (the square root of the dot
    product of the flattened ``x`` with itself) divided by ``size ** 0.5``. The mean's order (the sum
    divided by the count, then the root) rounded otherwise: step times a few ulps apart, drifting."""
    flat = xp.reshape(x, (-1,))
    return math.sqrt(float(flat @ flat)) / math.prod(x.shape) ** 0.5


def sum_squares(xp, x):
    """``np.linalg.norm(x) ** 2`` as SciPy's DOP853 rounds it (the root of the dot product, squared)."""
    flat = xp.reshape(x, (-1,))
    return math.sqrt(float(flat @ flat)) ** 2


def float_pow(x, e):
    """``x ** e`` of a float as SciPy's controllers compute it on a NumPy scalar: the C library's
    ``pow`` (a 0-d array's power, NumPy's own loop, differs in the last bit for about 5 % of arguments:
    step sizes an ulp apart, then step times drifting)."""
    return float(x) ** e


def array_pow(x, e):
    """``x ** e`` of floats as NumPy's power of an array computes it (SciPy's BDF raises its three error
    norms to their powers as one array)."""
    return float(np.asarray(x, dtype=np.float64) ** e)


def positive(xp, x):
    """``x`` where it is positive, else 1: a denominator whose other branch ``where`` discards."""
    return xp.where(x > 0, x, 1.0)


def initial_step(problem, t0, y0, f0):
    """SciPy's initial step size (Hairer, Norsett and Wanner, Sec. II.4), not differentiated: one more
    evaluation of the right-hand side."""
    xp, stop_gradient = problem.xp, problem.sg  # this run's namespace
    order = problem.method.order
    t, y, f = stop_gradient(t0), stop_gradient(y0), stop_gradient(f0)
    interval = xp.abs(stop_gradient(problem.t_bound) - t)
    scale = problem.atol + xp.abs(y) * problem.rtol
    norm = rms if xp is polyad_xp else _rms_array  # outside transforms: SciPy's rounding
    d0, d1 = norm(xp, y / scale), norm(xp, f / scale)
    h0 = xp.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / positive(xp, d1))
    h0 = xp.minimum(h0, interval)
    y1 = y + h0 * problem.direction * f
    f1 = stop_gradient(problem.rhs(t + h0 * problem.direction, y1))
    d2 = norm(xp, (f1 - f) / scale) / positive(xp, h0)
    flat = (d1 <= 1e-15) & (d2 <= 1e-15)
    h1 = xp.where(
        flat, xp.maximum(1e-6, h0 * 1e-3), (0.01 / positive(xp, xp.maximum(d1, d2))) ** (1 / (order + 1))
    )
    return xp.minimum(xp.minimum(100 * h0, h1), xp.minimum(interval, problem.max_step))


def _rms_array(xp, x):
    """``float_rms`` as a 0-d array of ``x``'s namespace (outside transforms)."""
    return xp.asarray(float_rms(xp, x), dtype=x.dtype, device=x.device)


def base_state(problem, t0, y0, int_dtype, first_step=None):
    """The state every method starts from: ``f(t0, y0)``, the initial step size (``first_step``, else
    SciPy's selection: one more evaluation) and the counters."""
    xp, stop_gradient = problem.xp, problem.sg  # this run's namespace
    f0 = problem.rhs(t0, y0)
    if xp is not polyad_xp:  # outside transforms the initial step's norms are floats, each a compute of
        # a lazy backend's graph (Dask): f0 computed once for them all, not once per norm
        f0 = dispatch.persisted([f0])[0]
    if first_step is None:
        h0, evaluations = initial_step(problem, t0, y0, f0), 2
    else:
        h0, evaluations = xp.asarray(first_step, dtype=y0.dtype, device=y0.device), 1
    done = stop_gradient(t0) == stop_gradient(problem.t_bound)
    if problem.n == 0:
        done = xp.asarray(True, device=getattr(y0, "device", None))
    device = getattr(y0, "device", None)
    return {
        "t": t0,
        "y": y0,
        "f": f0,
        "h_abs": h0,
        "rejected": xp.asarray(False, device=device),
        "status": xp.where(done, xp.asarray(FINISHED, dtype=int_dtype, device=device), RUNNING),
        "attempts": xp.asarray(0, dtype=int_dtype, device=device),
        "nfev": xp.asarray(evaluations, dtype=int_dtype, device=device),
    }


def status_after(xp, too_small, finished, attempts, max_steps, codes):
    """The status after an attempt (traced): failed for a step too small or ``max_steps`` attempts,
    finished at the end, else running."""
    status = xp.where(too_small, FAILED, xp.where(finished, xp.full_like(codes, FINISHED), RUNNING))
    return xp.where((status == RUNNING) & (attempts >= max_steps), FAILED, status)


def next_time(xp, tf, h_abs, direction, t_bound, y):
    """``(t_new as an array, t_new, h)`` of an eager attempt from ``tf`` (Python floats): the step cut at
    ``t_bound``, the new time in the state's precision (float32: rounded), as SciPy's solvers take it."""
    t_new = tf + h_abs * direction
    if direction * (t_new - t_bound) > 0:
        t_new = t_bound
    t_new_arr = xp.asarray(t_new, dtype=y.dtype, device=y.device)
    t_new = float(t_new_arr)
    return t_new_arr, t_new, t_new - tf


def constant_jacobian(problem):
    """Whether ``jac`` is a matrix (SciPy then never evaluates it again, nor counts it in ``njev``)."""
    return problem.jac is not None and not callable(problem.jac)


def jacobian(problem, t, y):
    """``df/dy`` at ``(t, y)``, not differentiated (the Newton matrices only): the user's ``jac`` (a
    callable of ``(t, y, *args)`` or a constant matrix) where given; else by ``pa.jacfwd``, or outside
    transforms with ``jac_sparsity`` by ``pa.sparse_jacfwd`` (one JVP per colour): the backend's CSR
    matrix (``sparse_newton.SparseNewton``), factorised by the methods with the backend's sparse LU; under
    a transform with ``jac_sparsity``, its CSR values alone (a vector), factorised inside the kernels."""
    xp, n = problem.xp, problem.n
    if problem.jac is not None:
        J = problem.jac(t, y, *problem.args) if callable(problem.jac) else problem.jac
        if hasattr(J, "toarray"):  # a scipy.sparse matrix, as SciPy's jac may return
            J = J.toarray()
        J = xp.asarray(J, dtype=y.dtype, device=y.device) if xp is not polyad_xp else polyad_xp.asarray(J)
        if tuple(J.shape) != (n, n):
            raise ValueError(f"solve_ivp: jac must be of shape {(n, n)} (df/dy), got {tuple(J.shape)}")
        return problem.sg(polyad_xp.astype(J, y.dtype) if xp is polyad_xp else J)
    if problem.jac_sparsity is not None:
        if problem.sparse_jacobian is None:
            problem.sparse_jacobian = SparseNewton(problem, t, y)
        if xp is not polyad_xp:  # outside transforms: the backend's CSR matrix, factorised by sparse LU
            return problem.sparse_jacobian(t, y)
        # under a transform: its CSR values, factorised inside the solves' kernels
        return problem.sg(problem.sparse_jacobian.traced_values(t, problem.sg(y)))
    return problem.sg(jacfwd(lambda v: problem.rhs(t, v))(problem.sg(y)))


def simplified_newton(xp, residual, Z0, M_inv, scale, tol, early_exit, maxiter):
    """SciPy's simplified Newton iteration (Radau's and BDF's) and its convergence test, at most
    ``maxiter`` iterations: ``(Z, converged, iterations, rate)``. ``residual(Z)`` is ``G(Z)``, ``M_inv``
    the inverse Newton matrix, or a function solving with the Newton matrix (a sparse LU's ``solve``).
    With ``early_exit`` (plain arrays) it stops when it has converged or failed; else (a batch) it runs
    every iteration, each example's result frozen when it stops."""
    shape = tuple(Z0.shape)
    size = math.prod(shape)
    Z = Z0
    active = xp.asarray(True, device=Z0.device)
    converged = xp.asarray(False, device=Z0.device)
    iterations = xp.zeros((), dtype=xp.int64, device=Z0.device)
    rate = xp.zeros((), dtype=Z0.dtype, device=Z0.device)
    norm_old = -xp.ones((), dtype=Z0.dtype, device=Z0.device)
    for k in range(maxiter):
        G = residual(Z)
        flat = xp.reshape(G, (size,))
        dZ = -xp.reshape(M_inv(flat) if callable(M_inv) else M_inv @ flat, shape)
        finite = xp.all(xp.isfinite(G))
        dnorm = rms(xp, dZ / scale)
        has_rate = norm_old > 0
        new_rate = xp.where(has_rate, dnorm / xp.where(has_rate, norm_old, 1.0), rate)
        safe = xp.where(new_rate < 1, 1 - new_rate, 1.0)
        diverging = has_rate & ((new_rate >= 1) | (new_rate ** (maxiter - k) / safe * dnorm > tol))
        stop_fail = active & (~finite | diverging)
        step = active & ~stop_fail
        Z = xp.where(step, Z + dZ, Z)
        done = step & ((dnorm == 0) | (has_rate & (new_rate / safe * dnorm < tol)))
        iterations = iterations + xp.astype(active, iterations.dtype)
        rate = xp.where(active, new_rate, rate)
        converged = converged | done
        active = step & ~done
        norm_old = xp.where(active, dnorm, norm_old)
        if early_exit and not bool(active):
            break
    return Z, converged, iterations, rate
