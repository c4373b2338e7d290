"""``solve_ivp``: SciPy's initial value problem solver, written in polyad ops, so its solution is
differentiable with respect to ``y0``, ``args``, ``t_span``, ``t_eval`` and whatever ``fun`` closes over,
under every transform (``polyad.scipy.integrate.driver``: the discrete solve;
``polyad.scipy.integrate.sensitivity``: reverse mode by forward sensitivities or the adjoint)."""

import math
import warnings

from polyad.core import transform_active
from polyad.scipy.integrate.dense import ResolvedSolution
from polyad.scipy.integrate.driver import EPS, SENSITIVITIES, integrate
from polyad.scipy.integrate.events import checked_events
from polyad.scipy.integrate.methods import METHODS
from polyad.scipy.integrate.sensitivity import solve as sensitivity_solve


def _checked_method(method):
    if isinstance(method, str) and method in METHODS:
        return METHODS[method]
    if method == "LSODA":
        raise ValueError(
            "solve_ivp: method='LSODA' is not supported (ODEPACK's Fortran solver, which polyad cannot "
            "differentiate); use 'BDF' or 'Radau' for a stiff problem, 'RK45' or 'DOP853' otherwise"
        )
    raise ValueError(f"solve_ivp: method must be one of {sorted(METHODS)}, got {method!r}")


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
    jac_sparsity=None,
    jac=None,
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
            functions, which dispatch to polyad inside a transform). Under a transform it is called, from
            its first call, with states of the transforms of everything it depends on (``y0``,
            ``t_span``, ``t_eval``, ``args``, the arrays it closes over), so a buffer it fills
            (``dydt = np.zeros_like(y); dydt[0] = ...``) keeps the derivatives written into it.
        t_span: ``(t0, t1)``; ``t1 < t0`` integrates backwards.
        y0: the initial state, 1-D (a scalar is made 1-D, as SciPy does); real floating (integers become
            float64; complex is refused: integrate the real and imaginary parts as one real state);
            finite (as SciPy requires: else ValueError); the state keeps its dtype and device.
        method: "RK45" (Dormand-Prince 5(4)), "DOP853" (Hairer's 8(5,3)), both with SciPy's step
            control (the same steps as SciPy's), "Radau" (Radau IIA of order 5, for stiff problems:
            Newton matrices from ``jac`` or ``pa.jacfwd`` of ``fun``, the Newton solve through
            ``pa.custom_root`` (differentiated implicitly); SciPy's error estimate and controller, steps
            close to SciPy's) or "BDF" (SciPy's variable-order NDF/BDF, orders 1 to 5, for stiff
            problems: its steps, given the same ``jac``; the Newton solve as Radau's). "LSODA" is
            refused (ValueError).
        t_eval: times at which to report the solution (sorted in the direction of integration, within
            ``t_span``: else ValueError, under every transform where the values are known; for values
            ``pa.jit`` traces, at each call status -1 with no step taken), from each method's dense
            output. None: every accepted step outside a transform,
            as SciPy; under a transform (a traced solution needs a fixed shape) the two ends ``t0`` and
            ``t1`` only.
        dense_output: True: the result's ``sol`` is an ``OdeSolution`` (each method's interpolant per
            accepted step, SciPy's); under a transform ``sol(t)`` solves again with ``t_eval=t`` (the
            same steps: differentiable with respect to ``t`` and the parameters, per example under vmap;
            ``t`` within ``t_span``).
        events: SciPy's: a callable ``g(t, y, *args)`` returning a scalar, or a list of them, with the
            optional attributes ``terminal`` (a bool, or a positive int: stop at that many zeros) and
            ``direction``. Zeros are located on the step's interpolant to 4 eps and, under a transform,
            differentiated implicitly (``pa.custom_root``); a terminal zero stops the solve there (status
            1). Under a transform ``t_events[i]`` has fixed slots, nan-padded: a terminal event's count,
            else the event's ``capacity`` attribute (an int, required there).
        vectorized: SciPy's; either value works: ``fun`` is called on one state (which a vectorised
            ``fun`` accepts), and the Jacobians come from ``pa.jacfwd``, not finite differences of ``fun``.
        args: extra positional arguments of ``fun`` (a tuple), differentiable.
        rtol, atol: relative and absolute tolerances (``atol`` a scalar or one per component).
        max_step, first_step: SciPy's options (``first_step`` None: SciPy's initial step selection).
        sensitivity: "discrete" (the exact derivative of the numerical solution: reverse mode through the
            steps with checkpointing, forward mode alongside them); "forward" (reverse mode by integrating
            the tangents of every input alongside the state, ``jacfwd``'s loop: memory of the state times
            the number of inputs, no stored steps); "adjoint" (the continuous adjoint equation integrated
            backwards: memory of one state, approximate: its error is of the order of the tolerances, not
            of rounding; the state is integrated backwards too, which an equation unstable backwards
            (stiff, dissipative) cannot: then it raises, outside transforms, rather than answer
            wrongly). Forward-mode transforms (jvp, jacfwd) are "discrete" whatever this says.
        checkpoints, max_memory: what reverse mode of "discrete" stores (``pa.while_loop``'s): "auto" (as
            many states as ``max_memory`` holds, default ``pa.config.max_memory``), an int (at most that
            many states, the online binomial schedule), None (every state).
        max_steps: the most attempted steps (accepted or rejected); then the status is -1.
        jac: Radau and BDF only: ``df/dy`` for their Newton matrices, as SciPy's: a callable
            ``jac(t, y, *args)`` returning an ``(n, n)`` array (or a scipy.sparse matrix, made dense), or a
            constant matrix (never evaluated again); not differentiated. None: ``pa.jacfwd`` of ``fun``.
        jac_sparsity: Radau and BDF only: the pattern of ``df/dy`` (a 2-D boolean array or a scipy.sparse
            matrix, as ``pa.jacobian_sparsity`` returns) or "detect": the Newton Jacobians come from one JVP
            per colour of the pattern (coloured once; not differentiated). The Newton matrices (BDF's ``I -
            c J``, Radau's ``3n`` one and its error estimate's) are sparse and factorised by the backend's
            sparse LU (SuperLU; cupyx on CuPy, not verified on a GPU; array_api_strict by counted host
            copies), BDF's once per Newton matrix; no dense ``n x n`` array is formed. Under grad, jvp and
            jit too: the Jacobian's CSR values ride in the loop, and the Newton solves and the implicit
            derivative's tangent and adjoint solves are sparse LU factorisations on concrete values
            inside ``custom_root``'s kernels. Under vmap each example is factorised on its own
            (the solves refuse a batch and run once per example). "detect" is refused under ``pa.jit``.
        progress: show a tqdm progress bar of ``t`` (outside transforms only: under one the loop is one op).

    Returns:
        An ``OdeResult`` with ``t``, ``y`` (shape ``(n, n_points)``), ``status`` (0 the end, 1 a terminal
        event, -1 failed), ``message``, ``success``, ``nfev``, ``njev``, ``nlu``, ``sol`` (None without
        ``dense_output``), ``t_events`` and ``y_events`` (None without ``events``).

    Example:
        >>> import numpy as np, polyad as pa
        >>> from polyad.scipy.integrate import solve_ivp
        >>> def final(k):
        ...     sol = solve_ivp(lambda t, y, k: -k * y, (0.0, 3.0), np.array([2.0]), args=(k,),
        ...                     t_eval=np.array([3.0]), rtol=1e-10, atol=1e-12)
        ...     return sol.y[0, -1]
        >>> round(float(final(0.5)), 9)  # 2 exp(-1.5)
        0.44626032
        >>> round(float(pa.grad(final)(np.float64(0.5))), 9)  # -3 * 2 exp(-1.5)
        -1.338780961
    """
    chosen = _checked_method(method)
    if not callable(fun):
        raise TypeError(f"solve_ivp: fun must be callable, got {type(fun).__name__}")
    if not isinstance(dense_output, bool):
        raise TypeError(f"solve_ivp: dense_output must be True or False, got {dense_output!r}")
    if events is not None:
        checked_events(events)
        if sensitivity != "discrete" and transform_active():
            raise NotImplementedError(
                f"solve_ivp: events with sensitivity={sensitivity!r} under a transform are not supported: "
                "use sensitivity='discrete'"
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
    stiff = [name for name, m in METHODS.items() if m.stiff]
    for name, value in (("jac_sparsity", jac_sparsity), ("jac", jac)):
        if value is not None and not chosen.stiff:
            raise ValueError(f"solve_ivp: {name} is for method={' or '.join(map(repr, stiff))} (df/dy of the "
                             f"Newton iterations), got method={method!r}")  # fmt: skip
    if jac is not None and not callable(jac) and not hasattr(jac, "shape") and not isinstance(jac, list):
        raise TypeError(
            f"solve_ivp: jac must be callable, jac(t, y, *args), or a matrix, got {type(jac).__name__}"
        )
    if jac_sparsity is not None:
        if isinstance(jac_sparsity, str) and jac_sparsity != "detect":
            raise ValueError(f"solve_ivp: jac_sparsity must be a pattern or 'detect', got {jac_sparsity!r}")
    options = dict(
        method=chosen, rtol=rtol, atol=atol, max_step=max_step, first_step=first_step, max_steps=max_steps,
        checkpoints=checkpoints, max_memory=max_memory, progress=progress, jac_sparsity=jac_sparsity,
        jac=jac, dense_output=dense_output, events=events,
    )  # fmt: skip

    def run(times, dense):
        if sensitivity == "discrete":
            return integrate(fun, t_span[0], t_span[1], y0, times, args, **dict(options, dense_output=dense))
        opts = dict(options, dense_output=dense)
        return sensitivity_solve(fun, t_span[0], t_span[1], y0, times, args, sensitivity, **opts)

    if not (dense_output and transform_active()):
        return run(t_eval, dense_output)
    result = run(t_eval, False)  # under a transform sol(t) solves again with t_eval=t
    result["sol"] = ResolvedSolution(
        lambda times: run(times, False).y, t_span[0], t_span[1], device=getattr(result.y, "device", None)
    )
    return result
