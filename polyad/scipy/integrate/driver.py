"""The discrete solve behind ``solve_ivp``: the arguments checked and made arrays, the attempts looped
(a Python loop outside every transform, ``pa.while_loop`` under one) and the ``OdeResult``."""

import optree

import polyad.config as config
import polyad.control.schedules as schedules
import polyad.core.dispatch as dispatch
import polyad.xp as xp
from polyad.control.closure import refuse_pre_dispatch_capture
from polyad.control.while_loop import while_loop
from polyad.core import Tensor, capture_below, current_level, transform_active
from polyad.core.avals import bottom, dtype_kind, dtype_name, nbytes
from polyad.custom.derivatives import cell_tensors
from polyad.ops.elementwise import stop_gradient
from polyad.scipy.integrate.common import FAILED, RUNNING, Problem
from polyad.scipy.integrate.events import TERMINATED, EagerRecorder, initial_carry
from polyad.scipy.integrate.events import traced as traced_events

SENSITIVITIES = ("discrete", "forward", "adjoint")
MESSAGES = {
    0: "The solver successfully reached the end of the integration interval.",
    -1: "Required step size is less than spacing between numbers.",
    1: "A termination event occurred.",
}
MAX_STEPS_MESSAGE = "The solver took max_steps attempted steps without reaching the end of the interval."
EPS = 2.220446049250313e-16  # common.EPS
OUTSIDE = "solve_ivp: t_eval must lie within t_span"
UNSORTED = "solve_ivp: t_eval must be sorted in the direction of integration"
JIT_SLOTS = 256


class OdeResult(dict):
    """The solution, as SciPy's ``OdeResult``: a dict whose keys are also attributes.

    Fields: ``t`` (times, shape ``(n_points,)``), ``y`` (states, shape ``(n, n_points)``), ``status``
    (0: reached the end; 1: a terminal event; -1: failed: a step size below the spacing of floating-point
    numbers, or ``max_steps`` attempts), ``message``, ``success`` (``status >= 0``), ``nfev``
    (right-hand-side evaluations), ``njev`` and ``nlu`` (Jacobian evaluations and LU factorisations: 0
    for explicit methods), ``sol`` (``dense_output=True``: an ``OdeSolution``, else None), ``t_events``,
    ``y_events`` (with ``events``: one array per event, of its zeros and the states there, else None).
    Under a transform ``status``, ``success`` and ``nfev`` are arrays (one per example under vmap).
    """

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __repr__(self):
        return "\n".join(f"{k:>9}: {v!r}" for k, v in self.items())


def _floating_dtype(y0):
    kind = dtype_kind(y0.dtype)
    if kind == "c":
        raise TypeError(
            f"solve_ivp: y0 must be real, got a {dtype_name(y0.dtype)} array (complex states are not "
            "supported): integrate the real and imaginary parts as one real state, "
            "xp.concat([xp.real(y0), xp.imag(y0)]), with fun written on it"
        )
    return y0.dtype if kind == "f" else xp.float64


def lifted(value, depends_on):
    """``value`` as a tensor of the highest transform level among the leaves of ``depends_on`` (when it
    is below it), carrying no derivative. A user function called with it then makes its buffers
    (``np.zeros_like(y)``) at that level, so that writing a value of that level into them keeps its
    derivative; a buffer of plain arrays would turn it into a number (a lost derivative)."""
    top = None
    for leaf in optree.tree_leaves(depends_on, none_is_leaf=False):
        interp = leaf._interp if isinstance(leaf, Tensor) else None
        if interp is not None and interp.active and (top is None or interp.level > top._interp.level):
            top = leaf
    if top is None:
        return value
    own = value._interp if isinstance(value, Tensor) else None
    if own is not None and own.level >= top._interp.level:
        return value
    # a sum over no element is exactly zero whatever ``top`` holds (inf, nan), of ``top``'s level
    none = xp.reshape(top, (-1,))[:0]
    if dtype_kind(none.dtype) == "c":
        none = xp.real(none)
    return value + xp.sum(xp.astype(none, value.dtype))


def _concrete(x):
    """The backend array under ``x`` where it has values (a plain array, a grad, jvp or vmap tensor: under
    vmap every example's), else None (a ``pa.jit`` capture's abstract value)."""
    value = bottom(x)
    return value if dispatch.backend_of_array(value) is not None else None


def _refused(bad, message):
    """Raise ``ValueError(message)`` where ``bad`` (a boolean array, any example under vmap) holds true
    values; ``bad`` itself when it has no values yet (``pa.jit``'s trace: the solve then fails with
    status -1 at each call where it is true)."""
    value = _concrete(stop_gradient(bad))
    if value is None:
        return bad
    if bool(dispatch.backend_of_array(value).xp.any(value)):
        raise ValueError(message)
    return None


def _time(value, dtype, device, name):
    t = value if isinstance(value, Tensor) else xp.asarray(value)
    if tuple(t.shape) != ():
        raise ValueError(f"solve_ivp: {name} must be a scalar, got shape {tuple(t.shape)}")
    return xp.asarray(t, dtype=dtype, device=device)


def prepared(fun, t0, t1, y0, t_eval, args, method, rtol, atol, max_step, first_step, jac_sparsity=None,
             jac=None):  # fmt: skip
    """The ``Problem``, the initial time and state, from the arguments (checked)."""
    if not isinstance(y0, Tensor):
        y0 = xp.asarray(y0)
    dtype = _floating_dtype(y0)
    y0 = xp.astype(y0, dtype)
    if len(y0.shape) == 0:
        y0 = xp.reshape(y0, (1,))
    if len(y0.shape) != 1:
        raise ValueError(f"solve_ivp: y0 must be 1-D, got shape {tuple(y0.shape)}")
    invalid = _refused(
        ~xp.all(xp.isfinite(y0)), "solve_ivp: all components of the initial state y0 must be finite (as "
        "SciPy requires), got nan or inf"
    )  # fmt: skip
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
        else:  # the same refusals on the values, where the transform has them
            outside, unsorted = _t_eval_outside(t_eval, t0, t1, direction)
            for bad, message in ((outside, OUTSIDE), (unsorted, UNSORTED)):
                bad = None if bad is None else _refused(bad, message)
                invalid = bad if invalid is None else (invalid if bad is None else invalid | bad)
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
    if namespace is None:  # fun sees values of the transforms of all it depends on from its first call
        y0 = lifted(y0, (args, t0, t1, t_eval, cell_tensors(fun)))
    problem = Problem(
        fun,
        args,
        method,
        t1,
        direction,
        rtol,
        atol,
        max_step,
        t_eval,
        y0.shape[0],
        namespace,
        jac_sparsity,
        jac,
    )
    return problem, t0, y0, invalid


def _t_eval_outside(t_eval, t0, t1, direction):
    """``(outside, unsorted)``: whether a point of ``t_eval`` lies outside ``t_span``, whether two are
    out of the order of integration (in polyad ops: per example under vmap)."""
    te, t0, t1 = stop_gradient(t_eval), stop_gradient(t0), stop_gradient(t1)
    outside = xp.any((te < xp.minimum(t0, t1)) | (te > xp.maximum(t0, t1)))
    if t_eval.shape[0] < 2:
        return outside, None
    step = (te[1:] - te[:-1]) * direction
    return outside, xp.any(step < 0)


def _check_t_eval(t_eval, t0, t1):
    lo, hi = min(float(t0), float(t1)), max(float(t0), float(t1))
    values = [float(v) for v in t_eval]
    if any(v < lo or v > hi for v in values):
        raise ValueError(f"{OUTSIDE} ({float(t0)}, {float(t1)})")
    step = [b - a for a, b in zip(values, values[1:])]
    forward = float(t1) >= float(t0)
    if any((d < 0) if forward else (d > 0) for d in step):
        raise ValueError(UNSORTED)


def integrate(fun, t0, t1, y0, t_eval, args, *, method, rtol, atol, max_step, first_step, max_steps,
              checkpoints, max_memory, progress, ends_only=False, jac_sparsity=None, jac=None,
              dense_output=False, events=None):  # fmt: skip
    """The discrete solution: the attempts looped (a Python loop outside every transform, else
    ``pa.while_loop``), and the ``OdeResult``. ``ends_only``: with ``t_eval`` None, the solution at ``t0``
    and at the end only, outside transforms too (as under one)."""
    if not transform_active():
        refuse_pre_dispatch_capture("solve_ivp", "an ODE solver's steps")
    problem, t0, y0, invalid = prepared(
        fun, t0, t1, y0, t_eval, args, method, rtol, atol, max_step, first_step, jac_sparsity, jac
    )
    if first_step is not None and not (isinstance(first_step, int | float) and first_step > 0):
        raise ValueError(f"solve_ivp: first_step must be a positive number, got {first_step!r}")
    # the counters in the run's namespace (y0's library outside transforms, whatever the default backend)
    int_dtype = problem.xp.int64
    state = method.initial_state(
        problem, t0, y0, int_dtype, None if first_step is None else float(first_step)
    )
    if problem.t_eval is not None:  # the output rows: y0 until a step reaches them
        m = problem.t_eval.shape[0]
        state["out"] = problem.xp.broadcast_to(problem.xp.reshape(y0, (1, -1)), (m, problem.n))
    if not transform_active():
        recorder = EagerRecorder(problem, t0, y0, dense_output, events)
        return _eager(problem, state, t0, y0, max_steps, progress, ends_only, recorder)
    if dense_output:  # solve_ivp makes sol a ResolvedSolution under a transform
        raise NotImplementedError("solve_ivp: dense_output=True under a transform is solve_ivp's")
    if events is not None:
        state.update(initial_carry(problem, events, t0, state["y"]))
    if invalid is not None:  # refused at each call of a compiled function: no step, status -1
        state["status"] = xp.where(invalid, xp.full_like(state["status"], FAILED), state["status"])
    checkpoints, max_memory = _loop_checkpoints(state, checkpoints, max_memory, max_steps)
    state = while_loop(
        lambda s: s["status"] == RUNNING,
        lambda s: _traced_attempt(problem, s, max_steps, events),
        state,
        checkpoints=checkpoints,
        max_memory=max_memory,
        compiled=True,  # grad's steps replay the traced attempt: no Python of it per step
    )
    if t_eval is None:
        t_out = xp.stack([t0, state["t"]])
        y_out = xp.stack([y0, state["y"]], axis=1)
    else:
        t_out, y_out = problem.t_eval, xp.matrix_transpose(state["out"])
    status = state["status"]
    t_events = y_events = None
    if events is not None:
        count = state["event_g"].shape[0]
        t_events = [state[f"t_events{i}"] for i in range(count)]
        y_events = [state[f"y_events{i}"] for i in range(count)]
    return OdeResult(
        t=t_out, y=y_out, sol=None, t_events=t_events, y_events=y_events, nfev=state["nfev"],
        njev=state.get("njev", 0), nlu=state.get("nlu", 0),
        status=status, message="see status: 0 reached the end, 1 a terminal event, -1 failed",
        success=status >= 0,
    )  # fmt: skip


def _loop_checkpoints(state, checkpoints, max_memory, max_steps):
    """``checkpoints="auto"`` under a capture (``pa.jit``) as an int: a compiled graph's shapes are fixed
    when it is traced, so the slots are decided then: as many as the budget holds, at most
    ``JIT_SLOTS`` (an int ``s`` allocates its ``s`` rows whatever the length, and the online schedule's
    bookkeeping grows with ``s``; pass an int ``checkpoints`` for more)."""
    # a reverse rule's primal pass at the innermost level would see this capture (pa.jit around grad)
    if checkpoints != "auto" or not capture_below(current_level()):
        return checkpoints, max_memory
    leaves = optree.tree_leaves(state)
    size = nbytes(leaves, dispatch.namespace_of(leaves[0]))
    budget = config.max_memory if max_memory is None else max_memory
    return max(1, min(max_steps, JIT_SLOTS, schedules.auto_slots(None, size, budget, 2 * size))), None


def _traced_attempt(problem, state, max_steps, events):
    new, step = attempt(problem, state, max_steps, eager=False)
    return new if events is None else traced_events(problem, events, state, new, step)


def attempt(problem, state, max_steps, eager, fill=True):
    """The method's attempt, and the points of ``t_eval`` its step holds filled from its interpolant (a
    point at a step's start takes that step's interpolant at its start, the state itself: so points at
    ``t0`` are filled by the first step, with their derivative with respect to the time). Outside
    transforms the interpolant is evaluated only for a step holding a point (as SciPy's). Returns the new
    state and the ``Step`` tried. ``fill`` False: the points are left to the caller (the eager recorder,
    which evaluates the step's interpolant once for them, the dense output and the events)."""
    method = problem.method
    new, step = method.attempt(problem, state, max_steps, eager)
    if "out" not in state:
        return new, step
    xp, te, direction = problem.xp, problem.t_eval, problem.direction
    new["out"] = state["out"]
    if step is None or not fill:
        return new, step
    inside = (direction * (te - step.t_old) >= 0) & (direction * (te - step.t_new) <= 0)
    accept = True if eager else ~new["rejected"]  # an eager step is one accepted
    if not eager:
        inside = accept & inside
    elif not bool(xp.any(inside)):
        return new, step
    extra = method.dense_evaluations
    if extra:
        nfev = new["nfev"]
        new["nfev"] = nfev + (extra if eager else xp.where(accept, xp.full_like(nfev, extra), 0))
    values = method.interpolate(problem, step, te)
    new["out"] = xp.where(xp.reshape(inside, (-1, 1)), values, state["out"])
    return new, step


def _eager(problem, state, t0, y0, max_steps, progress, ends_only, recorder):
    """The integration outside every transform: SciPy's loop, every accepted step recorded (and handed
    to ``recorder``: dense output, events)."""
    ts, ys = [t0], [y0]
    bar = _progress_bar(problem, t0) if progress else None
    last = float(t0)
    while int(state["status"]) == RUNNING:
        old = state
        state, step = attempt(problem, state, max_steps, eager=True, fill=not recorder.active)
        if recorder.active and step is not None and not bool(state["rejected"]):  # before the next attempt
            state = recorder.accepted(old, state, step)
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
    if status == FAILED and int(state["attempts"]) >= max_steps:
        message = MAX_STEPS_MESSAGE
    if problem.t_eval is None:
        if ends_only:
            ts, ys = [t0, state["t"]], [y0, state["y"]]
        t_out, y_out = xp.stack(ts), xp.stack(ys, axis=1)
    else:
        t_out, y_out = problem.t_eval, xp.matrix_transpose(state["out"])
        if status == TERMINATED:  # the points up to the terminal event only, as SciPy
            reached = (problem.direction * (t_out - state["t"])) <= 0
            count = int(xp.sum(xp.astype(reached, xp.int64)))
            t_out, y_out = t_out[:count], y_out[:, :count]
    sol, t_events, y_events = recorder.result()
    return OdeResult(
        t=t_out, y=y_out, sol=sol, t_events=t_events, y_events=y_events, nfev=int(state["nfev"]),
        njev=int(state.get("njev", 0)), nlu=int(state.get("nlu", 0)),
        status=status, message=message, success=status >= 0,
    )  # fmt: skip


def _progress_bar(problem, t0):
    try:
        import tqdm  # noqa: PLC0415  (optional)
    except ImportError:
        raise ImportError("solve_ivp: progress=True needs tqdm (pip install tqdm)") from None
    return tqdm.tqdm(total=abs(float(problem.t_bound) - float(t0)), unit="t", unit_scale=True)
