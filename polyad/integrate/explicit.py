"""Explicit adaptive Runge-Kutta integration (``RK45``, ``DOP853``) written in polyad ops.

One *attempt* (a step tried with the current step size, accepted or rejected) is a function of the
solver's state, a dict of arrays; the integration repeats it until the state says it is done. Outside
every transform a Python loop repeats it on the backend's arrays (and records every accepted step, as
SciPy does); under a transform ``pa.while_loop`` does, so the loop is one op: reverse mode stores the
checkpoints ``checkpoints=`` allows, jvp carries the tangent alongside the state, and vmap masks the
examples that have finished (each example takes its own steps).

The step-size controller is SciPy's (``scipy.integrate.solve_ivp``'s ``RK45``/``DOP853``: the same error
norm, safety factor, growth limits, initial step and minimum step), so the accepted steps are SciPy's up to
rounding. Its decisions are not differentiated: the error norm and the proposed step size pass through
``stop_gradient`` (as diffrax does), so a derivative is that of the numerical solution on its grid of
steps, held fixed. The times themselves stay differentiable: every step starts at ``t0`` plus constant
step sizes and the last one is cut at ``t1``, so derivatives with respect to ``t0``, ``t1`` and
``t_eval`` are those of the solution on that grid.
"""

import math

import polyad.xp as polyad_xp
from polyad.backends.host import np
from polyad.ops.elementwise import stop_gradient as polyad_stop_gradient

SAFETY, MIN_FACTOR, MAX_FACTOR = 0.9, 0.2, 10.0
FINISHED, FAILED = 0, -1  # SciPy's status codes
RUNNING = 2  # not done yet (never the status of a result)
IN_PLACE = ("polyad.backends.numpy.xp", "polyad.backends.cupy.xp")  # namespaces eager_attempt writes into


class Problem:
    """What every attempt reads: the right-hand side and its extra arguments, the tableau, the bounds and
    the tolerances (arrays or Python numbers; arrays may be tensors of enclosing transforms)."""

    def __init__(self, fun, args, tableau, t_bound, direction, rtol, atol, max_step, t_eval, n,
                 namespace=None, jac_sparsity=None):  # fmt: skip
        self.fun, self.args, self.tableau = fun, args, tableau
        # outside every transform the solver's own arithmetic runs on the backend's namespace (no
        # dispatch: nothing is differentiated); under one on polyad's
        self.xp = polyad_xp if namespace is None else namespace
        self.sg = polyad_stop_gradient if namespace is None else _identity
        self.jac_sparsity = jac_sparsity  # Radau's Newton Jacobians: a pattern, "detect" or None
        self.sparse_jacobian = None  # its pa.sparse_jacfwd, made at the first use (coloured once)
        self.radau_constants = None  # Radau's coefficients as the backend's arrays (outside transforms)
        self.stage_buffer = None  # outside transforms: the stages' array and weights (False: none)
        self.keep_stages = False  # dense output, events: an attempt leaves its stages (``dense.py``)
        self.t_bound, self.direction = t_bound, direction
        self.rtol, self.atol, self.max_step = rtol, atol, max_step
        self.t_eval, self.n = t_eval, n

    def rhs(self, t, y):
        return as_state(self.fun(t, y, *self.args), y, self.fun)


def _identity(x):
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


def combo(coeffs, stages):
    """``sum_j coeffs[j] * stages[j]`` over the nonzero coefficients."""
    out = None
    for c, k in zip(coeffs, stages):
        if c != 0.0:
            term = c * k
            out = term if out is None else out + term
    return out if out is not None else 0.0 * stages[0]


def rms(xp, x):
    return xp.sqrt(xp.mean(x * x))


def _positive(xp, x):
    """``x`` where it is positive, else 1: a denominator whose other branch ``where`` discards."""
    return xp.where(x > 0, x, 1.0)


def initial_step(problem, t0, y0, f0):
    """SciPy's initial step size (Hairer, Norsett and Wanner, Sec. II.4), not differentiated: one more
    evaluation of the right-hand side."""
    xp, stop_gradient = problem.xp, problem.sg  # this run's namespace
    order = problem.tableau.order
    t, y, f = stop_gradient(t0), stop_gradient(y0), stop_gradient(f0)
    interval = xp.abs(stop_gradient(problem.t_bound) - t)
    scale = problem.atol + xp.abs(y) * problem.rtol
    d0, d1 = rms(xp, y / scale), rms(xp, f / scale)
    h0 = xp.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / _positive(xp, d1))
    h0 = xp.minimum(h0, interval)
    y1 = y + h0 * problem.direction * f
    f1 = stop_gradient(problem.rhs(t + h0 * problem.direction, y1))
    d2 = rms(xp, (f1 - f) / scale) / _positive(xp, h0)
    flat = (d1 <= 1e-15) & (d2 <= 1e-15)
    h1 = xp.where(
        flat, xp.maximum(1e-6, h0 * 1e-3), (0.01 / _positive(xp, xp.maximum(d1, d2))) ** (1 / (order + 1))
    )
    return xp.minimum(xp.minimum(100 * h0, h1), xp.minimum(interval, problem.max_step))


def stages(problem, t, y, f, h):
    """The stages of one step from ``(t, y)`` of size ``h`` (``f = fun(t, y)``): the list of stage
    derivatives (the last one at the new point), the new state and its derivative."""
    tab = problem.tableau
    K = [f]
    for s in range(1, len(tab.C)):
        dy = combo(tab.A[s], K) * h
        K.append(problem.rhs(t + tab.C[s] * h, y + dy))
    y_new = y + h * combo(tab.B, K)
    f_new = problem.rhs(t + h, y_new)
    K.append(f_new)
    return K, y_new, f_new


def error_norm(problem, K, h, scale):
    """SciPy's scaled error norm of a step (not differentiated): RMS for RK45, Hairer's blend of the 5th-
    and 3rd-order estimates for DOP853."""
    xp, stop_gradient = problem.xp, problem.sg  # this run's namespace
    tab = problem.tableau
    K = [stop_gradient(k) for k in K]
    h = stop_gradient(h)
    if not tab.E3:
        return rms(xp, combo(tab.E, K) * h / scale)
    e5 = xp.sum((combo(tab.E, K) / scale) ** 2)
    e3 = xp.sum((combo(tab.E3, K) / scale) ** 2)
    # zero only when both estimates are: a nan one (a right-hand side turned nan) stays nan, a rejection
    denom = e5 + 0.01 * e3
    both_zero = (e5 == 0) & (e3 == 0)
    return xp.where(both_zero, 0.0, xp.abs(h) * e5 / xp.sqrt(_positive(xp, denom) * problem.n))


def dense(problem, K, t, y, y_new, f, f_new, h, te):
    """The method's interpolant of the step from ``(t, y)`` to ``t + h`` at the times ``te`` (shape
    ``(m,)``): shape ``(m, n)``. DOP853's evaluates the right-hand side three more times."""
    xp = problem.xp  # this run's namespace
    tab = problem.tableau
    # a zero step (an example vmap keeps running after it finished) divides by 1: its values are masked,
    # and a finite x keeps their derivative (zero times the cotangent) from being nan
    x = xp.reshape((te - t) / xp.where(h == 0, 1.0, h), (-1, 1))
    if tab.P:  # RK45: y + h * sum_j Q_j x^(j+1), Q = K^T P
        powers = len(tab.P[0])
        acc, xp_j = None, x
        for j in range(powers):
            term = xp_j * combo([row[j] for row in tab.P], K)
            acc = term if acc is None else acc + term
            xp_j = xp_j * x
        return y + h * acc
    K = list(K)
    for a, c in zip(tab.A_EXTRA, tab.C_EXTRA):
        dy = combo(a, K) * h
        K.append(problem.rhs(t + c * h, y + dy))
    delta = y_new - y
    F = [delta, h * f - delta, 2 * delta - h * (f_new + f)] + [h * combo(row, K) for row in tab.D]
    out = None
    for i, Fi in enumerate(reversed(F)):
        out = Fi if out is None else out + Fi
        out = out * x if i % 2 == 0 else out * (1 - x)
    return out + y


def evaluations_per_attempt(tableau):
    return len(tableau.C)


def attempt(problem, state, max_steps, eager):
    """One attempted step: the new state (accepted: advanced; rejected: a smaller step size; failed:
    unchanged but for the status). Every decision is a ``where`` on arrays, so that vmap can take each
    example's own. ``eager``: outside every transform, where DOP853's dense output runs only for a step
    holding a point of ``t_eval`` (as SciPy's), else for every step. Outside transforms on NumPy or CuPy
    arrays: ``eager_attempt``."""
    if eager and _stage_buffer(problem, state["y"]) is not False:
        return eager_attempt(problem, state, max_steps)
    xp, stop_gradient = problem.xp, problem.sg  # this run's namespace
    t, y, f, h_abs = state["t"], state["y"], state["f"], stop_gradient(state["h_abs"])
    rejected = state["rejected"]
    direction = problem.direction
    ts = stop_gradient(t)
    min_step = 10 * xp.abs(xp.nextafter(ts, ts + direction) - ts)
    h_abs = xp.where(rejected, h_abs, xp.minimum(xp.maximum(h_abs, min_step), problem.max_step))
    too_small = rejected & (h_abs < min_step)
    t_new = t + h_abs * direction
    t_new = xp.where(direction * (t_new - problem.t_bound) > 0, problem.t_bound, t_new)
    h = t_new - t
    K, y_new, f_new = stages(problem, t, y, f, h)
    scale = stop_gradient(problem.atol + xp.maximum(xp.abs(y), xp.abs(y_new)) * problem.rtol)
    err = error_norm(problem, K, h, scale)
    exponent = -1.0 / (problem.tableau.order + 1)
    grow = xp.where(err == 0, MAX_FACTOR, xp.minimum(MAX_FACTOR, SAFETY * _positive(xp, err) ** exponent))
    grow = xp.where(rejected, xp.minimum(1.0, grow), grow)
    shrink = xp.where(
        xp.isnan(err), MIN_FACTOR, xp.maximum(MIN_FACTOR, SAFETY * _positive(xp, err) ** exponent)
    )
    accept = (err < 1) & ~too_small
    new_h_abs = stop_gradient(xp.abs(h)) * xp.where(accept, grow, shrink)
    attempts = state["attempts"] + 1
    finished = accept & (direction * (t_new - problem.t_bound) >= 0)
    codes = state["status"]
    status = xp.where(too_small, FAILED, xp.where(finished, xp.full_like(codes, FINISHED), RUNNING))
    status = xp.where((status == RUNNING) & (attempts >= max_steps), FAILED, status)
    nfev = state["nfev"] + evaluations_per_attempt(problem.tableau)
    new = {
        "t": xp.where(accept, t_new, t),
        "y": xp.where(accept, y_new, y),
        "f": xp.where(accept, f_new, f),
        "h_abs": xp.where(too_small, h_abs, new_h_abs),
        "rejected": ~accept,
        "status": status,
        "attempts": attempts,
        "nfev": nfev,
    }
    if problem.keep_stages:
        new["K"] = xp.stack(K)
    if "out" in state:
        te = problem.t_eval
        # a point at a step's start takes that step's interpolant at x = 0 (the state itself): so points at
        # t0 are filled by the first step, with their derivative with respect to the time
        inside = accept & (direction * (te - t) >= 0) & (direction * (te - t_new) <= 0)
        if eager and not bool(xp.any(inside)):
            new["out"] = state["out"]
        else:
            extra = len(problem.tableau.C_EXTRA)
            new["nfev"] = nfev + (extra if eager else xp.where(accept, xp.full_like(nfev, extra), 0))
            values = dense(problem, K, t, y, y_new, f, f_new, h, te)
            new["out"] = xp.where(xp.reshape(inside, (-1, 1)), values, state["out"])
    return new


def initial_state(problem, t0, y0, int_dtype, first_step=None):
    """The state before the first attempt: ``f(t0, y0)``, the initial step size (``first_step``, else
    SciPy's selection: one more evaluation), counters and the output rows for ``t_eval`` (``y0`` until a
    step reaches them)."""
    xp, stop_gradient = problem.xp, problem.sg  # this run's namespace
    f0 = problem.rhs(t0, y0)
    if first_step is None:
        h0, evaluations = initial_step(problem, t0, y0, f0), 2
    else:
        h0, evaluations = xp.asarray(first_step, dtype=y0.dtype, device=y0.device), 1
    done = stop_gradient(t0) == stop_gradient(problem.t_bound)
    if problem.n == 0:
        done = xp.asarray(True)
    device = getattr(y0, "device", None)
    state = {
        "t": t0,
        "y": y0,
        "f": f0,
        "h_abs": h0,
        "rejected": xp.asarray(False, device=device),
        "status": xp.where(done, xp.asarray(FINISHED, dtype=int_dtype, device=device), RUNNING),
        "attempts": xp.asarray(0, dtype=int_dtype, device=device),
        "nfev": xp.asarray(evaluations, dtype=int_dtype, device=device),
    }
    if problem.t_eval is not None:
        m = problem.t_eval.shape[0]
        state["out"] = xp.broadcast_to(xp.reshape(y0, (1, -1)), (m, problem.n))
    return state


# ------------------------------------------------------------------------------ outside every transform


def float_pow(x, e):
    """``x ** e`` of a float as NumPy's power computes it (its last bit differs from the C library's for
    some arguments): the step sizes of ``attempt`` (and Radau's)."""
    return float(np.asarray(x) ** e)


def float_rms(xp, x):
    """``rms`` as a float (NumPy's mean: the sum divided by the count)."""
    return math.sqrt(float(xp.sum(x * x)) / math.prod(x.shape))


def _stage_buffer(problem, y):
    """The stages of a step as rows of one array (written in place: NumPy and CuPy only, else False), and
    the tableau's weights as arrays, made once per solve."""
    if problem.stage_buffer is None:
        xp, tab = problem.xp, problem.tableau
        if getattr(xp, "__name__", "") not in IN_PLACE:
            problem.stage_buffer = False
            return False

        def row(c):
            return xp.asarray(c, dtype=y.dtype, device=y.device)

        K = xp.zeros((len(tab.C) + 1, problem.n), dtype=y.dtype, device=y.device)
        weights = [row(a) for a in tab.A], row(tab.B), row(tab.E), row(tab.E3) if tab.E3 else None
        problem.stage_buffer = (K, *weights)
    return problem.stage_buffer


def next_time(xp, tf, h_abs, direction, t_bound, y):
    """``(t_new as an array, t_new, h)`` of an eager attempt from ``tf`` (Python floats): the step cut at
    ``t_bound``, the new time in the state's precision (float32: rounded), as SciPy's solvers take it."""
    t_new = tf + h_abs * direction
    if direction * (t_new - t_bound) > 0:
        t_new = t_bound
    t_new_arr = xp.asarray(t_new, dtype=y.dtype, device=y.device)
    t_new = float(t_new_arr)
    return t_new_arr, t_new, t_new - tf


def eager_attempt(problem, state, max_steps):
    """``attempt`` outside every transform on NumPy or CuPy arrays: its decisions on Python floats (an
    array's ``where`` costs microseconds), the stage sums as products with the stages stacked in one
    buffer, as SciPy's ``np.dot`` (so SciPy's steps to the last bit), no evaluation for a step too small
    to take. ``attempt`` adds scaled stages instead (element-wise ops ``pa.jit`` fuses: a product with
    stacked stages made ``pa.jit(pa.grad)`` of W10 22 % slower), so under transforms the sums round
    otherwise and the steps agree with these to rounding, which a long run can amplify (DOP853 on W10's
    equation at ``rtol=1e-6``: another step sequence, values at ``t_eval`` 5e-5 apart)."""
    xp, tab = problem.xp, problem.tableau
    t, y, f = state["t"], state["y"], state["f"]
    tf, h_abs, rejected = float(t), float(state["h_abs"]), bool(state["rejected"])
    attempts = int(state["attempts"]) + 1
    direction, t_bound, max_step = float(problem.direction), float(problem.t_bound), problem.max_step
    min_step = 10 * abs(math.nextafter(tf, tf + direction) - tf)
    if not rejected:
        h_abs = min(max(h_abs, min_step), max_step)
    new = dict(state, attempts=attempts, rejected=True)
    if rejected and h_abs < min_step:
        new.update(status=FAILED, h_abs=h_abs)
        return new
    t_new_arr, t_new, h = next_time(xp, tf, h_abs, direction, t_bound, y)
    K, A, B, E, E3 = _stage_buffer(problem, y)
    stages = len(tab.C)
    K[0, ...] = f
    for i in range(1, stages):
        K[i, ...] = problem.rhs(t + tab.C[i] * h, y + (A[i] @ K[:i, ...]) * h)
    y_new = y + h * (B @ K[:stages, ...])
    f_new = problem.rhs(t_new_arr, y_new)
    K[stages, ...] = f_new
    nfev = int(state["nfev"]) + stages
    scale = problem.atol + xp.maximum(xp.abs(y), xp.abs(y_new)) * problem.rtol
    if E3 is None:
        err = float_rms(xp, (E @ K) * h / scale)
    else:
        e5 = float(xp.sum(((E @ K) / scale) ** 2))
        e3 = float(xp.sum(((E3 @ K) / scale) ** 2))
        denom = e5 + 0.01 * e3  # nan (a right-hand side turned nan) stays nan: a rejection, as SciPy's
        err = 0.0 if e5 == 0 and e3 == 0 else abs(h) * e5 / math.sqrt(denom * problem.n)
    exponent = -1.0 / (tab.order + 1)
    accept = err < 1
    if accept:
        factor = MAX_FACTOR if err == 0 else min(MAX_FACTOR, SAFETY * float_pow(err, exponent))
        if rejected:
            factor = min(1.0, factor)
    else:
        factor = MIN_FACTOR if math.isnan(err) else max(MIN_FACTOR, SAFETY * float_pow(err, exponent))
    new.update(h_abs=abs(h) * factor, nfev=nfev)
    if not accept:
        new["status"] = FAILED if attempts >= max_steps else RUNNING
        return new
    status = FINISHED if direction * (t_new - t_bound) >= 0 else RUNNING
    if status == RUNNING and attempts >= max_steps:
        status = FAILED
    new.update(t=t_new_arr, y=y_new, f=f_new, rejected=False, status=status)
    if problem.keep_stages:
        new["K"] = xp.asarray(K, copy=True)  # the buffer is the next attempt's
    if "out" in state:
        te = problem.t_eval
        inside = (direction * (te - t) >= 0) & (direction * (te - t_new_arr) <= 0)
        if bool(xp.any(inside)):
            new["nfev"] = nfev + len(tab.C_EXTRA)
            h_arr = t_new_arr - t
            values = dense(problem, list(K), t, y, y_new, f, f_new, h_arr, te)
            new["out"] = xp.where(xp.reshape(inside, (-1, 1)), values, state["out"])
    return new
