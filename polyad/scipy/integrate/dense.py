"""Dense output of ``solve_ivp``: each method's interpolant of one step and ``OdeSolution``, the
piecewise interpolant over every accepted step (SciPy's ``dense_output=True``).

A step from ``t_old`` of size ``h`` is kept as ``(t_old, h, y_old, coeffs)`` with ``coeffs`` the only
per-step data its interpolant needs, as SciPy's dense output classes hold them:

- RK45: ``Q`` (4, n), ``y = y_old + h sum_j Q_j x^(j+1)`` with ``x = (t - t_old) / h``;
- DOP853: ``F`` (7, n), Hairer's nested form in ``x`` and ``1 - x`` (three more evaluations of ``fun``);
- Radau: the collocation polynomial ``Q`` (3, n), ``y = y_old + sum_j Q_j x^(j+1)``;
- BDF: kept as ``(t_new, h_next, D_0, D_1..D_5)`` (SciPy's ``BdfDenseOutput``: the backward differences
  anchored at the step's end, the rows above the step's order zero), ``y = D_0 + sum_j D_(j+1) prod_(i<=j)
  (t - t_new + i h) / ((i + 1) h)``.

The evaluation is written in polyad ops, so ``sol(t)`` is differentiable with respect to ``t`` and to
whatever the stored steps carry (under a transform, see ``solve_ivp``'s ``dense_output``)."""

import polyad.xp as polyad_xp
from polyad.ops.elementwise import stop_gradient
from polyad.scipy.integrate import explicit

KINDS = {"RK45": "rk", "DOP853": "dop853", "Radau": "radau", "BDF": "bdf"}


def kind_of(method):
    """The interpolant's form of ``method`` (a ``common.Method``); None: a method this module does not
    know (its steps are kept whole and evaluated by its own ``interpolate``)."""
    return KINDS.get(method.name)


def segment(problem, step, y_old):
    """``(t_ref, h, y_ref, coeffs, extra_evaluations)`` of an accepted ``step`` from ``y_old``: what
    ``interpolate`` takes. ``t_ref, h, y_ref`` are the step's start, size and state, except for BDF, whose
    interpolant is anchored at the step's end with the next step's size (its differences ``D`` are scaled
    to it)."""
    if problem.method.name == "BDF":
        D, order, h_next = step.data
        xp, rows = problem.xp, D.shape[0]
        # the rows above the order are the differences kept for an order change: not the interpolant's
        keep = xp.reshape(xp.arange(rows, device=D.device) <= order, (-1, 1))
        D = xp.where(keep, D, xp.zeros_like(D))[: min(rows, 6), ...]
        # eagerly the next step's size may be a Python float (SciPy's arithmetic): an array, to stack
        t_new, h_next = (xp.asarray(v, dtype=D.dtype, device=D.device) for v in (step.t_new, h_next))
        return t_new, h_next, D[0, ...], D[1:, ...], 0
    coeffs, extra = step_coefficients(problem, step)
    return step.t_old, step.h, y_old, coeffs, extra


def step_coefficients(problem, step):
    """The interpolant's ``coeffs`` of ``step`` (a ``common.Step`` accepted; not BDF's: ``segment``), and
    the number of evaluations of ``fun`` it took (DOP853's three extra stages)."""
    xp, tab = problem.xp, problem.tableau
    if problem.method.name == "Radau":
        return step.data[1], 0
    K, y, y_new, f, f_new = step.data
    K = list(K)
    if tab.P:
        return xp.stack([explicit.combo([row[j] for row in tab.P], K) for j in range(len(tab.P[0]))]), 0
    t, h = step.t_old, step.h
    for a, c in zip(tab.A_EXTRA, tab.C_EXTRA):
        K.append(problem.rhs(t + c * h, y + explicit.combo(a, K) * h))
    delta = y_new - y
    rows = [delta, h * f - delta, 2 * delta - h * (f_new + f)]
    return xp.stack(rows + [h * explicit.combo(row, K) for row in tab.D]), len(tab.C_EXTRA)


def interpolate(xp, kind, t, t_old, h, y_old, coeffs):
    """The interpolant at ``t``: ``t``, ``t_old``, ``h`` broadcast together (shape S), ``y_old`` of shape
    ``S + (n,)``, ``coeffs`` of shape ``S + (k, n)``; the result has shape ``S + (n,)``. A zero step
    (``h == 0``) gives ``y_old``. For ``kind == "bdf"``, ``t_old`` is the step's end (``segment``)."""
    k = coeffs.shape[-2]
    if kind == "bdf":
        h = xp.where(h == 0, 1.0, h)
        acc, p = y_old, None
        for j in range(k):
            x = ((t - t_old + j * h) / ((j + 1) * h))[..., None]
            p = x if p is None else p * x
            acc = acc + p * coeffs[..., j, :]
        return acc
    x = (t - t_old) / xp.where(h == 0, 1.0, h)
    x = x[..., None]
    if kind == "dop853":
        out = None
        for i in range(k):
            term = coeffs[..., k - 1 - i, :]
            out = term if out is None else out + term
            out = out * x if i % 2 == 0 else out * (1 - x)
        return out + y_old
    acc, power = None, x
    for j in range(k):
        term = coeffs[..., j, :] * power
        acc = term if acc is None else acc + term
        power = power * x
    if kind == "rk":
        acc = h[..., None] * acc
    return y_old + acc


class OdeSolution:
    """The solution between the accepted steps, as SciPy's ``OdeSolution``: ``sol(t)`` for a scalar ``t``
    has shape ``(n,)``, for a 1-D ``t`` shape ``(n, len(t))``, each point from the interpolant of the step
    holding it (a point on a step boundary: the earlier step in the direction of integration, as SciPy).

    Attributes: ``ts`` (the step boundaries, ``(n_segments + 1,)``), ``t_min``, ``t_max``, ``n_segments``,
    and per step ``t_old``, ``h``, ``y_old`` and ``coeffs`` (``(n_segments, k, n)``), what the
    interpolants need.

    Example:
        >>> import numpy as np
        >>> from polyad.scipy.integrate import solve_ivp
        >>> sol = solve_ivp(lambda t, y: -y, (0.0, 2.0), np.array([1.0]), dense_output=True, rtol=1e-8).sol
        >>> round(float(sol(1.0)[0]), 5)  # exp(-1)
        0.36788
    """

    def __init__(self, kind, ts, t_old, h, y_old, coeffs):
        self.kind, self.ts = kind, ts
        self.t_old, self.h, self.y_old, self.coeffs = t_old, h, y_old, coeffs
        self.n_segments = int(t_old.shape[0])
        first, last = float(ts[0]), float(ts[-1])
        self.ascending = last >= first
        self.t_min, self.t_max = min(first, last), max(first, last)

    def __call__(self, t):
        """The interpolated solution at ``t`` (a scalar or a 1-D array, within ``t_span`` or not: outside
        it the first or last step's polynomial is extrapolated, as SciPy's)."""
        xp = polyad_xp
        t = xp.asarray(t, dtype=self.y_old.dtype, device=self.y_old.device)
        if len(t.shape) > 1:
            raise ValueError(f"OdeSolution: t must be a scalar or 1-D, got shape {tuple(t.shape)}")
        flat = xp.reshape(t, (-1,))
        if self.n_segments == 0:  # t0 == t1: the initial state
            y = xp.broadcast_to(self.y_old_initial[None, :], (flat.shape[0], self.y_old_initial.shape[0]))
            return y[0, ...] if len(t.shape) == 0 else xp.matrix_transpose(y)
        # the step of each point, SciPy's rule: the first boundary at or above it in ascending order
        ts_sorted = self.ts if self.ascending else xp.flip(self.ts)
        index = xp.searchsorted(ts_sorted, stop_gradient(flat), side="left" if self.ascending else "right")
        index = xp.clip(index - 1, 0, self.n_segments - 1)
        if not self.ascending:
            index = self.n_segments - 1 - index
        y = interpolate(
            xp,
            self.kind,
            flat,
            xp.take(self.t_old, index, axis=0),
            xp.take(self.h, index, axis=0),
            xp.take(self.y_old, index, axis=0),
            xp.take(self.coeffs, index, axis=0),
        )
        return y[0, ...] if len(t.shape) == 0 else xp.matrix_transpose(y)


def eager_solution(kind, t0, y0, steps):
    """The ``OdeSolution`` of the steps recorded outside transforms: ``steps`` a list of ``(t_old, h,
    y_old, coeffs, t_new)``, arrays of the backend."""
    xp = polyad_xp
    if not steps:
        ts = xp.stack([t0, t0])
        no_coeffs = xp.zeros((0, 1, y0.shape[0]), dtype=y0.dtype, device=y0.device)
        solution = OdeSolution(kind, ts, ts[:0], ts[:0], y0[None, :0], no_coeffs)
        solution.y_old_initial = y0
        return solution
    ts = xp.stack([t0] + [s[4] for s in steps])
    t_old, h = xp.stack([s[0] for s in steps]), xp.stack([s[1] for s in steps])
    y_old, coeffs = xp.stack([s[2] for s in steps]), xp.stack([s[3] for s in steps])
    return OdeSolution(kind, ts, t_old, h, y_old, coeffs)


class ResolvedSolution:
    """``sol`` of a ``solve_ivp`` called under a transform: ``sol(t)`` solves again with ``t_eval=t``
    (sorted in the direction of integration, then put back in ``t``'s order). The steps do not depend on
    ``t_eval``, so this is the interpolant of the same steps, with the derivatives ``t_eval`` carries
    (with respect to ``t`` and everything the solve depends on) and each example's own steps under vmap;
    it costs a solve per call (call it once with every time needed). ``t`` must lie within ``t_span``
    (no extrapolation)."""

    def __init__(self, resolve, t0, t1, device=None):
        self.resolve, self.t0, self.t1 = resolve, t0, t1
        self.device = device  # the solution's: Python times are made there, not on the default backend

    def __call__(self, t):
        xp = polyad_xp
        t = xp.asarray(t, device=self.device)
        if len(t.shape) > 1:
            raise ValueError(f"OdeSolution: t must be a scalar or 1-D, got shape {tuple(t.shape)}")
        flat = xp.reshape(t, (-1,))
        t0, t1 = (xp.asarray(s, device=self.device) for s in (self.t0, self.t1))
        direction = xp.sign(stop_gradient(t1 - t0))
        order = xp.argsort(stop_gradient(flat) * xp.where(direction == 0, 1.0, direction), stable=True)
        y = self.resolve(xp.take(flat, order, axis=0))
        y = xp.take(y, xp.argsort(order, stable=True), axis=1)
        return y[:, 0] if len(t.shape) == 0 else y
