"""Issue 33: checkpoints="sqrt" and "auto" on a while_loop (online: decided as the loop runs), an honest
memory budget for "auto" on every loop (peaks under tracemalloc within max_memory on NumPy), the slots of
a jitted while loop's gradient under pa.config.max_memory, and the body counts each transform runs."""

import tracemalloc

import pytest
from helpers import assert_close, start_tracemalloc

import polyad as pa
from polyad.control import schedules
from polyad.core import dispatch
from polyad.graph.compiler.codegen import interpret_graph
from polyad.testing.schedule_replay import simulate

xp = pa.xp
TOL = dict(rtol=1e-12, atol=1e-12)
N = 100_000  # a carry of 0.8 MB
U0 = xp.linspace(0.0, 1.0, N)


def _step(k, u):
    return u + 0.1 * k * (xp.roll(u, 1) + xp.roll(u, -1) - 2.0 * u) - 0.01 * u**3


def scanned(k, steps, **kw):
    u, _ = pa.scan(lambda u, _: (_step(k, u), None), U0, length=steps, **kw)
    return xp.sum(u * u)


def whiled(k, steps, **kw):
    body = lambda c: (_step(k, c[0]), c[1] + 1)  # noqa: E731
    u, _ = pa.while_loop(lambda c: c[1] < steps, body, (U0, xp.asarray(0)), **kw)
    return xp.sum(u * u)


def unrolled(k, steps):
    u = U0
    for _ in range(steps):
        u = _step(k, u)
    return xp.sum(u * u)


def _peak(run):
    """``run()``'s result and its tracemalloc peak (NumPy's allocations; None on other backends)."""
    if pa.get_backend() != "numpy":
        return run(), None
    start_tracemalloc()
    try:
        out = run()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(("loop", "budget"), [(scanned, "16MiB"), (whiled, "19MiB")])
def test_auto_fits_a_tight_budget_and_stays_within_it(loop, budget):
    """The issue's case: 0.8 MB carries under 16 MiB (a while loop's slot is two carries: 19 MiB). It was
    refused ("about 19 MB reserved"); now "auto" picks the slots that fit, and the peak stays within the
    budget (no slack)."""
    k, steps = xp.asarray(0.5), 40
    expected = pa.grad(unrolled)(k, steps)
    got, peak = _peak(lambda: pa.grad(loop)(k, steps, checkpoints="auto", max_memory=budget))
    assert_close(got, expected, **TOL)
    if peak is not None:
        assert peak <= schedules.parse_memory(budget), peak / 2**20


@pytest.mark.parametrize("loop", [scanned, whiled])
def test_auto_refuses_only_what_two_slots_cannot_fit_naming_what_was_counted(loop):
    with pytest.raises(ValueError) as info:
        pa.grad(loop)(xp.asarray(0.5), 5, checkpoints="auto", max_memory="4MiB")
    message = str(info.value)
    for part in ("pa.", "a carry of 80000", "one step's recording", "temporaries", "cotangents",
                 "at least 2 are needed", "max_memory must be at least"):  # fmt: skip
        assert part in message, message
    required = int(message.split("must be at least ")[1].split()[0])
    pa.grad(loop)(xp.asarray(0.5), 5, checkpoints="auto", max_memory=required)  # the bytes it names fit


def _counted(checkpoints, steps, transform):
    calls = []

    def body(c):
        calls.append(type(c[0]).__name__)
        return c[0] * 1.01 + 0.1 * xp.sin(c[0]), c[1] + 1

    def f(a):
        return pa.while_loop(lambda c: c[1] < steps, body, (a, xp.asarray(0)), checkpoints=checkpoints)[0]

    out = transform(f)(xp.asarray(0.3))
    return out, len(calls)


def _ref(a, steps):
    for _ in range(steps):
        a = a * 1.01 + 0.1 * xp.sin(a)
    return a


@pytest.mark.parametrize("steps", [0, 1, 8, 37])
def test_sqrt_on_a_while_loop_grows_its_slots_as_the_loop_runs(steps):
    """ "sqrt" was refused ("needs the length"): its slots grow as sqrt_slots(steps run), and grad runs
    the body once (traced) + the schedule's advances + once per step (the turns)."""
    ref = lambda a: _ref(a, steps)  # noqa: E731
    g, calls = _counted("sqrt", steps, pa.grad)
    assert_close(g, pa.grad(ref)(xp.asarray(0.3)), **TOL)
    assert calls == 1 + schedules.online_sqrt_steps(steps) + steps
    assert_close(_counted("sqrt", steps, lambda f: pa.jit(pa.grad(f)))[0], g, **TOL)
    f = lambda a: xp.sum(pa.while_loop(lambda c: c[1] < steps, lambda c: (c[0] * a, c[1] + 1),  # noqa: E731
                                       (xp.ones(10), xp.asarray(0)), checkpoints="sqrt")[0])  # fmt: skip
    rows = [r.shape[0] for r in pa.saved_residuals(f, xp.asarray(0.5)) if len(r.shape) == 2]
    assert rows == [min(steps, schedules.sqrt_slots(steps))]  # the stored carries: at most sqrt_slots


def test_online_sqrt_schedule_replays_and_stays_near_the_offline_one():
    for length in (0, 1, 2, 5, 30, 200, 1000):
        schedule = schedules.OnlineSqrtSchedule()
        for i in range(length):
            schedule.before_step(i)
            assert len(schedule.stored) <= schedules.sqrt_slots(i + 1)
        stored = schedule.stored
        # every step turned once, in order, on the right state, within sqrt_slots(length) states
        replay = simulate(schedule.reverse(length), length, slots=schedules.sqrt_slots(length), stored=stored)
        assert replay.advances == schedule.recomputations
        assert schedule.advances == schedules.online_sqrt_steps(length)
        if length >= 30:  # within 6% of the offline two-sweep schedule
            assert schedule.advances <= 1.06 * schedules.sqrt_steps(length), length


@pytest.mark.parametrize("checkpoints", [None, 3, "sqrt", "auto"])
def test_body_counts_under_each_transform(checkpoints):
    """Eagerly the body runs once a step; under every transform once more, on abstract values (the trace
    that closure-converts it: it sees no value); grad adds the online schedule's advances and one turn a
    step; grad of grad runs grad's count twice less the shared trace."""
    steps = 8
    slots = {None: None, 3: 3, "auto": None}.get(checkpoints)
    advances = (
        schedules.online_sqrt_steps(steps)
        if checkpoints == "sqrt"
        else schedules.online_steps(steps, slots or steps)
    )
    assert _counted(checkpoints, steps, lambda f: f)[1] == steps
    assert (
        _counted(checkpoints, steps, lambda f: lambda a: pa.jvp(f, (a,), (xp.ones_like(a),)))[1] == 1 + steps
    )
    assert _counted(checkpoints, steps, pa.grad)[1] == 1 + advances + steps
    assert _counted(checkpoints, steps, pa.hessian)[1] == 1 + advances + steps
    assert _counted(checkpoints, steps, lambda f: pa.grad(pa.grad(f)))[1] == 1 + 2 * (advances + steps)


def test_a_jitted_while_loop_gradient_takes_the_slots_max_memory_holds():
    """pa.jit(pa.grad(...)) of a while_loop without an int checkpoints: min(JIT_SLOTS, what
    pa.config.max_memory holds) slots, decided when it traces; it was refused under a tight budget."""
    from polyad.control.while_loop import JIT_SLOTS

    assert JIT_SLOTS == 32
    k, steps = xp.asarray(0.5), 30
    expected = pa.grad(unrolled)(k, steps)
    old = pa.config.max_memory
    try:
        pa.config.max_memory = "19MiB"
        g = pa.jit(pa.grad(lambda k: whiled(k, steps)))
        assert_close(g(k), expected, **TOL)
        got, peak = _peak(lambda: g(k))
        assert_close(got, expected, **TOL)
        if peak is not None:
            assert peak <= 19 * 2**20, peak / 2**20
    finally:
        pa.config.max_memory = old


def test_vmap_runs_the_body_exactly_as_often_as_the_longest_example_needs():
    """A batched while_loop ran the body once more than the longest example needs (8 for 7): the trace.
    Under vmap alone nothing is traced now; each example still stops at its own step, nested too."""
    calls = []

    def grow(x0, limit):
        def body(x):
            calls.append(type(x).__name__)
            return x * 1.5

        return pa.while_loop(lambda x: x < limit, body, x0)

    def ref(x0, limit):
        n = 0
        while x0 < limit:
            x0, n = x0 * 1.5, n + 1
        return x0, n

    starts = [1.0, 9.0, 10.0 / 1.5**7 * 1.01, 20.0]
    x0 = xp.asarray(starts)
    expected = [ref(v, 10.0) for v in starts]
    assert max(n for _, n in expected) == 7
    got = pa.vmap(lambda v: grow(v, 10.0))(x0)
    assert_close(got, xp.asarray([v for v, _ in expected]), **TOL)
    assert len(calls) == 7 and "TracedTensor" not in calls
    calls.clear()  # per-example limits, closed over; a vmap of a vmap
    limits = [[2.0, 30.0], [5.0, 0.5]]
    got = pa.vmap(pa.vmap(grow, in_dims=(None, 0)), in_dims=(None, 0))(xp.asarray(1.0), xp.asarray(limits))
    runs = [[ref(1.0, b) for b in row] for row in limits]
    assert_close(got, xp.asarray([[v for v, _ in row] for row in runs]), **TOL)
    assert len(calls) == max(n for row in runs for _, n in row)
    calls.clear()  # under another transform: the trace on abstract values, once
    pa.jvp(lambda v: pa.vmap(lambda a: grow(a, 10.0))(v), (x0,), (xp.ones_like(x0),))
    assert len(calls) == 8 and calls[0] == "TracedTensor" and "TracedTensor" not in calls[1:], calls


def test_a_jitted_gradient_reverses_with_the_slots_its_primal_pass_stored(monkeypatch):
    """Under pa.jit, checkpoints=None stores JIT_SLOTS carries; the backward pass resumed the schedule as
    if every carry were stored (each gap between two stored carries then reversed with one slot: a
    3,000-step loop took 7.6 s, 0.5 s now). It now resumes with the slots the primal pass used."""
    resumed = []
    original = schedules.OnlineSchedule.resumed.__func__

    def spy(cls, slots, stored, steps):
        resumed.append((slots, len(list(stored)), steps))
        return original(cls, slots, stored, steps)

    monkeypatch.setattr(schedules.OnlineSchedule, "resumed", classmethod(spy))

    def f(a):
        body = lambda c: (c[0] * 0.999 + 0.001 * xp.sin(a * c[0]), c[1] + 1)  # noqa: E731
        return pa.while_loop(lambda c: c[1] < 300, body, (a, xp.asarray(0)))[0]

    def ref(a):
        x = a
        for _ in range(300):
            x = x * 0.999 + 0.001 * xp.sin(a * x)
        return x

    a = xp.asarray(0.7)
    assert_close(pa.jit(pa.grad(f))(a), pa.grad(ref)(a), **TOL)
    assert resumed == [(32, 32, 300)]


def test_a_jitted_gradient_stays_within_max_memory():
    """pa.jit(pa.grad) of a scan with checkpoints="auto": its compiled backward pass (one scan_reverse
    op) held the primal pass's stored states as arguments through the whole sweep, beside the states the
    sweep stores itself as it reverses, so the peak grew past max_memory with the steps per slot (W9 at
    10^4 steps: 50 MiB of a 40 MiB budget; here 6.5 MiB of 6). Compiled code now hands them over
    (``codegen.consuming``) and each is freed at its schedule's Free: the peak stays within the budget
    plus one carry, at the first call (traced and built, the loops compiled before), the second, and in
    the graph interpreter (main: 8.0 MiB, now 5.4; compiled: 3.9)."""
    n, steps, budget = 20_000, 200, "6MiB"  # about 22 slots of 160 kB, 9 steps a slot
    u0 = xp.linspace(0.0, 1.0, n)

    def loss(k):
        u, _ = pa.scan(
            lambda u, _: (_step(k, u), None), u0, length=steps, checkpoints="auto", max_memory=budget
        )
        return xp.sum(u * u)

    def unrolled_loss(k):
        u = u0
        for _ in range(steps):
            u = _step(k, u)
        return xp.sum(u * u)

    k = xp.asarray(0.5)
    expected = pa.jvp(unrolled_loss, (k,), (xp.asarray(1.0),))[1]  # forward mode: no stored steps
    pa.jit(pa.grad(loss))(k)  # Numba's compile of the loops (its own memory) before measuring
    jitted = pa.jit(pa.grad(loss))
    # the interpreted graph (eager kernels, node after node: what runs a graph while it compiles) too
    interpreted = interpret_graph(pa.make_graph(pa.grad(loss), k), dispatch.default_backend())
    for run in (jitted, jitted, interpreted):
        start_tracemalloc()
        try:
            got = run(k)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert_close(got[0] if isinstance(got, tuple) else got, expected, rtol=1e-10, atol=0)
        assert peak <= schedules.parse_memory(budget) + n * 8, peak / 2**20
