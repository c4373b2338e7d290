"""``solve_ivp``: SciPy's initial value problem solver, written in polyad ops, so its solution is
differentiable with respect to ``y0``, ``args``, ``t_span``, ``t_eval`` and whatever ``fun`` closes over,
under every transform."""

import math
import warnings

import optree

import polyad.config as config
import polyad.control.schedules as schedules
import polyad.dispatch as dispatch
import polyad.xp as xp
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


def _checked_method(method):
    if isinstance(method, str) and method in METHODS:
        return METHODS[method]
    raise ValueError(f"solve_ivp: method must be one of {sorted(METHODS)}, got {method!r}")


def _time(value, dtype, device, name):
    t = value if isinstance(value, Tensor) else xp.asarray(value)
    if tuple(t.shape) != ():
        raise ValueError(f"solve_ivp: {name} must be a scalar, got shape {tuple(t.shape)}")
    return xp.asarray(t, dtype=dtype, device=device)


def solve_ivp(
    fun,
    t_span,
    y0,
    method="RK45",
    t_eval=None,
    dense_output=False,
    events=None,
    vectorized=False,
    args=None,
    *,
    rtol=1e-3,
    atol=1e-6,
    max_step=math.inf,
    first_step=None,
    sensitivity="discrete",
    checkpoints="auto",
    max_memory=None,
    max_steps=100_000,
    progress=False,
):
    """Solve ``y' = fun(t, y, *args)``, ``y(t0) = y0`` on ``t_span = (t0, t1)``, as
    ``scipy.integrate.solve_ivp``: the same methods, step-size control and output, differentiable.

    The solution is differentiable with respect to ``y0``, ``args``, ``t_span``, ``t_eval`` and every
    array ``fun`` closes over, by ``grad``, ``vjp``, ``jvp``, ``jacrev``, ``jacfwd``, ``hessian``,
    ``vmap`` and ``pa.jit``. The step-size controller's decisions are not differentiated (the error norm
    and the proposed step sizes pass through ``stop_gradient``, as in diffrax): a derivative is that of
    the numerical solution on its own grid of steps, which converges to the exact sensitivity as the
    tolerances shrink. Under ``vmap`` each example takes its own steps: the loop runs until the last
    example is done, the finished ones frozen, so every example's solution and derivative are those it has
    alone.

    Args:
        fun: ``fun(t, y, *args) -> dy/dt``, an array of ``y``'s shape, written with ``polyad.xp`` (or NumPy
            functions, which dispatch to polyad inside a transform).
        t_span: ``(t0, t1)``; ``t1 < t0`` integrates backwards.
        y0: the initial state, 1-D (a scalar is made 1-D, as SciPy does); real floating (integers become
            float64); the state keeps its dtype and device.
        method: "RK45" (Dormand-Prince 5(4)) or "DOP853" (Hairer's 8(5,3)).
        t_eval: times at which to report the solution (sorted in the direction of integration, within
            ``t_span``), from each method's dense output. None: every accepted step outside a transform,
            as SciPy; under a transform (a traced solution needs a fixed shape) the two ends ``t0`` and
            ``t1`` only.
        dense_output, events, vectorized: SciPy's; only their defaults are supported (``fun`` may be
            vectorised or not: it is called on one state).
        args: extra positional arguments of ``fun`` (a tuple), differentiable.
        rtol, atol: relative and absolute tolerances (``atol`` a scalar or one per component).
        max_step, first_step: SciPy's options (``first_step`` None: SciPy's initial step selection).
        sensitivity: "discrete" (the exact derivative of the numerical solution: reverse mode through the
            steps with checkpointing, forward mode alongside them); "forward" (reverse mode by integrating
            the tangents of every input alongside the state, ``jacfwd``'s loop: memory of the state times
            the number of inputs, no stored steps); "adjoint" (the continuous adjoint equation integrated
            backwards: memory of one state, approximate: its error is of the order of the tolerances, not
            of rounding). Forward-mode transforms (jvp, jacfwd) are "discrete" whatever this says.
        checkpoints, max_memory: what reverse mode of "discrete" stores (``pa.while_loop``'s): "auto" (as
            many states as ``max_memory`` holds, default ``pa.config.max_memory``), an int (at most that
            many states, the online binomial schedule), None (every state).
        max_steps: the most attempted steps (accepted or rejected); then the status is -1.
        progress: show a tqdm progress bar of ``t`` (outside transforms only: under one the loop is one op).

    Returns:
        An ``OdeResult`` with ``t``, ``y`` (shape ``(n, n_points)``), ``status``, ``message``,
        ``success``, ``nfev``, ``njev``, ``nlu``.

    Example:
        >>> import numpy as np, polyad as pa
        >>> from polyad.integrate import solve_ivp
        >>> def final(k):
        ...     sol = solve_ivp(lambda t, y, k: -k * y, (0.0, 3.0), np.array([2.0]), args=(k,),
        ...                     t_eval=np.array([3.0]), rtol=1e-10, atol=1e-12)
        ...     return sol.y[0, -1]
        >>> round(float(final(0.5)), 9)  # 2 exp(-1.5)
        0.44626032
        >>> round(float(pa.grad(final)(np.float64(0.5))), 9)  # -3 * 2 exp(-1.5)
        -1.338780961
    """
    tableau = _checked_method(method)
    if not callable(fun):
        raise TypeError(f"solve_ivp: fun must be callable, got {type(fun).__name__}")
    if dense_output or events is not None:
        raise NotImplementedError(
            "solve_ivp: dense_output=True and events are not supported; pass t_eval for the solution at "
            "given times"
        )
    if sensitivity not in SENSITIVITIES:
        raise ValueError(f"solve_ivp: sensitivity must be one of {SENSITIVITIES}, got {sensitivity!r}")
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
        raise ValueError(f"solve_ivp: max_steps must be an int >= 1, got {max_steps!r}")
    args = () if args is None else args
    if not isinstance(args, tuple):
        raise TypeError(f"solve_ivp: args must be a tuple (fun's extra arguments), got {type(args).__name__}")
    if not isinstance(t_span, tuple | list) or len(t_span) != 2:
        raise ValueError(f"solve_ivp: t_span must be a pair (t0, t1), got {t_span!r}")
    if not isinstance(rtol, int | float) or isinstance(rtol, bool) or not rtol > 0:
        raise ValueError(f"solve_ivp: rtol must be a positive number, got {rtol!r}")
    if rtol < 100 * EPS:
        warnings.warn(f"solve_ivp: rtol={rtol} is too small; setting it to {100 * EPS}", stacklevel=2)
        rtol = 100 * EPS
    options = dict(
        tableau=tableau, rtol=rtol, atol=atol, max_step=max_step, first_step=first_step, max_steps=max_steps,
        checkpoints=checkpoints, max_memory=max_memory, progress=progress,
    )  # fmt: skip
    if sensitivity == "discrete":
        return integrate(fun, t_span[0], t_span[1], y0, t_eval, args, **options)
    from_sensitivity = _sensitivity_module()
    return from_sensitivity.solve(fun, t_span[0], t_span[1], y0, t_eval, args, sensitivity, **options)


def _sensitivity_module():
    import polyad.integrate.sensitivity as sensitivity  # noqa: PLC0415  (it imports this module)

    return sensitivity


def prepared(fun, t0, t1, y0, t_eval, args, tableau, rtol, atol, max_step, first_step):
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
    namespace = None if transform_active() or tableau is radau.RADAU else dispatch.backend_of_array(y0).xp
    problem = explicit.Problem(
        fun, args, tableau, t1, direction, rtol, atol, max_step, t_eval, y0.shape[0], namespace
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
              checkpoints, max_memory, progress, ends_only=False):  # fmt: skip
    """The discrete solution: the attempts looped (a Python loop outside every transform, else
    ``pa.while_loop``), and the ``OdeResult``. ``ends_only``: with ``t_eval`` None, the solution at ``t0``
    and at the end only, outside transforms too (as under one)."""
    problem, t0, y0 = prepared(fun, t0, t1, y0, t_eval, args, tableau, rtol, atol, max_step, first_step)
    stepper = radau if tableau is radau.RADAU else explicit
    state = stepper.initial_state(problem, t0, y0, xp.int64)
    if first_step is not None:
        if not (isinstance(first_step, int | float) and first_step > 0):
            raise ValueError(f"solve_ivp: first_step must be a positive number, got {first_step!r}")
        state["h_abs"] = xp.asarray(float(first_step), dtype=y0.dtype, device=y0.device)
        state["nfev"] = state["nfev"] - 1
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
    when it is traced, so the slots the budget holds are decided then."""
    if checkpoints != "auto" or not captured():
        return checkpoints, max_memory
    leaves = optree.tree_leaves(state)
    size = carry_bytes(leaves)
    budget = config.max_memory if max_memory is None else max_memory
    return max(1, min(max_steps, schedules.auto_slots(None, size, budget, 2 * size))), None


def _eager(stepper, problem, state, t0, y0, max_steps, progress, ends_only):
    """The integration outside every transform: SciPy's loop, every accepted step recorded."""
    ts, ys = [t0], [y0]
    bar = _progress_bar(problem, t0) if progress else None
    last = float(t0)
    while int(state["status"]) == explicit.RUNNING:
        state = stepper.attempt(problem, state, max_steps, eager=True)
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
