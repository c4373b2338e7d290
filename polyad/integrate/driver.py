"""The discrete solve behind ``solve_ivp``: the arguments checked and made arrays, the attempts looped
(a Python loop outside every transform, ``pa.while_loop`` under one) and the ``OdeResult``."""

import optree

import polyad.config as config
import polyad.control.schedules as schedules
import polyad.dispatch as dispatch
import polyad.xp as xp
from polyad.control.closure import refuse_pre_dispatch_capture
from polyad.control.scan import captured, carry_bytes
from polyad.control.while_loop import while_loop
from polyad.core import Tensor, transform_active
from polyad.integrate import explicit, radau
from polyad.integrate.tableaus import DOP853, RK45
from polyad.ops.common import dtype_name, is_floating
from polyad.ops.elementwise import stop_gradient

METHODS = {"RK45": RK45, "DOP853": DOP853, "Radau": radau.RADAU}
SENSITIVITIES = ("discrete", "forward", "adjoint")
MESSAGES = {
    0: "The solver successfully reached the end of the integration interval.",
    -1: "Required step size is less than spacing between numbers.",
}
MAX_STEPS_MESSAGE = "The solver took max_steps attempted steps without reaching the end of the interval."
EPS = 2.220446049250313e-16
JIT_SLOTS = 256


class OdeResult(dict):
    """The solution, as SciPy's ``OdeResult``: a dict whose keys are also attributes.

    Fields: ``t`` (times, shape ``(n_points,)``), ``y`` (states, shape ``(n, n_points)``), ``status``
    (0: reached the end; -1: failed: a step size below the spacing of floating-point numbers, or
    ``max_steps`` attempts), ``message``, ``success`` (``status >= 0``), ``nfev`` (right-hand-side
    evaluations), ``njev`` and ``nlu`` (Jacobian evaluations and LU factorisations: 0 for explicit
    methods), ``sol``, ``t_events``, ``y_events`` (None: no dense output object, no events). Under a
    transform ``status``, ``success`` and ``nfev`` are arrays (one per example under vmap).
    """

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __repr__(self):
        return "\n".join(f"{k:>9}: {v!r}" for k, v in self.items())


def _floating_dtype(y0):
    if is_floating(y0):
        return y0.dtype
    if dtype_name(y0.dtype) in ("complex64", "complex128"):
        raise TypeError("solve_ivp: y0 must be real (complex states are not supported), got a complex array")
    return xp.float64


def _time(value, dtype, device, name):
    t = value if isinstance(value, Tensor) else xp.asarray(value)
    if tuple(t.shape) != ():
        raise ValueError(f"solve_ivp: {name} must be a scalar, got shape {tuple(t.shape)}")
    return xp.asarray(t, dtype=dtype, device=device)


def prepared(fun, t0, t1, y0, t_eval, args, tableau, rtol, atol, max_step, first_step, jac_sparsity=None):
    """The ``Problem``, the initial time and state, from the arguments (checked)."""
    if not isinstance(y0, Tensor):
        y0 = xp.asarray(y0)
    dtype = _floating_dtype(y0)
    y0 = xp.astype(y0, dtype)
    if len(y0.shape) == 0:
        y0 = xp.reshape(y0, (1,))
    if len(y0.shape) != 1:
        raise ValueError(f"solve_ivp: y0 must be 1-D, got shape {tuple(y0.shape)}")
    device = y0.device
    t0, t1 = _time(t0, dtype, device, "t_span[0]"), _time(t1, dtype, device, "t_span[1]")
    direction = xp.sign(stop_gradient(t1 - t0))
    direction = xp.where(direction == 0, 1.0, direction)
    if t_eval is not None:
        t_eval = xp.asarray(
            t_eval if isinstance(t_eval, Tensor) else xp.asarray(t_eval), dtype=dtype, device=device
        )
        if len(t_eval.shape) != 1:
            raise ValueError(f"solve_ivp: t_eval must be 1-D, got shape {tuple(t_eval.shape)}")
        if not transform_active():
            _check_t_eval(t_eval, t0, t1)
    if not (isinstance(max_step, int | float) and max_step > 0):
        raise ValueError(f"solve_ivp: max_step must be a positive number, got {max_step!r}")
    if not isinstance(atol, Tensor):
        atol = xp.asarray(atol, dtype=dtype, device=device)
    if len(atol.shape) not in (0, 1) or (len(atol.shape) == 1 and atol.shape[0] != y0.shape[0]):
        raise ValueError(
            f"solve_ivp: atol must be a scalar or of shape {tuple(y0.shape)}, got {tuple(atol.shape)}"
        )
    atol = stop_gradient(atol)
    namespace = None if transform_active() else dispatch.backend_of_array(y0).xp
    problem = explicit.Problem(
        fun, args, tableau, t1, direction, rtol, atol, max_step, t_eval, y0.shape[0], namespace, jac_sparsity
    )
    return problem, t0, y0


def _check_t_eval(t_eval, t0, t1):
    lo, hi = min(float(t0), float(t1)), max(float(t0), float(t1))
    values = [float(v) for v in t_eval]
    if any(v < lo or v > hi for v in values):
        raise ValueError(f"solve_ivp: t_eval must lie within t_span ({float(t0)}, {float(t1)})")
    step = [b - a for a, b in zip(values, values[1:])]
    forward = float(t1) >= float(t0)
    if any((d < 0) if forward else (d > 0) for d in step):
        raise ValueError("solve_ivp: t_eval must be sorted in the direction of integration")


def integrate(fun, t0, t1, y0, t_eval, args, *, tableau, rtol, atol, max_step, first_step, max_steps,
              checkpoints, max_memory, progress, ends_only=False, jac_sparsity=None):  # fmt: skip
    """The discrete solution: the attempts looped (a Python loop outside every transform, else
    ``pa.while_loop``), and the ``OdeResult``. ``ends_only``: with ``t_eval`` None, the solution at ``t0``
    and at the end only, outside transforms too (as under one)."""
    if not transform_active():
        refuse_pre_dispatch_capture("solve_ivp", "an ODE solver's steps")
    problem, t0, y0 = prepared(
        fun, t0, t1, y0, t_eval, args, tableau, rtol, atol, max_step, first_step, jac_sparsity
    )
    if first_step is not None and not (isinstance(first_step, int | float) and first_step > 0):
        raise ValueError(f"solve_ivp: first_step must be a positive number, got {first_step!r}")
    stepper = radau if tableau is radau.RADAU else explicit
    state = stepper.initial_state(
        problem, t0, y0, xp.int64, None if first_step is None else float(first_step)
    )
    if not transform_active():
        return _eager(stepper, problem, state, t0, y0, max_steps, progress, ends_only)
    checkpoints, max_memory = _loop_checkpoints(state, checkpoints, max_memory, max_steps)
    state = while_loop(
        lambda s: s["status"] == explicit.RUNNING,
        lambda s: stepper.attempt(problem, s, max_steps, eager=False),
        state,
        checkpoints=checkpoints,
        max_memory=max_memory,
    )
    if t_eval is None:
        t_out = xp.stack([t0, state["t"]])
        y_out = xp.stack([y0, state["y"]], axis=1)
    else:
        t_out, y_out = problem.t_eval, xp.matrix_transpose(state["out"])
    status = state["status"]
    return OdeResult(
        t=t_out, y=y_out, sol=None, t_events=None, y_events=None, nfev=state["nfev"],
        njev=state.get("njev", 0), nlu=state.get("nlu", 0),
        status=status, message="see status: 0 reached the end, -1 failed", success=status >= 0,
    )  # fmt: skip


def _loop_checkpoints(state, checkpoints, max_memory, max_steps):
    """``checkpoints="auto"`` under a capture (``pa.jit``) as an int: a compiled graph's shapes are fixed
    when it is traced, so the slots are decided then: as many as the budget holds, at most
    ``JIT_SLOTS`` (an int ``s`` allocates its ``s`` rows whatever the length, and the online schedule's
    bookkeeping grows with ``s``; pass an int ``checkpoints`` for more)."""
    if checkpoints != "auto" or not captured():
        return checkpoints, max_memory
    leaves = optree.tree_leaves(state)
    size = carry_bytes(leaves)
    budget = config.max_memory if max_memory is None else max_memory
    return max(1, min(max_steps, JIT_SLOTS, schedules.auto_slots(None, size, budget, 2 * size))), None


def _eager(stepper, problem, state, t0, y0, max_steps, progress, ends_only):
    """The integration outside every transform: SciPy's loop, every accepted step recorded."""
    ts, ys = [t0], [y0]
    bar = _progress_bar(problem, t0) if progress else None
    last = float(t0)
    while int(state["status"]) == explicit.RUNNING:
        state = stepper.attempt(problem, state, max_steps, eager=True)
        # lazy arrays (Dask) computed once an attempt: the next attempt's control reads values, which
        # would otherwise compute every attempt before it again
        state = dict(zip(state, dispatch.persisted(list(state.values()))))
        if not ends_only and not bool(state["rejected"]):
            ts.append(state["t"])
            ys.append(state["y"])
            if bar is not None:
                now = float(state["t"])
                bar.update(abs(now - last))
                last = now
    if bar is not None:
        bar.close()
    status = int(state["status"])
    message = MESSAGES[status]
    if status == explicit.FAILED and int(state["attempts"]) >= max_steps:
        message = MAX_STEPS_MESSAGE
    if problem.t_eval is None:
        if ends_only:
            ts, ys = [t0, state["t"]], [y0, state["y"]]
        t_out, y_out = xp.stack(ts), xp.stack(ys, axis=1)
    else:
        t_out, y_out = problem.t_eval, xp.matrix_transpose(state["out"])
    return OdeResult(
        t=t_out, y=y_out, sol=None, t_events=None, y_events=None, nfev=int(state["nfev"]),
        njev=int(state.get("njev", 0)), nlu=int(state.get("nlu", 0)),
        status=status, message=message, success=status >= 0,
    )  # fmt: skip


def _progress_bar(problem, t0):
    try:
        import tqdm  # noqa: PLC0415  (optional)
    except ImportError:
        raise ImportError("solve_ivp: progress=True needs tqdm (pip install tqdm)") from None
    return tqdm.tqdm(total=abs(float(problem.t_bound) - float(t0)), unit="t", unit_scale=True)
