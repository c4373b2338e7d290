"""Events of ``solve_ivp`` (SciPy's ``events=``) and the recording of the steps for its dense output.

An event is a function ``g(t, y, *args)`` whose zeros are sought; its optional attributes are SciPy's:
``terminal`` (False: record only; True or a positive int ``k``: stop the integration at the ``k``-th
zero, SciPy 1.17's counts) and ``direction`` (> 0: only zeros where ``g`` goes up; < 0: down; 0: both).
After each accepted step the events are evaluated at its end; an event whose sign changed (SciPy's
test, ``find_active_events``) has its zero located on the step's interpolant by a bracketing root solve
to ``4 eps`` (SciPy uses ``brentq`` there with the same tolerance), so the times agree with SciPy's on the
same steps to rounding. Several events in one step are taken in time order for the termination.
"""

import math

import polyad.core.dispatch as dispatch
from polyad.core import Tensor
from polyad.core.avals import bottom
from polyad.custom.implicit import custom_root
from polyad.ops.elementwise import stop_gradient
from polyad.scipy.integrate import dense

EPS = 2.220446049250313e-16
TERMINATED = 1  # SciPy's status of a termination event
MAX_ITERATIONS = 200


def checked_events(events):
    """``(functions, max_counts, directions)`` of ``events`` (a callable or a sequence of them):
    ``max_counts[i]`` is the number of zeros after which event ``i`` stops the integration (None:
    never)."""
    if callable(events):
        events = (events,)
    if not isinstance(events, tuple | list):
        raise TypeError(
            f"solve_ivp: events must be a callable or a sequence of them, got {type(events).__name__}"
        )
    counts, directions = [], []
    for i, event in enumerate(events):
        if not callable(event):
            raise TypeError(f"solve_ivp: events[{i}] must be callable, got {type(event).__name__}")
        terminal = getattr(event, "terminal", None)
        whole = isinstance(terminal, bool | int) or (isinstance(terminal, float) and terminal.is_integer())
        if terminal is None or (whole and terminal == 0):
            counts.append(None)
        elif whole and terminal > 0:
            counts.append(int(terminal))
        else:
            message = "must be a boolean or a positive integer"
            raise ValueError(f"solve_ivp: events[{i}].terminal {message}, got {terminal!r}")
        direction = getattr(event, "direction", 0)
        if not isinstance(direction, int | float) or isinstance(direction, bool) or math.isnan(direction):
            raise ValueError(f"solve_ivp: events[{i}].direction must be a number, got {direction!r}")
        directions.append(float(direction))
    return list(events), counts, directions


def crossed(g, g_new, direction):
    """Whether an event's sign change from ``g`` to ``g_new`` counts (SciPy's rule: a zero at either end
    counts, in the event's direction)."""
    up = (g <= 0) & (g_new >= 0)
    down = (g >= 0) & (g_new <= 0)
    return (up & (direction > 0)) | (down & (direction < 0)) | ((up | down) & (direction == 0))


def bracketed_root(fun, a, b, fa, fb):
    """A zero of ``fun`` (Python floats) between ``a`` and ``b``, where ``fa`` and ``fb`` differ in sign
    (or one is zero): the Illinois variant of regula falsi, with a bisection whenever it shrinks the
    bracket too slowly, to ``4 eps (1 + |t|)``."""
    if fa == 0:
        return a
    if fb == 0:
        return b
    side = 0
    for _ in range(MAX_ITERATIONS):
        tol = 4 * EPS * (1 + abs(b))
        width = abs(b - a)
        if width <= tol:
            break
        c = b - fb * (b - a) / (fb - fa)
        # a secant point too close to an end (or outside the bracket): the middle instead
        if not (min(a, b) + 0.01 * width < c < max(a, b) - 0.01 * width):
            c = 0.5 * (a + b)
        fc = fun(c)
        if fc == 0:
            return c
        if (fc > 0) == (fb > 0):  # c replaces b; a stays
            b, fb = c, fc
            if side == -1:
                fa *= 0.5
            side = -1
        else:  # the bracket becomes (b, c)
            a, fa = b, fb
            b, fb = c, fc
            side = +1
    return b if abs(fb) <= abs(fa) else a


class EagerRecorder:
    """Outside transforms: the accepted steps for the ``OdeSolution`` (``dense_output``) and the events
    (their zeros, the termination), after each accepted step of the driver's loop."""

    def __init__(self, problem, t0, y0, dense_output, events):
        self.problem, self.t0, self.y0 = problem, t0, y0
        self.kind = dense.kind_of(problem.method)
        if self.kind is None and dense_output:
            raise NotImplementedError(
                f"solve_ivp: dense_output=True is not supported for {problem.method.name}"
            )
        self.steps = [] if dense_output else None
        self.events = None
        if events is not None:
            self.events, self.max_counts, self.directions = checked_events(events)
            self.g = [self._g(event, t0, y0) for event in self.events]
            self.counts = [0] * len(self.events)
            self.t_events = [[] for _ in self.events]
            self.y_events = [[] for _ in self.events]

    def _g(self, event, t, y):
        value = event(t, y, *self.problem.args)
        try:
            return float(value)
        except TypeError:
            raise TypeError(
                f"solve_ivp: an event must return a scalar, got {type(value).__name__} from "
                f"{getattr(event, '__name__', event)!r}"
            ) from None

    @property
    def active(self):
        return self.steps is not None or self.events is not None

    def accepted(self, old, new, step):
        """The state after the accepted ``step`` (a ``common.Step``) from ``old`` to ``new``: ``new``, or
        stopped at a terminal event's zero (status 1)."""
        problem, xp = self.problem, self.problem.xp
        y = old["y"]
        made = []

        def piece():  # (t_ref, h, y_ref, coeffs) of the step's interpolant, made once
            if not made:
                *record, extra = dense.segment(problem, step, y)
                new["nfev"] = int(new["nfev"]) + extra
                made.append(tuple(record))
            return made[0]

        def interpolant(at):
            at = xp.asarray(at, dtype=y.dtype, device=y.device)
            if self.kind is None:  # a method this module does not know: its own interpolant
                return problem.method.interpolate(problem, step, xp.reshape(at, (1,)))[0, ...]
            return dense.interpolate(xp, self.kind, at, *piece())

        end = new["t"]
        if "out" in new:  # the points of t_eval the step holds, from the same interpolant (as SciPy's)
            te, direction = problem.t_eval, problem.direction
            inside = (direction * (te - step.t_old) >= 0) & (direction * (te - step.t_new) <= 0)
            if bool(xp.any(inside)):
                new["out"] = xp.where(xp.reshape(inside, (-1, 1)), interpolant(te), new["out"])
        if self.events is not None:
            new, end = self._events(old, new, interpolant)
        if self.steps is not None:
            self.steps.append((*piece(), end))
        return new

    def _events(self, old, new, interpolant):
        xp, y = self.problem.xp, old["y"]
        tf, t_new = float(old["t"]), float(new["t"])
        g_new = [self._g(event, new["t"], new["y"]) for event in self.events]
        active = [
            i for i in range(len(self.events)) if bool(crossed(self.g[i], g_new[i], self.directions[i]))
        ]
        g_old, self.g = self.g, g_new
        if not active:
            return new, new["t"]
        for i in active:
            self.counts[i] += 1

        def fun_of(i):
            event = self.events[i]
            return lambda s: self._g(event, xp.asarray(s, dtype=y.dtype, device=y.device), interpolant(s))

        roots = [(bracketed_root(fun_of(i), tf, t_new, g_old[i], g_new[i]), i) for i in active]
        terminal = [self.max_counts[i] is not None and self.counts[i] >= self.max_counts[i] for _, i in roots]
        if any(terminal):  # in time order, up to the first terminal zero (SciPy's handle_events)
            forward = t_new >= tf
            roots.sort(key=lambda r: r[0] if forward else -r[0])
            first = next(
                k for k, (_, i) in enumerate(roots) if self.counts[i] >= (self.max_counts[i] or math.inf)
            )
            roots = roots[: first + 1]
        for root, i in roots:
            self.t_events[i].append(root)
            self.y_events[i].append(interpolant(root))
        if not any(terminal):
            return new, new["t"]
        t_stop = xp.asarray(roots[-1][0], dtype=y.dtype, device=y.device)
        return dict(new, t=t_stop, y=interpolant(roots[-1][0]), status=TERMINATED), t_stop

    def result(self):
        """``(sol, t_events, y_events)`` for the ``OdeResult``."""
        sol = None
        if self.steps is not None:
            sol = dense.eager_solution(self.kind, self.t0, self.y0, self.steps)
        if self.events is None:
            return sol, None, None
        xp, y0 = self.problem.xp, self.y0
        t_events = [xp.asarray(te, dtype=y0.dtype, device=y0.device) for te in self.t_events]
        # no zero: shape (0,), as SciPy's np.asarray([])
        y_events = [
            xp.stack(ye) if ye else xp.zeros((0,), dtype=y0.dtype, device=y0.device) for ye in self.y_events
        ]
        return sol, t_events, y_events


# ------------------------------------------------------------------------------ under a transform

BIG_COUNT = 2**62  # a count no event reaches: "never terminal"


def capacities(functions, counts):
    """The slots of each event's ``t_events`` under a transform (a traced result has a fixed shape): a
    terminal event's count; a non-terminal event's ``capacity`` attribute (an int)."""
    slots = []
    for i, (event, count) in enumerate(zip(functions, counts)):
        capacity = getattr(event, "capacity", None)
        if capacity is None and count is None:
            raise NotImplementedError(
                f"solve_ivp: events[{i}] is not terminal: under a transform a result needs a fixed shape, "
                "so give the event a capacity attribute (an int: the most zeros recorded; t_events has that "
                "many slots, nan after the last zero; a zero beyond them fails the solve with status -1)"
            )
        if capacity is not None and (
            isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1
        ):
            raise ValueError(f"solve_ivp: events[{i}].capacity must be a positive int, got {capacity!r}")
        slots.append(count if capacity is None else max(capacity, count or 0))
    return slots


def _g(problem, event, t, y):
    value = event(t, y, *problem.args)
    value = value if hasattr(value, "shape") else problem.xp.asarray(value, dtype=y.dtype)
    if tuple(value.shape) not in ((), (1,)):
        raise TypeError(f"solve_ivp: an event must return a scalar, got shape {tuple(value.shape)}")
    return problem.xp.astype(problem.xp.reshape(value, ()), y.dtype)


def initial_carry(problem, events, t0, y0):
    """The loop's event entries: each event's value at the start, its count of zeros, its recorded
    zeros (nan-padded) and their states."""
    xp = problem.xp
    functions, counts, _ = checked_events(events)
    slots = capacities(functions, counts)
    carry = {
        "event_g": xp.stack([_g(problem, event, t0, y0) for event in functions]),
        "event_count": xp.zeros((len(functions),), dtype=xp.int64, device=y0.device),
        "event_recorded": xp.zeros((len(functions),), dtype=xp.int64, device=y0.device),
    }
    for i, k in enumerate(slots):
        carry[f"t_events{i}"] = xp.full((k,), xp.nan, dtype=y0.dtype, device=y0.device) + 0.0 * t0
        carry[f"y_events{i}"] = xp.full((k, problem.n), xp.nan, dtype=y0.dtype, device=y0.device) + 0.0 * y0
    return carry


def _interpolant(problem, step, at):
    return problem.method.interpolate(problem, step, problem.xp.reshape(at, (1,)))[0, ...]


def _root(problem, event, step, active):
    """The zero of ``event`` on ``step``'s interpolant, by ``pa.custom_root``: located by
    ``bracketed_root`` on plain values, differentiated by the implicit function theorem,
    ``dt* = -(dG/dtheta) dtheta / (dG/dt)``, ``G(t) = g(t, y(t))`` with ``y`` the interpolant (its data
    carrying the solution's derivatives). Where the event is not active the residual is ``t - t_new``
    (a zero at the step's end, masked later), so no derivative divides by a vanishing ``dG/dt``."""
    xp = problem.xp

    def residual(s):
        value = _g(problem, event, s, _interpolant(problem, step, s))
        return xp.where(active, value, s - step.t_new)

    def solve(f, s0):
        a, b = step.t_old, step.t_new
        fa, fb = f(a + 0.0 * s0), f(b + 0.0 * s0)
        if not isinstance(s0, Tensor):  # plain values (not a vmap's batch): the float iteration
            dtype, device = s0.dtype, s0.device  # floats made arrays again where the state lives

            def at(s):
                return xp.asarray(s, dtype=dtype, device=device)

            root = bracketed_root(lambda s: float(f(at(s))), float(a), float(b), float(fa), float(fb))
            return at(root)
        return _bisection(xp, f, a + 0.0 * s0, b + 0.0 * s0, fa)  # a batch: every example at once

    def tangent_solve(g, rhs):
        return rhs / g(xp.ones_like(rhs))

    return custom_root(residual, step.t_new, solve, tangent_solve, residual_rtol=math.inf)


def _bisection(xp, f, a, b, fa):
    """Bisection on arrays (each example of a batch its own bracket) to the last bit of ``t``."""
    for _ in range(64):  # the bracket, a step, shrunk 2^64 times: below the spacing of t
        mid = 0.5 * (a + b)
        fm = f(mid)
        left = (fm > 0) == (fa > 0)  # the zero lies in (mid, b)
        a, fa = xp.where(left, mid, a), xp.where(left, fm, fa)
        b = xp.where(left, b, mid)
    return 0.5 * (a + b)


def _none_active(active):
    """Whether no event is active, where the values are known (grad, jvp, vmap: every example's); False
    where they are not (a ``pa.jit`` trace: the roots are then solved for, and masked)."""
    value = bottom(stop_gradient(active))
    backend = dispatch.backend_of_array(value)
    return backend is not None and not bool(backend.xp.any(value))


def traced(problem, events, state, new, step):
    """The events of one attempt under a transform (``new``: the attempt's state, ``step`` its
    ``Step``): zeros located and recorded, the count kept, a terminal zero stopping the solve there
    (``t``, ``y`` at the zero, with their derivatives through it; status 1; ``t_eval`` points beyond
    it nan, as SciPy's result has none there)."""
    xp = problem.xp
    functions, counts, directions = checked_events(events)
    accepted = ~new["rejected"]
    g_old = state["event_g"]
    g_new = xp.stack([_g(problem, event, new["t"], new["y"]) for event in functions])
    direction = xp.asarray(directions, dtype=g_new.dtype, device=g_new.device)
    active = accepted & crossed(g_old, g_new, direction)
    if _none_active(active):  # values known and no zero in this step: nothing to locate or record
        kept = {key: state[key] for key in state if key.startswith(("event_", "t_events", "y_events"))}
        return dict(kept, **new, event_g=xp.where(accepted, g_new, g_old))
    count = state["event_count"] + xp.astype(active, xp.int64)
    roots = xp.stack([_root(problem, event, step, active[i]) for i, event in enumerate(functions)])
    limit = xp.asarray([BIG_COUNT if c is None else c for c in counts], dtype=xp.int64, device=g_new.device)
    hits = active & (count >= limit)
    stop = xp.any(hits)
    key = problem.direction * stop_gradient(roots)  # time order in the direction of integration
    first = xp.argmin(xp.where(hits, key, math.inf))
    t_stop = xp.take(roots, xp.reshape(first, (1,)), axis=0)[0]
    recorded = active & (~stop | (key <= xp.take(key, xp.reshape(first, (1,)), axis=0)[0]))
    out = dict(new, event_g=xp.where(accepted, g_new, g_old), event_count=count)
    slots_used = state["event_recorded"]
    overflow = xp.zeros((), dtype=xp.bool, device=g_new.device)
    for i in range(len(functions)):
        buffer_t, buffer_y = state[f"t_events{i}"], state[f"y_events{i}"]
        slot = slots_used[i]
        here = recorded[i] & (xp.arange(buffer_t.shape[0], device=g_new.device) == slot)
        y_root = _interpolant(problem, step, roots[i])
        out[f"t_events{i}"] = xp.where(here, roots[i], buffer_t)
        out[f"y_events{i}"] = xp.where(xp.reshape(here, (-1, 1)), y_root, buffer_y)
        overflow = overflow | (recorded[i] & (slot >= buffer_t.shape[0]))
    out["event_recorded"] = slots_used + xp.astype(recorded, xp.int64)
    y_stop = _interpolant(problem, step, t_stop)
    out["t"] = xp.where(stop, t_stop, new["t"])
    out["y"] = xp.where(stop, y_stop, new["y"])
    status = xp.where(stop, xp.full_like(new["status"], TERMINATED), new["status"])
    out["status"] = xp.where(overflow, xp.full_like(status, -1), status)
    if "out" in new:
        beyond = stop & (problem.direction * (problem.t_eval - t_stop) > 0)
        out["out"] = xp.where(xp.reshape(beyond, (-1, 1)), xp.nan, new["out"])
    return out
