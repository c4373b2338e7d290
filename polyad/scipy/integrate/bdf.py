"""SciPy's variable-order BDF (``method="BDF"``): the numerical differentiation formulas of orders 1 to 5
in Shampine and Reichelt's quasi-constant step form (MATLAB's ode15s, SciPy's ``BDF``), written in polyad
ops.

The state keeps the backward differences ``D`` of the solution (``MAX_ORDER + 3`` rows); a step predicts
``y_predict = D_0 + ... + D_order`` and solves ``d + psi - c f(t_new, y_predict + d) = 0`` (``c = h /
alpha_order``) by simplified Newton iterations with the matrix ``I - c J``. The error estimate, the order
and step-size choice, and the Jacobian and LU reuse are SciPy's: the Jacobian is computed afresh only when
Newton fails with a stale one, the Newton matrix when the step size or order changed (``nlu`` counts
them as SciPy's; outside transforms each Newton iteration solves with it by the backend's ``solve``,
LAPACK's LU as SciPy's ``lu_solve``, so the iterates are SciPy's to the bit: factorising once per matrix
would need a factorisation the Array API lacks; under a transform its inverse is carried). With
``jac_sparsity`` outside transforms the Jacobian is the backend's CSR matrix and the Newton matrix is
factorised once by the backend's sparse LU (SciPy's policy: SuperLU's ``splu``), its factors reused by
every iteration and step until SciPy would form a new one (``sparse_newton.py``).

Outside every transform ``eager_attempt`` runs SciPy's step (its loop of tries, on Python floats, one
attempt per accepted step), so the steps are SciPy's to rounding. Under a transform ``attempt`` runs one
try as ``where`` selections (``pa.while_loop`` repeats it), the dynamic order selecting rows of ``D`` by
masks, and the Newton solve goes through ``pa.custom_root`` as Radau's: the iteration on plain arrays,
``d`` differentiated by the implicit function theorem with the exact ``dG/dd = I - c df/dy`` at the root.
The differences ``D`` carry the derivative from step to step; the controller's decisions do not.
"""

import math

import polyad.xp as polyad_xp
from polyad.api.jacobians import jacfwd
from polyad.backends.host import np
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
)

MAX_ORDER = 5
ROWS = MAX_ORDER + 3
NEWTON_MAXITER = 4
MIN_FACTOR, MAX_FACTOR = 0.2, 10.0
# the NDF coefficients (Shampine and Reichelt; kappa 0 at order 5: BDF), computed as SciPy's in float64
_KAPPA = np.array([0, -0.1850, -1 / 9, -0.0823, -0.0415, 0])
_GAMMA = np.hstack((0, np.cumsum(1 / np.arange(1, MAX_ORDER + 1))))
GAMMA = tuple(_GAMMA.tolist())
ALPHA = tuple(((1 - _KAPPA) * _GAMMA).tolist())
ERROR_CONST = tuple((_KAPPA * _GAMMA + 1 / np.arange(1, MAX_ORDER + 2)).tolist())


def _newton_tol(rtol):
    return max(10 * EPS / rtol, min(0.03, rtol**0.5))


def _host_R(order, factor):
    """SciPy's ``R(order, factor)`` on the host: ``M[i, j] = (i - 1 - factor j) / i`` below the first row
    and column (row 0 ones, column 0 zeros below it), its cumulative product down the columns."""
    k = np.arange(1, order + 1)
    M = np.zeros((order + 1, order + 1))
    M[1:, 1:] = (k[:, None] - 1 - factor * k) / k[:, None]
    M[0] = 1
    return np.cumprod(M, axis=0)


U_FULL = tuple(map(tuple, _host_R(MAX_ORDER, 1).tolist()))  # U = R(order, 1): integers, U U = I


def _change_eager(xp, D, order, factor):
    """SciPy's ``change_D`` outside transforms: ``D[:order+1] = (R U)^T D[:order+1]``, to step sizes
    ``factor`` times the current one."""
    RU_T = _host_R(order, float(factor)).dot(_host_R(order, 1)).T
    RU_T = xp.asarray(RU_T, dtype=D.dtype, device=D.device)
    return xp.concat([RU_T @ D[: order + 1, ...], D[order + 1 :, ...]])


def _change_traced(xp, D, order, factor):
    """``change_D`` with a traced ``order`` (an int array) and ``factor``: the full ``R U`` of order
    ``MAX_ORDER`` masked to the block of the current order (its entries there are those of the small one:
    each is a product down its column), the identity beyond it. ``factor`` 1 changes nothing (``U U =
    I`` exactly)."""
    j = xp.asarray(list(range(MAX_ORDER + 1)), dtype=D.dtype, device=D.device)
    # its own array, not a view of j: reverse mode under vmap failed to make such a view writeable again
    # once released while j's array was still held (polyad.transforms.reverse.release)
    i = xp.asarray([[float(r)] for r in range(1, MAX_ORDER + 1)], dtype=D.dtype, device=D.device)
    M = xp.where(j == 0, 0.0, (i - 1 - xp.reshape(factor, (1, 1)) * j) / i)  # rows 1..MAX_ORDER
    rows = [xp.ones_like(j)]
    for r in range(MAX_ORDER):
        rows.append(rows[-1] * M[r, ...])
    R = xp.stack(rows)
    index = xp.asarray(list(range(MAX_ORDER + 1)), device=D.device)
    block = (xp.reshape(index, (-1, 1)) <= order) & (xp.reshape(index, (1, -1)) <= order)
    U = xp.where(block, xp.asarray(U_FULL, dtype=D.dtype, device=D.device), 0.0)
    eye = xp.eye(MAX_ORDER + 1, dtype=D.dtype, device=D.device)
    RU = xp.where(block, xp.where(block, R, 0.0) @ U, eye)
    head = xp.matrix_transpose(RU) @ D[: MAX_ORDER + 1, ...]
    return xp.concat([head, D[MAX_ORDER + 1 :, ...]])


def _pick(xp, table, order, like):
    """``table[order]`` for a traced integer ``order``."""
    values = xp.asarray(list(table), dtype=like.dtype, device=like.device)
    index = xp.asarray(list(range(len(table))), device=like.device)
    return xp.sum(xp.where(index == order, values, 0.0))


def _row(xp, D, k):
    """``D[k]`` for a traced integer ``k`` (rows not selected by ``where``: a nan there stays there)."""
    index = xp.asarray(list(range(D.shape[0])), device=D.device)
    return xp.sum(xp.where(xp.reshape(index == k, (-1, 1)), D, 0.0), axis=0)


def initial_state(problem, t0, y0, int_dtype, first_step=None):
    """``common.base_state``, the differences ``D`` (``y0`` and ``h f0``), order 1, the Jacobian at
    ``(t0, y0)`` and no LU yet. ``f`` stays ``f(t0, y0)`` (the method never needs it again)."""
    xp = problem.xp
    state = common.base_state(problem, t0, y0, int_dtype, first_step)
    n = problem.n
    zeros = xp.zeros((ROWS - 2, n), dtype=y0.dtype, device=y0.device)
    first = state["f"] * (problem.sg(state["h_abs"]) * problem.direction)
    state["D"] = xp.concat([xp.stack([y0, first]), zeros])
    count = xp.zeros((), dtype=int_dtype, device=y0.device)
    J = common.jacobian(problem, t0, y0)
    njev = count + (0 if common.constant_jacobian(problem) else 1)
    if problem.sparse_jacobian is None:
        lu = 0.0 * J  # the inverse Newton matrix
    elif xp is not polyad_xp:
        lu = None  # the sparse factors, made when needed
    else:  # under a transform: the c of the Newton matrix I - c J (J its CSR values)
        lu = xp.zeros((), dtype=y0.dtype)
    state.update(order=count + 1, n_equal=count, njev=njev, nlu=count, J=J, lu=lu)
    state["lu_valid"] = xp.asarray(False, device=y0.device)
    state["jac_current"] = xp.asarray(False, device=y0.device)
    return state


def interpolate(problem, step, te):
    """SciPy's BDF interpolant of ``step`` (its ``data``: the differences ``D``, the order and the next
    signed step size ``h``, as the step left them) at ``te``: ``D_0 + sum_j D_{j+1} prod_{i<=j} (te -
    t_new + i h) / ((i + 1) h)``; shape ``(m, n)``."""
    xp = problem.xp
    D, order, h = step.data
    h = xp.where(h == 0, 1.0, h) if xp is polyad_xp else h  # an example vmap runs on after it finished
    eager = isinstance(order, int)
    out, p = D[0, ...], None
    for j in range(order if eager else MAX_ORDER):
        x = (te - (step.t_new - h * j)) / (h * (1 + j))
        p = x if p is None else p * x
        term = xp.reshape(p, (-1, 1)) * D[j + 1, ...]
        out = out + (term if eager else xp.where(j < order, term, 0.0))
    return out + 0.0 * xp.reshape(te, (-1, 1))


# ------------------------------------------------------------------------------ under a transform


def _bdf_root(problem, t_new, y_predict, c, psi, M_inv, scale, tol, J):
    """``d`` solving ``d + psi - c f(t_new, y_predict + d) = 0`` by ``pa.custom_root`` (the simplified
    Newton iteration in the kernel, ``d`` differentiated implicitly), with ``(converged, iterations)``.
    With ``jac_sparsity``, ``J`` is the Jacobian's CSR values and ``M_inv`` the ``c`` of the Newton
    matrix ``I - c J``, factorised by the sparse LU in the kernel, as are the tangent and adjoint solves."""
    xp = polyad_xp
    sparse = problem.sparse_jacobian
    info0 = xp.zeros((3,), dtype=y_predict.dtype, device=y_predict.device)

    def residual(x):
        d, info = x
        return d + psi - c * problem.rhs(t_new, y_predict + d), 0.0 * info

    def solve(f, x0):
        d0, info = x0
        early_exit = not any(isinstance(v, Tensor) for v in (d0, M_inv, scale))
        newton = M_inv if sparse is None else sparse.factor("shifted", J, 1.0, -sparse.concrete(M_inv)).solve
        d, converged, iterations, rate = common.simplified_newton(
            xp, lambda d: f((d, info))[0], d0, newton, scale, tol, early_exit, NEWTON_MAXITER
        )
        return d, xp.stack([xp.astype(converged, d.dtype), xp.astype(iterations, d.dtype), rate])

    def tangent_solve(g, b):
        bd, b_info = b
        zero_info = 0.0 * b_info
        if sparse is not None:  # g's CSR values along the colours, the sparse LU (either direction)
            return sparse.solve_linear(lambda v: g((v, zero_info))[0], bd, 1), zero_info
        matrix = jacfwd(lambda v: g((v, zero_info))[0])(bd)  # g is linear: I - c df/dy at the root
        return xp.linalg.solve(matrix, xp.reshape(bd, (-1, 1)))[:, 0], zero_info

    d, info = custom_root(residual, (0.0 * y_predict, info0), solve, tangent_solve, residual_rtol=math.inf)
    info = polyad_stop_gradient(info)
    return d, info[0] > 0.5, xp.astype(info[1], xp.int64)


def _differences_after(xp, D, d, order):
    """SciPy's update of the differences after an accepted step with a traced ``order``:
    ``D[order+2] = d - D[order+1]``, ``D[order+1] = d``, ``D[i] += D[i+1]`` for ``i = order..0``."""
    new = [None] * ROWS
    for r in reversed(range(ROWS)):
        row = D[r, ...]
        if r >= 3:
            row = xp.where(r == order + 2, d - D[r - 1, ...], row)
        row = xp.where(r == order + 1, d, row)
        if r < ROWS - 1:
            row = xp.where(r <= order, D[r, ...] + new[r + 1], row)
        new[r] = row
    return xp.stack(new)


def attempt(problem, state, max_steps, eager):
    """One try of a BDF step (SciPy's loop body) as ``where`` selections: accepted; rejected for its
    error (a smaller step), or because Newton failed (with a stale Jacobian: the same step again with a
    fresh one; else half the step); or failed. Outside every transform: ``eager_attempt``."""
    if eager:
        return eager_attempt(problem, state, max_steps)
    xp, sg = problem.xp, problem.sg
    t, D, order = state["t"], state["D"], state["order"]
    h_abs, rejected, n_equal = sg(state["h_abs"]), state["rejected"], state["n_equal"]
    J, M_inv, lu_valid = sg(state["J"]), sg(state["lu"]), state["lu_valid"]
    direction, ts = problem.direction, sg(t)
    fixed_jac = common.constant_jacobian(problem)
    min_step = 10 * xp.abs(xp.nextafter(ts, ts + direction) - ts)
    # the start of SciPy's step: h within [min_step, max_step], the differences rescaled to it
    over = ~rejected & (h_abs > problem.max_step)
    under = ~rejected & ~over & (h_abs < min_step)
    clamped = xp.where(over, problem.max_step, xp.where(under, min_step, h_abs))
    n_equal = xp.where(over | under, 0, n_equal)
    rescale = xp.where(over | under, clamped / common.positive(xp, h_abs), 1.0)
    h_abs = clamped
    current = xp.where(rejected, state["jac_current"], fixed_jac)
    too_small = h_abs < min_step
    t_new = t + h_abs * direction
    cut = direction * (t_new - problem.t_bound) > 0
    t_new = xp.where(cut, problem.t_bound, t_new)
    h = t_new - t
    hs = sg(h)
    # the clamp's and the cut's rescalings as one (eagerly two: the same to rounding)
    # the cut's factor stays differentiable: the last step's differences depend on t1 through it (a
    # stopped factor lost that part of dy(t1)/dt1)
    rescale = rescale * xp.where(cut, h * direction / common.positive(xp, h_abs), 1.0)
    D = xp.where(sg(rescale) != 1, _change_traced(xp, D, order, rescale), D)
    n_equal = xp.where(cut, 0, n_equal)
    lu_valid = lu_valid & ~cut
    h_abs = xp.abs(hs)
    alpha = _pick(xp, ALPHA, order, hs)
    rows = xp.asarray(list(range(ROWS)), device=hs.device)
    y_predict = xp.sum(xp.where(xp.reshape(rows <= order, (-1, 1)), D, 0.0), axis=0)
    gammas = xp.where(
        (rows >= 1) & (rows <= order), xp.asarray(GAMMA + (0.0, 0.0), dtype=hs.dtype, device=hs.device), 0.0
    )
    psi = xp.sum(xp.reshape(gammas, (-1, 1)) * D, axis=0) / alpha
    scale = sg(problem.atol + problem.rtol * xp.abs(sg(y_predict)))
    c = h / alpha
    if problem.sparse_jacobian is None:
        eye = xp.eye(problem.n, dtype=hs.dtype, device=hs.device)
        M_inv = xp.where(lu_valid, M_inv, sg(xp.linalg.inv(eye - sg(c) * J)))
    else:  # the Newton matrix I - c J by its c (J: the CSR values), factorised in the root's kernel
        M_inv = xp.where(lu_valid, M_inv, sg(c))
    one = xp.ones_like(state["njev"])
    nlu = state["nlu"] + xp.where(lu_valid, 0 * one, one)
    d, converged, iterations = _bdf_root(
        problem, t_new, y_predict, c, psi, M_inv, scale, _newton_tol(problem.rtol), J
    )
    nfev = state["nfev"] + iterations
    y_new = y_predict + d
    ds, yn = sg(d), sg(y_new)
    safety = 0.9 * (2 * NEWTON_MAXITER + 1) / (2 * NEWTON_MAXITER + xp.astype(iterations, hs.dtype))
    scale_new = sg(problem.atol + problem.rtol * xp.abs(yn))
    err = rms(xp, _pick(xp, ERROR_CONST, order, hs) * ds / scale_new)
    retry = ~converged & ~current & ~too_small  # a fresh Jacobian, the same step
    halve = ~converged & current
    reject = converged & (err > 1)
    accept = converged & ~reject & ~too_small
    shrink = xp.maximum(
        MIN_FACTOR, safety * common.positive(xp, err) ** (-1.0 / xp.astype(order + 1, hs.dtype))
    )
    factor = xp.where(halve, 0.5, shrink)
    # an accepted step: the differences updated, then (after order + 1 equal steps) the order and step
    D_acc = _differences_after(xp, D, d, order)
    n_acc = n_equal + 1
    fo = xp.astype(order, hs.dtype)
    inf = xp.asarray(math.inf, dtype=hs.dtype, device=hs.device)
    err_m = xp.where(
        order > 1,
        rms(xp, _pick(xp, ERROR_CONST, order - 1, hs) * sg(_row(xp, D_acc, order)) / scale_new),
        inf,
    )
    err_p = xp.where(
        order < MAX_ORDER,
        rms(xp, _pick(xp, ERROR_CONST, order + 1, hs) * sg(_row(xp, D_acc, order + 2)) / scale_new),
        inf,
    )
    f_m, f_e, f_p = (_power(xp, e, -1.0 / (fo + k)) for k, e in enumerate((err_m, err, err_p)))
    up = xp.ones_like(order)  # the first largest factor's order, as SciPy's argmax
    delta = xp.where((f_m >= f_e) & (f_m >= f_p), -up, xp.where(f_e >= f_p, 0 * up, up))
    change = accept & (n_acc >= order + 1)
    new_order = xp.where(change, order + delta, order)
    grow = xp.minimum(MAX_FACTOR, safety * xp.maximum(f_m, xp.maximum(f_e, f_p)))
    # the differences to the next step size: after a change of order, a rejection or a halving (one
    # rescaling: factor 1 for none)
    factor = xp.where(accept, xp.where(change, grow, 1.0), xp.where(retry | too_small, 1.0, factor))
    D_next = xp.where(accept, D_acc, D)
    D_next = xp.where(factor != 1, _change_traced(xp, D_next, new_order, factor), D_next)
    h_next = h_abs * factor
    n_next = xp.where(accept, xp.where(change, 0, n_acc), xp.where(retry, n_equal, 0))
    J = xp.where(retry, common.jacobian(problem, sg(t_new), sg(y_predict)), J)
    attempts = state["attempts"] + 1
    finished = accept & (direction * (t_new - problem.t_bound) >= 0)
    new = {
        "t": xp.where(accept, t_new, t),
        "y": xp.where(accept, y_new, state["y"]),
        "f": state["f"],
        "h_abs": xp.where(too_small, h_abs, h_next),
        "rejected": ~accept,
        "status": common.status_after(xp, too_small, finished, attempts, max_steps, state["status"]),
        "attempts": attempts,
        "nfev": nfev,
        "njev": state["njev"] + xp.where(retry, one, 0 * one),
        "nlu": nlu,
        "D": xp.where(too_small, state["D"], D_next),
        "order": new_order,
        "n_equal": n_next,
        "J": J,
        "lu": M_inv,
        "lu_valid": ~retry & ~halve & ~change & ~too_small,
        "jac_current": retry | (current & ~accept),
    }
    return new, Step(t, t_new, h, (D_next, new_order, new["h_abs"] * direction))


def _power(xp, x, e):
    """``x ** e`` (``e < 0``) with SciPy's limits: 0 gives inf, inf gives 0."""
    finite = (x > 0) & (x < math.inf)
    value = xp.where(finite, x, 1.0) ** e
    return xp.where(x == 0, math.inf, xp.where(finite, value, 0.0))


# ------------------------------------------------------------------------------ outside every transform


def _newton_eager(problem, xp, t_new, y_predict, c, psi, M, scale, tol):
    """SciPy's ``solve_bdf_system`` on concrete values: ``(converged, iterations, y, d)``."""
    d = 0.0 * y_predict
    y = y_predict
    norm_old = None
    for k in range(NEWTON_MAXITER):
        f = problem.rhs(t_new, y)
        if not bool(xp.all(xp.isfinite(f))):
            return False, k + 1, y, d
        if problem.sparse_jacobian is not None:  # the sparse LU, factorised once per Newton matrix
            dy = M.solve(c * f - psi - d)
        else:  # LAPACK's LU each time: SciPy's lu_solve's iterates
            dy = xp.linalg.solve(M, c * f - psi - d)
        dy_norm = float_rms(xp, dy / scale)
        rate = None if norm_old is None else dy_norm / norm_old
        if rate is not None and (
            rate >= 1 or float_pow(rate, NEWTON_MAXITER - k) / (1 - rate) * dy_norm > tol
        ):
            return False, k + 1, y, d
        y = y + dy
        d = d + dy
        if dy_norm == 0 or (rate is not None and rate / (1 - rate) * dy_norm < tol):
            return True, k + 1, y, d
        norm_old = dy_norm
    return False, NEWTON_MAXITER, y, d


def eager_attempt(problem, state, max_steps):
    """SciPy's ``BDF._step_impl`` on concrete values: its tries (rejections, Jacobian refreshes) in one
    call, each counted as an attempt, until a step is accepted or the solve fails."""
    xp = problem.xp
    t, D, y = state["t"], state["D"], state["y"]
    tf, h_abs, order, n_equal = float(t), float(state["h_abs"]), int(state["order"]), int(state["n_equal"])
    J, M, lu_valid = state["J"], state["lu"], bool(state["lu_valid"])
    nfev, njev, nlu, attempts = (int(state[k]) for k in ("nfev", "njev", "nlu", "attempts"))
    direction, t_bound, max_step = float(problem.direction), float(problem.t_bound), problem.max_step
    min_step = 10 * abs(math.nextafter(tf, direction * math.inf) - tf)
    if h_abs > max_step:
        D, h_abs, n_equal = _change_eager(xp, D, order, max_step / h_abs), max_step, 0
    elif h_abs < min_step:
        D, h_abs, n_equal = _change_eager(xp, D, order, min_step / h_abs), min_step, 0
    current = common.constant_jacobian(problem)
    alpha, tol = ALPHA[order], _newton_tol(problem.rtol)
    sparse = problem.sparse_jacobian  # jac_sparsity: J is the backend's CSR matrix
    eye = None if sparse is not None else xp.eye(problem.n, dtype=y.dtype, device=y.device)
    gammas = xp.asarray(GAMMA[1 : order + 1], dtype=y.dtype, device=y.device)
    new = dict(state, rejected=True)
    while True:
        if h_abs < min_step or attempts >= max_steps:
            new.update(status=FAILED, attempts=attempts, nfev=nfev, njev=njev, nlu=nlu, D=D, h_abs=h_abs)
            new.update(n_equal=n_equal, J=J, lu=M, lu_valid=lu_valid)
            return new, None
        attempts += 1
        t_new = tf + h_abs * direction
        if direction * (t_new - t_bound) > 0:
            t_new = t_bound
            D, n_equal, lu_valid = _change_eager(xp, D, order, abs(t_new - tf) / h_abs), 0, False
        t_new_arr = xp.asarray(t_new, dtype=y.dtype, device=y.device)
        h = float(t_new_arr) - tf
        h_abs = abs(h)
        y_predict = xp.sum(D[: order + 1, ...], axis=0)
        scale = problem.atol + problem.rtol * xp.abs(y_predict)
        psi = (gammas @ D[1 : order + 1, ...]) / alpha
        c = h / alpha
        while True:
            if not lu_valid:
                M = eye - c * J if sparse is None else sparse.shifted(J, 1.0, -c)
                lu_valid, nlu = True, nlu + 1
            converged, iterations, y_new, d = _newton_eager(
                problem, xp, t_new_arr, y_predict, c, psi, M, scale, tol
            )
            nfev += iterations
            if converged or current:
                break
            J, njev, lu_valid, current = common.jacobian(problem, t_new_arr, y_predict), njev + 1, False, True
        if not converged:
            h_abs *= 0.5
            D, n_equal, lu_valid = _change_eager(xp, D, order, 0.5), 0, False
            continue
        safety = 0.9 * (2 * NEWTON_MAXITER + 1) / (2 * NEWTON_MAXITER + iterations)
        scale = problem.atol + problem.rtol * xp.abs(y_new)
        error_norm = float_rms(xp, ERROR_CONST[order] * d / scale)
        if error_norm > 1:
            factor = max(MIN_FACTOR, safety * float_pow(error_norm, -1 / (order + 1)))
            h_abs *= factor
            D, n_equal = _change_eager(xp, D, order, factor), 0  # the LU is kept, as SciPy's
            continue
        break
    n_equal += 1
    rows = [D[i, ...] for i in range(ROWS)]
    rows[order + 2] = d - rows[order + 1]
    rows[order + 1] = d
    for i in reversed(range(order + 1)):
        rows[i] = rows[i] + rows[i + 1]
    D = xp.stack(rows)
    if n_equal >= order + 1:
        inf = math.inf
        m = float_rms(xp, ERROR_CONST[order - 1] * D[order, ...] / scale) if order > 1 else inf
        p = float_rms(xp, ERROR_CONST[order + 1] * D[order + 2, ...] / scale) if order < MAX_ORDER else inf
        with np.errstate(divide="ignore"):  # SciPy's powers, of one array
            factors = (np.array([m, error_norm, p]) ** (-1 / np.arange(order, order + 3))).tolist()
        order += factors.index(max(factors)) - 1
        factor = min(MAX_FACTOR, safety * max(factors))
        h_abs *= factor
        D, n_equal, lu_valid = _change_eager(xp, D, order, factor), 0, False
    status = FINISHED if direction * (t_new - t_bound) >= 0 else RUNNING
    new.update(t=t_new_arr, y=y_new, D=D, order=order, n_equal=n_equal, h_abs=h_abs, rejected=False)
    new.update(status=status, attempts=attempts, nfev=nfev, njev=njev, nlu=nlu, J=J, lu=M)
    new.update(lu_valid=lu_valid, jac_current=False)
    return new, Step(t, t_new_arr, t_new_arr - t, (D, order, h_abs * direction))


BDF = Method("BDF", 1, initial_state, attempt, interpolate, stiff=True)
