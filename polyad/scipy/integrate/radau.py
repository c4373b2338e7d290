"""Radau IIA of order 5 (``method="Radau"``), a stiff method, written in polyad ops.

An attempt solves the collocation equations ``G(Z) = Z - h (A x I) F(Z) = 0`` for the three stage
increments ``Z`` (``F_i = f(t + c_i h, y + Z_i)``) by simplified Newton iterations whose matrix
``I - h (A x J)`` takes ``J = df/dy`` from ``pa.jacfwd`` of ``fun``, then estimates the error and picks the
next step size as SciPy's ``Radau`` does (Hairer and Wanner's estimate and predictive controller). Unlike
SciPy it solves the real ``3n`` system in ``Z`` rather than the transformed complex one, so its steps
are close to SciPy's, not equal (the Jacobian is kept from step to step and Newton starts from the last
step's collocation polynomial, as SciPy's).

Under a transform the Newton solve goes through ``pa.custom_root``: the simplified Newton iteration runs
on plain arrays in the op's kernel (nothing of it recorded) and the converged ``Z`` is differentiated by
the implicit function theorem, ``dZ = -(dG/dZ)^{-1} (dG/dc) dc``; the tangent solve uses the exact
``dG/dZ`` at the root (the Newton matrix's Jacobian is an old one), so the derivatives are those of the
root to the Newton tolerance, and every order differentiates again (hessian).
"""

import math

import polyad.xp as polyad_xp
from polyad.api.jacobians import jacfwd
from polyad.core import Tensor
from polyad.custom.implicit import custom_root
from polyad.ops.elementwise import stop_gradient as polyad_stop_gradient
from polyad.scipy.integrate import common
from polyad.scipy.integrate.common import (
    EPS,
    FAILED,
    FINISHED,
    RUNNING,
    Method,
    Step,
    float_pow,
    float_rms,
    rms,
    simplified_newton,
)
from polyad.scipy.integrate.common import jacobian as _jacobian

S6 = 6**0.5
C = ((4 - S6) / 10, (4 + S6) / 10, 1.0)
A = (
    ((88 - 7 * S6) / 360, (296 - 169 * S6) / 1800, (-2 + 3 * S6) / 225),
    ((296 + 169 * S6) / 1800, (88 + 7 * S6) / 360, (-2 - 3 * S6) / 225),
    ((16 - S6) / 36, (16 + S6) / 36, 1 / 9),
)
E = ((-13 - 7 * S6) / 3, (-13 + 7 * S6) / 3, -1 / 3)
MU_REAL = 3 + 3 ** (2 / 3) - 3 ** (1 / 3)
P = (
    (13 / 3 + 7 * S6 / 3, -23 / 3 - 22 * S6 / 3, 10 / 3 + 5 * S6),
    (13 / 3 - 7 * S6 / 3, -23 / 3 + 22 * S6 / 3, 10 / 3 - 5 * S6),
    (1 / 3, -8 / 3, 10 / 3),
)
P_T = tuple(tuple(P[i][j] for i in range(3)) for j in range(3))
NEWTON_MAXITER = 6
MIN_FACTOR, MAX_FACTOR = 0.2, 10.0


def _constants(problem, like):
    """The method's coefficients as arrays of ``like``'s dtype and device: ``A`` (3, 3), ``P`` transposed
    (the dense output's, ``Q = P^T Z``), ``E`` (1, 3); outside transforms made once per solve, with the
    identities of sizes ``3n`` and ``n`` after them."""
    xp = problem.xp
    if problem.xp is not polyad_xp and "radau" in problem.constants:
        return problem.constants["radau"]
    made = tuple(xp.asarray(c, dtype=like.dtype, device=like.device) for c in (A, P_T, (E,)))
    if problem.xp is not polyad_xp:
        n = problem.n
        # sparse Newton matrices (jac_sparsity) need no dense identities: (3n)^2 entries at large n
        sizes = (3 * n, n) if problem.sparse_jacobian is None else ()
        eyes = tuple(xp.eye(k, dtype=like.dtype, device=like.device) for k in sizes)
        problem.constants["radau"] = made = made + eyes
    return made


def _residual(problem, t, y, h, Z):
    """``G(Z) = Z - h A F(Z)``, ``F_i = f(t + c_i h, y + Z_i)``: shape (3, n)."""
    xp = problem.xp
    F = xp.stack([problem.rhs(t + C[i] * h, y + Z[i, ...]) for i in range(3)])
    return Z - h * (_constants(problem, Z)[0] @ F)


def _newton_matrix(xp, J, h, n, constants=None):
    """``I - h (A x J)`` of the flattened stages (row-major ``(3, n)``); ``constants``: ``A`` and the
    identity, made once (outside transforms)."""
    a, eye = constants or (None, None)
    a = xp.asarray(A, dtype=J.dtype, device=J.device) if a is None else a
    eye = xp.eye(3 * n, dtype=J.dtype, device=J.device) if eye is None else eye
    block = xp.reshape(a[:, None, :, None] * J[None, :, None, :], (3 * n, 3 * n))
    return eye - h * block


def _collocation_root(problem, t, y, h, M_inv, scale, tol, Z0, J):
    """The stage increments ``Z`` (the root of ``G``) by ``pa.custom_root``, with the Newton iteration's
    ``(converged, iterations, rate)``. The solve (``common.simplified_newton`` on plain arrays) is not
    differentiated; ``Z`` is, by the implicit function theorem: ``dZ = -(dG/dZ)^{-1} (dG/dc) dc`` for
    whatever ``G`` depends on (``t``, ``y``, ``h``, ``fun``'s parameters), each order of derivative one more
    tangent solve. The convergence report rides along as a second unknown ``info`` whose residual is
    zero (its derivative is zero; the tangent solve gives it none), since a root's aux has no abstract
    evaluation under ``pa.jit`` and ``pa.while_loop``. With ``jac_sparsity``, ``J`` is the Jacobian's CSR
    values and ``M_inv`` the step ``h`` of the Newton matrix ``I - h (A x J)``: the solve factorises it by
    the sparse LU, and the tangent and adjoint solves their ``3n`` system too (never a dense matrix)."""
    n, xp = problem.n, polyad_xp
    sparse = problem.sparse_jacobian
    info0 = xp.zeros((3,), dtype=Z0.dtype, device=Z0.device)

    def residual(x):
        Z, info = x
        return _residual(problem, t, y, h, Z), 0.0 * info

    def solve(f, x0):
        Z_start, info = x0
        early_exit = not any(isinstance(v, Tensor) for v in (Z_start, M_inv, scale))  # else a batch
        newton = M_inv
        if sparse is not None:  # the stages' Newton matrix from J's values, factorised once per (h, J)
            newton = sparse.factor("radau", J, 0.0, -sparse.concrete(M_inv), A).solve
        Z, converged, iterations, rate = simplified_newton(
            xp, lambda Z: f((Z, info))[0], Z_start, newton, scale, tol, early_exit, NEWTON_MAXITER
        )
        report = xp.stack([xp.astype(converged, Z.dtype), xp.astype(iterations, Z.dtype), rate])
        return Z, report

    def tangent_solve(g, b):
        # g is exactly dG/dZ at the root (or its transpose, in reverse mode); the Newton matrix, with a
        # Jacobian kept from earlier steps, is not (its solution would be a derivative off by h dJ)
        bZ, b_info = b
        zero_info = 0.0 * b_info  # from an input: a zero made here is a FreshTensor inside the kernel
        if sparse is not None:  # g's 3n x 3n CSR values along the colours, the sparse LU
            return sparse.solve_linear(lambda v: g((v, zero_info))[0], bZ, 3), zero_info
        matrix = xp.reshape(jacfwd(lambda v: g((v, zero_info))[0])(bZ), (3 * n, 3 * n))  # g is linear
        x = xp.linalg.solve(matrix, xp.reshape(bZ, (3 * n, 1)))
        return xp.reshape(x, (3, n)), zero_info

    # the Newton iteration judges its own convergence (a step whose iteration failed is rejected)
    Z, info = custom_root(residual, (Z0, info0), solve, tangent_solve, residual_rtol=math.inf)
    info = polyad_stop_gradient(info)  # a report, no derivative (no integer cotangents downstream)
    return Z, info[0] > 0.5, xp.astype(info[1], xp.int64), info[2]


def _dense_coefficients(problem, Z):
    """The collocation polynomial of a step: ``y(t + x h) = y + sum_j Q_j x^(j+1)``, ``Q`` (3, n)."""
    return _constants(problem, Z)[1] @ Z


def _error_stages(problem, Z, h_div):
    """``(E_0 Z_0 + E_1 Z_1 + E_2 Z_2) / h``, the error estimate's combination of the stages."""
    return (_constants(problem, Z)[2] @ Z)[0, ...] / h_div


def _extrapolated(xp, Q, h_prev, h):
    """Newton's starting point, SciPy's: the previous step's collocation polynomial at this step's
    stages, less the state (zero before the first step)."""
    started = h_prev != 0
    ratio = h / xp.where(started, h_prev, 1.0)
    rows = []
    for c in C:
        x = 1.0 + c * ratio
        rows.append(xp.stack([x - 1, x * x - 1, x * x * x - 1]))
    return xp.where(started, xp.stack(rows) @ Q, 0.0 * Q)


def _predict_factor(xp, h_abs, h_abs_old, err, err_old):
    usable = (err_old > 0) & (h_abs_old > 0) & (err > 0)
    ratio = xp.where(usable, err_old / xp.where(usable, err, 1.0), 1.0)
    multiplier = xp.where(usable, h_abs / xp.where(usable, h_abs_old, 1.0) * ratio**0.25, 1.0)
    return xp.where(err > 0, xp.minimum(1.0, multiplier) * xp.where(err > 0, err, 1.0) ** -0.25, MAX_FACTOR)


def initial_state(problem, t0, y0, int_dtype, first_step=None):
    """The explicit methods' state, the controller's history (-1: none), the Jacobian at ``(t0, y0)``
    and whether it is current (computed at the state it is used at), the counters."""
    xp = problem.xp
    state = common.base_state(problem, t0, y0, int_dtype, first_step)
    zero = xp.zeros((), dtype=y0.dtype, device=y0.device)
    count = xp.zeros((), dtype=int_dtype, device=y0.device)
    njev = count + (0 if common.constant_jacobian(problem) else 1)
    state.update(h_abs_old=zero - 1.0, err_old=zero - 1.0, njev=njev, nlu=count)
    state.update(Q=xp.zeros((3, problem.n), dtype=y0.dtype, device=y0.device), h_prev=zero)
    state["J"] = _jacobian(problem, t0, y0)
    state["jac_current"] = xp.asarray(True, device=y0.device)
    return state


def attempt(problem, state, max_steps, eager):
    """One attempted Radau step (as ``explicit.attempt``): accepted; rejected for its error (a smaller
    step), or because Newton failed (with a Jacobian not current: the same step again with a fresh one,
    as SciPy; else half the step); or failed. The Jacobian is kept from step to step and taken afresh
    where SciPy does: after a step whose Newton iteration converged slowly, and after a failure.
    Outside every transform (``eager``): ``eager_attempt``."""
    if eager:
        return eager_attempt(problem, state, max_steps)
    xp, stop_gradient = problem.xp, problem.sg  # polyad's namespace
    t, y, f = state["t"], state["y"], state["f"]
    h_abs, rejected = stop_gradient(state["h_abs"]), state["rejected"]
    J, current = stop_gradient(state["J"]), state["jac_current"]  # the carry's, not differentiated
    direction = problem.direction
    ts = stop_gradient(t)
    min_step = 10 * xp.abs(xp.nextafter(ts, ts + direction) - ts)
    fresh = ~rejected & ((h_abs > problem.max_step) | (h_abs < min_step))  # SciPy forgets the history
    h_abs_old = xp.where(fresh, -1.0, stop_gradient(state["h_abs_old"]))
    err_old = xp.where(fresh, -1.0, stop_gradient(state["err_old"]))
    h_abs = xp.where(rejected, h_abs, xp.minimum(xp.maximum(h_abs, min_step), problem.max_step))
    too_small = rejected & (h_abs < min_step)
    t_new = t + h_abs * direction
    t_new = xp.where(direction * (t_new - problem.t_bound) > 0, problem.t_bound, t_new)
    h = t_new - t
    hs, ys = stop_gradient(h), stop_gradient(y)
    scale = stop_gradient(problem.atol + xp.abs(ys) * problem.rtol)
    tol = max(10 * EPS / problem.rtol, min(0.03, problem.rtol**0.5))
    Z0 = _extrapolated(xp, stop_gradient(state["Q"]), stop_gradient(state["h_prev"]), hs)
    sparse = problem.sparse_jacobian  # jac_sparsity: J is its CSR values, factorised in the kernels
    if sparse is None:
        M_inv = stop_gradient(xp.linalg.inv(_newton_matrix(xp, J, hs, problem.n)))
    else:
        M_inv = hs  # the Newton matrix I - h (A x J) by its h
    Z, converged, iterations, rate = _collocation_root(problem, t, y, h, M_inv, scale, tol, Z0, J)
    Z_star = stop_gradient(Z)
    y_new = y + Z[2, ...]
    # the error estimate and the controller, not differentiated
    h_div = xp.where(hs == 0, 1.0, hs)  # a zero step: an example vmap runs on after it finished
    if sparse is None:
        eye = xp.eye(problem.n, dtype=ys.dtype, device=ys.device)
        M_real = MU_REAL / h_div * eye - J

        def solve_real(v):
            return xp.linalg.solve(M_real, v[:, None])[:, 0]
    else:

        def solve_real(v):
            return sparse.traced_shifted_solve(J, MU_REAL / h_div, -1.0, v)

    ZE = _error_stages(problem, Z_star, h_div)
    fs = stop_gradient(f)
    error = solve_real(fs + ZE)
    yn = stop_gradient(y_new)
    scale_new = stop_gradient(problem.atol + xp.maximum(xp.abs(ys), xp.abs(yn)) * problem.rtol)
    err = rms(xp, error / scale_new)
    again = converged & rejected & (err > 1)
    one = xp.ones_like(state["njev"])
    nfev = state["nfev"] + 3 * iterations
    error2 = solve_real(stop_gradient(problem.rhs(ts, ys + error)) + ZE)
    err = xp.where(again, rms(xp, error2 / scale_new), err)
    nfev = nfev + one
    safety = 0.9 * (2 * NEWTON_MAXITER + 1) / (2 * NEWTON_MAXITER + xp.astype(iterations, ys.dtype))
    factor = _predict_factor(xp, h_abs, h_abs_old, err, err_old)
    accept = converged & (err <= 1) & ~too_small
    # SciPy's: a slowly converging step refreshes the Jacobian (never a matrix jac=)
    recompute = accept & (iterations > 2) & (rate > 1e-3) & (not common.constant_jacobian(problem))
    retry = ~converged & ~current & ~too_small  # a fresh Jacobian, the same step
    grow = xp.minimum(MAX_FACTOR, safety * factor)
    grow = xp.where(~recompute & (grow < 1.2), 1.0, grow)
    shrink = xp.where(
        converged, xp.maximum(MIN_FACTOR, safety * factor), xp.where(retry, xp.ones_like(hs), 0.5)
    )
    new_h_abs = stop_gradient(xp.abs(h)) * xp.where(accept, grow, shrink)
    f_new = problem.rhs(t_new, y_new)
    nfev = nfev + one
    # the Jacobian for the next attempt: at the new point after a slowly converging step, at this one
    # after a failure with a stale one, else kept
    constant = common.constant_jacobian(problem)  # a matrix jac=: never evaluated again
    need = (recompute | retry) & (not constant)
    njev = state["njev"]
    at_t = xp.where(accept, stop_gradient(t_new), ts)
    J = xp.where(need, _jacobian(problem, at_t, xp.where(accept, yn, ys)), J)
    njev = njev + xp.where(need, one, 0 * one)
    attempts = state["attempts"] + 1
    finished = accept & (direction * (t_new - problem.t_bound) >= 0)
    status = common.status_after(xp, too_small, finished, attempts, max_steps, state["status"])
    new = {
        "t": xp.where(accept, t_new, t),
        "y": xp.where(accept, y_new, y),
        "f": xp.where(accept, f_new, f),
        "h_abs": xp.where(too_small, h_abs, new_h_abs),
        "h_abs_old": xp.where(accept, h_abs, h_abs_old),
        "err_old": xp.where(accept, err, err_old),
        "rejected": ~accept,
        "status": status,
        "attempts": attempts,
        "nfev": nfev,
        "njev": njev,
        "nlu": state["nlu"] + 2 * one,
        "J": J,
        "jac_current": need | (current & ~accept) | constant,
        "Q": xp.where(accept, _dense_coefficients(problem, Z_star), stop_gradient(state["Q"])),
        "h_prev": xp.where(accept, hs, stop_gradient(state["h_prev"])),
    }
    return new, Step(t, t_new, h, (y, _dense_coefficients(problem, Z)))


def interpolate(problem, step, te):
    """The collocation polynomial of ``step`` (its ``data``: ``y`` at its start and ``Q``) at the times
    ``te``: ``y + sum_j Q_j x^(j+1)``, ``x = (te - t_old) / h``; shape ``(m, n)``."""
    xp = problem.xp
    y, Q = step.data
    # a zero step (an example vmap runs on after it finished) divides by 1: its values are masked
    x = xp.reshape((te - step.t_old) / xp.where(step.h == 0, 1.0, step.h), (-1, 1))
    return y + x * Q[0, ...] + x * x * Q[1, ...] + x * x * x * Q[2, ...]


# ------------------------------------------------------------------------------ outside every transform


def _newton_eager(xp, residual, Z, solve, scale, tol):
    """``common.simplified_newton`` on concrete values with its scalars as Python floats (the same arithmetic
    in float64, so the same result; an array's ``where`` costs microseconds): ``(Z, converged,
    iterations, rate)``; ``solve(v)``: the Newton matrix's solution for the flat ``v``."""
    shape = tuple(Z.shape)
    size = shape[0] * shape[1]
    rate, norm_old = 0.0, -1.0
    for k in range(NEWTON_MAXITER):
        G = residual(Z)
        dZ = -xp.reshape(solve(xp.reshape(G, (size,))), shape)
        dnorm = float_rms(xp, dZ / scale)
        has_rate = norm_old > 0
        if has_rate:
            rate = dnorm / norm_old
        safe = 1 - rate if rate < 1 else 1.0
        # a non-finite G makes dnorm non-finite: G is tested only then
        if (not math.isfinite(dnorm) and not bool(xp.all(xp.isfinite(G)))) or (
            has_rate and (rate >= 1 or float_pow(rate, NEWTON_MAXITER - k) / safe * dnorm > tol)
        ):
            return Z, False, k + 1, rate
        Z = Z + dZ
        if dnorm == 0 or (has_rate and rate / safe * dnorm < tol):
            return Z, True, k + 1, rate
        norm_old = dnorm
    return Z, False, NEWTON_MAXITER, rate


def eager_attempt(problem, state, max_steps):
    """``attempt`` outside every transform: the same decisions on Python floats (SciPy's control flow:
    a branch where ``attempt`` selects with ``where``, no right-hand side at a rejected point), the
    arrays on the backend's namespace."""
    xp = problem.xp
    t, y, f, J = state["t"], state["y"], state["f"], state["J"]
    tf, h_abs, rejected = float(t), float(state["h_abs"]), bool(state["rejected"])
    current, attempts = bool(state["jac_current"]), int(state["attempts"]) + 1
    nfev, njev, nlu = int(state["nfev"]), int(state["njev"]), int(state["nlu"])
    direction, t_bound, max_step = float(problem.direction), float(problem.t_bound), problem.max_step
    min_step = 10 * abs(math.nextafter(tf, tf + direction) - tf)
    fresh = not rejected and (h_abs > max_step or h_abs < min_step)  # SciPy forgets the history
    h_abs_old = -1.0 if fresh else float(state["h_abs_old"])
    err_old = -1.0 if fresh else float(state["err_old"])
    if not rejected:
        h_abs = min(max(h_abs, min_step), max_step)
    new = dict(state, attempts=attempts, h_abs_old=h_abs_old, err_old=err_old, rejected=True)
    if rejected and h_abs < min_step:
        new.update(status=FAILED, h_abs=h_abs)
        return new, None
    t_new_arr, t_new, h = common.next_time(xp, tf, h_abs, direction, t_bound, y)
    scale = problem.atol + xp.abs(y) * problem.rtol
    tol = max(10 * EPS / problem.rtol, min(0.03, problem.rtol**0.5))
    Q, h_prev = state["Q"], float(state["h_prev"])
    if h_prev != 0:  # Newton starts from the last step's collocation polynomial (zero at the first)
        xs = [1.0 + c * (h / h_prev) for c in C]
        W = xp.asarray([[x - 1, x * x - 1, x * x * x - 1] for x in xs], dtype=Q.dtype, device=Q.device)
        Z0 = W @ Q
    else:
        Z0 = xp.zeros_like(Q)
    sparse = problem.sparse_jacobian  # jac_sparsity: J is the backend's CSR matrix, factorised sparse
    h_div = 1.0 if h == 0 else h
    if sparse is None:
        A_, _, _, eye3, eye = _constants(problem, y)
        M_inv = xp.linalg.inv(_newton_matrix(xp, J, h, problem.n, (A_, eye3)))
        solve = M_inv.__matmul__
    else:
        solve = sparse.radau(J, h, A).solve
    t_arr = xp.asarray(tf, dtype=y.dtype, device=y.device)
    Z, converged, iterations, rate = _newton_eager(
        xp, lambda Z: _residual(problem, t_arr, y, h, Z), Z0, solve, scale, tol
    )
    nfev += 3 * iterations
    nlu += 2
    y_new = y + Z[2, ...]
    # the error estimate and the controller
    if sparse is None:
        M_real = MU_REAL / h_div * eye - J

        def solve_real(v):
            return xp.linalg.solve(M_real, v[:, None])[:, 0]
    else:
        solve_real = sparse.shifted(J, MU_REAL / h_div, -1.0).solve
    ZE = _error_stages(problem, Z, h_div)
    error = solve_real(f + ZE)
    scale_new = problem.atol + xp.maximum(xp.abs(y), xp.abs(y_new)) * problem.rtol
    err = float_rms(xp, error / scale_new)
    if converged and rejected and err > 1:
        error = solve_real(problem.rhs(t_arr, y + error) + ZE)
        err = float_rms(xp, error / scale_new)
        nfev += 1
    safety = 0.9 * (2 * NEWTON_MAXITER + 1) / (2 * NEWTON_MAXITER + iterations)
    if err > 0:
        multiplier = 1.0
        if err_old > 0 and h_abs_old > 0:
            multiplier = h_abs / h_abs_old * float_pow(err_old / err, 0.25)
        factor = min(1.0, multiplier) * float_pow(err, -0.25)
    else:
        factor = MAX_FACTOR
    accept = converged and err <= 1
    recompute = accept and iterations > 2 and rate > 1e-3 and not common.constant_jacobian(problem)
    retry = not converged and not current  # a fresh Jacobian, the same step
    if accept:
        grow = min(MAX_FACTOR, safety * factor)
        new_h_abs = abs(h) * (1.0 if not recompute and grow < 1.2 else grow)
    elif converged:
        new_h_abs = abs(h) * max(MIN_FACTOR, safety * factor)
    else:
        new_h_abs = abs(h) * (1.0 if retry else 0.5)
    constant = common.constant_jacobian(problem)  # a matrix jac=: never evaluated again
    new.update(
        h_abs=new_h_abs,
        nfev=nfev,
        nlu=nlu,
        jac_current=recompute or retry or (current and not accept) or constant,
    )
    if (
        recompute or retry
    ) and not constant:  # the Jacobian at the new point after a slowly converging step, else here
        J = _jacobian(problem, t_new_arr, y_new) if accept else _jacobian(problem, t_arr, y)
        new.update(J=J, njev=njev + 1)
    if not accept:
        new["status"] = FAILED if attempts >= max_steps else RUNNING
        return new, None
    f_new = problem.rhs(t_new_arr, y_new)
    new["nfev"] = nfev + 1
    finished = direction * (t_new - t_bound) >= 0
    status = FINISHED if finished else RUNNING
    if status == RUNNING and attempts >= max_steps:
        status = FAILED
    Q_new = _dense_coefficients(problem, Z)
    new.update(t=t_new_arr, y=y_new, f=f_new, h_abs_old=h_abs, err_old=err, rejected=False, status=status)
    new.update(Q=Q_new, h_prev=h)
    return new, Step(t, t_new_arr, t_new_arr - t, (y, Q_new))


RADAU = Method("Radau", 3, initial_state, attempt, interpolate, stiff=True)
