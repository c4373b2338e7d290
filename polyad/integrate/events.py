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

from polyad.integrate import dense

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
        t, y, h = step.t_old, old["y"], step.h
        made = []

        def coefficients():
            if not made:
                coeffs, extra = dense.step_coefficients(problem, step)
                new["nfev"] = int(new["nfev"]) + extra
                made.append(coeffs)
            return made[0]

        def interpolant(at):
            at = xp.asarray(at, dtype=y.dtype, device=y.device)
            if self.kind is None:  # a method this module does not know: its own interpolant
                return problem.method.interpolate(problem, step, xp.reshape(at, (1,)))[0, ...]
            return dense.interpolate(xp, self.kind, at, t, h, y, coefficients())

        end = new["t"]
        if self.events is not None:
            new, end = self._events(old, new, interpolant)
        if self.steps is not None:
            self.steps.append((t, h, y, coefficients(), end))
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
