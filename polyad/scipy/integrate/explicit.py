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

from polyad.scipy.integrate import common
from polyad.scipy.integrate.common import (
    FAILED,
    FINISHED,
    RUNNING,
    Method,
    Step,
    float_pow,
    float_rms,
    next_time,
    rms,
)
from polyad.scipy.integrate.tableaus import DOP853, RK45

SAFETY, MIN_FACTOR, MAX_FACTOR = 0.9, 0.2, 10.0
IN_PLACE = ("polyad.backends.numpy.xp", "polyad.backends.cupy.xp")  # namespaces eager_attempt writes into


def combo(coeffs, stages):
    """``sum_j coeffs[j] * stages[j]`` over the nonzero coefficients."""
    out = None
    for c, k in zip(coeffs, stages):
        if c != 0.0:
            term = c * k
            out = term if out is None else out + term
    return out if out is not None else 0.0 * stages[0]


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
    return xp.where(both_zero, 0.0, xp.abs(h) * e5 / xp.sqrt(common.positive(xp, denom) * problem.n))


def interpolate(problem, step, te):
    """The method's interpolant of ``step`` (its ``data``: the stages ``K``, ``y``, ``y_new``, ``f``,
    ``f_new``) at the times ``te`` (shape ``(m,)``): shape ``(m, n)``. DOP853's evaluates the right-hand
    side three more times."""
    xp = problem.xp  # this run's namespace
    t, h = step.t_old, step.h
    K, y, y_new, f, f_new = step.data
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
    unchanged but for the status) and the ``Step`` tried. Every decision is a ``where`` on arrays, so
    that vmap can take each example's own. Outside transforms on NumPy or CuPy arrays (``eager``):
    ``eager_attempt``."""
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
    grow = xp.where(
        err == 0, MAX_FACTOR, xp.minimum(MAX_FACTOR, SAFETY * common.positive(xp, err) ** exponent)
    )
    grow = xp.where(rejected, xp.minimum(1.0, grow), grow)
    shrink = xp.where(
        xp.isnan(err), MIN_FACTOR, xp.maximum(MIN_FACTOR, SAFETY * common.positive(xp, err) ** exponent)
    )
    accept = (err < 1) & ~too_small
    new_h_abs = stop_gradient(xp.abs(h)) * xp.where(accept, grow, shrink)
    attempts = state["attempts"] + 1
    finished = accept & (direction * (t_new - problem.t_bound) >= 0)
    status = common.status_after(xp, too_small, finished, attempts, max_steps, state["status"])
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
    return new, Step(t, t_new, h, (K, y, y_new, f, f_new))


# ------------------------------------------------------------------------------ outside every transform


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
        return new, None
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
        e5, e3 = common.sum_squares(xp, (E @ K) / scale), common.sum_squares(xp, (E3 @ K) / scale)
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
        return new, None
    status = FINISHED if direction * (t_new - t_bound) >= 0 else RUNNING
    if status == RUNNING and attempts >= max_steps:
        status = FAILED
    new.update(t=t_new_arr, y=y_new, f=f_new, rejected=False, status=status)
    # the stages as rows of the buffer the next attempt overwrites: interpolate before it
    return new, Step(t, t_new_arr, t_new_arr - t, (list(K), y, y_new, f, f_new))


def initial_state(problem, t0, y0, int_dtype, first_step=None):
    """``common.base_state``: an explicit method keeps nothing more."""
    return common.base_state(problem, t0, y0, int_dtype, first_step)


METHODS = tuple(
    Method(tab.name, tab.order, initial_state, attempt, interpolate, len(tab.C_EXTRA), tableau=tab)
    for tab in (RK45, DOP853)
)
