"""Compiling the fused CPU loops (``fusion.py``) without making the caller wait for Numba.

Numba takes from a tenth of a second (a loop of a few additions) to several seconds (the gradient of W1:
600 statements, 150 vectorised functions) to compile a loop the first time, plus most of a second to
import itself. A fused kernel's first call therefore hands its loop to one background thread and runs
the group's ops as NumPy calls meanwhile (the fallback: eager's own kernels, one call per op, so the
first call of ``pa.jit`` costs about what eager code costs, plus tracing); the call after the loop is
ready runs the loop. Kernels of the same source (the steps of an unrolled loop) share one job.

While the loop compiles, results are eager's (NumPy's functions); after, the loop's (``math="fast"``:
within an ulp or two of them), so two calls of one jitted function may differ in the last bits.

``pa.jit`` hands the same thread the rest of a first call's pipeline (``submit``: optimise, fuse, code,
before any loop waiting there), so that its first call costs tracing and eager's kernels only.

``$POLYAD_FUSION_COMPILE``: "background" (the default) or "wait" (compile on the calling thread at the
first call and run the loop at once: benchmarks of the loop itself, and tests of it). ``wait()`` blocks
until every job handed out so far has finished.

A loop that fails to compile (a bug: the generated source is checked by the tests) warns once, naming
the error, and its group keeps running as NumPy calls, which give the right values.

The worker is a daemon thread: a process that ends while a loop compiles does not wait for it, and that
loop is compiled again, from the start, by the next process (Numba's disk cache holds only finished ones).
"""

import itertools
import os
import queue
import sys
import threading
import time
import warnings

ENV_COMPILE = "POLYAD_FUSION_COMPILE"
MODES = ("background", "wait")


class _Job:
    """One loop to compile: ``build()`` returns the kernel; ``done`` is set when it returned or raised."""

    __slots__ = ("build", "done", "kernel", "error", "warned")

    def __init__(self, build):
        self.build = build
        self.done = threading.Event()
        self.kernel = None
        self.error = None
        self.warned = False

    def run(self):
        try:
            self.kernel = self.build()
        except Exception as e:  # noqa: BLE001 -- reported on the caller's thread (``ready``), values stay right
            self.error = e
        finally:
            self.build = None
            self.done.set()


class _State:
    def __init__(self):
        self.jobs = {}  # key (the loop's source, or the job itself for ``submit``'s) -> _Job
        self.lock = threading.Lock()
        self.queue = queue.PriorityQueue()  # (priority, order, job): pa.jit's pipelines before loops
        self.order = itertools.count()
        self.worker = None


_STATE = _State()


def _after_fork_in_child():
    """A forked child has no worker thread: jobs still pending are forgotten (asked for again, they are
    compiled anew); finished ones stay; the switch interval the worker lowered goes back."""
    global _STATE
    old = _STATE
    _STATE = _State()
    _STATE.jobs = {k: j for k, j in old.jobs.items() if j.done.is_set() and not isinstance(k, _Job)}
    if sys.getswitchinterval() == min(_SWITCH_AT_IMPORT, SWITCH_S) != _SWITCH_AT_IMPORT:
        sys.setswitchinterval(_SWITCH_AT_IMPORT)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


_LOCAL = threading.local()  # .waiting: this thread's calls compile their loops at once (``waiting``)


def mode():
    """``$POLYAD_FUSION_COMPILE`` checked: "background" (default) or "wait"; "wait" too inside
    ``waiting()`` on this thread."""
    if getattr(_LOCAL, "waiting", False):
        return "wait"
    value = os.environ.get(ENV_COMPILE, "background")
    if value not in MODES:
        raise ValueError(
            f"${ENV_COMPILE} must be one of {', '.join(map(repr, MODES))} (whether a fused loop compiles in "
            f"the background while its ops run as NumPy calls, or the first call waits for it), got {value!r}"
        )
    return value


def ready_later(key, build):
    """``ready`` for a kernel whose fallback is compiled code already (a small state's whole loop): a
    first call of ``pa.jit`` (``waiting()``) does not wait for it, only ``$POLYAD_FUSION_COMPILE`` does."""
    waiting = getattr(_LOCAL, "waiting", False)
    _LOCAL.waiting = False
    try:
        return _ready(key, build)
    finally:
        _LOCAL.waiting = waiting


def ready(key, build):
    """The kernel compiled for ``key`` if it is ready, else None: the caller runs its fallback this time.
    ``build()`` compiles it (called once per key, on the worker thread; on the calling thread under
    "wait"). None too, for good, where it failed (with a warning, once)."""
    return _ready(key, build)


def _ready(key, build):
    state = _STATE
    job = state.jobs.get(key)
    if job is None:
        with state.lock:
            job = state.jobs.get(key)
            if job is None:
                job = state.jobs[key] = _Job(build)
                if mode() == "wait":
                    job.run()
                else:
                    state.queue.put((1, next(state.order), job))
                    _start_worker(state)
    if not job.done.is_set():
        if mode() == "background":
            return None
        job.done.wait()  # queued earlier in the background, asked for now under "wait"
    if job.error is not None and not job.warned:
        job.warned = True
        warnings.warn(
            f"a fused CPU loop of pa.jit failed to compile ({type(job.error).__name__}: {job.error}); its "
            "ops run as NumPy calls instead (the values are right, the loop's speed is lost). Please report "
            "it with the function that was jitted",
            RuntimeWarning,
            stacklevel=3,
        )
    return job.kernel


def _start_worker(state):
    if state.worker is None or not state.worker.is_alive():
        state.worker = threading.Thread(
            target=_work, args=(state.queue,), name="polyad-fusion-compile", daemon=True
        )
        state.worker.start()


# While the worker has jobs, the interpreter switches threads every SWITCH_S seconds (Python's default is
# 5 ms): a caller's NumPy call that released the GIL waits at most that long to take it back from the
# worker, where it waited up to 5 ms per call (W2's first call: +120 ms over 24 calls while Numba compiled)
SWITCH_S = 0.0002
_SWITCH_AT_IMPORT = sys.getswitchinterval()


def _work(jobs):
    while True:
        job = jobs.get()[2]
        before = sys.getswitchinterval()
        sys.setswitchinterval(min(before, SWITCH_S))
        try:
            job.run()
            while True:  # the jobs queued meanwhile, before the interval goes back
                try:
                    job = jobs.get_nowait()[2]
                except queue.Empty:
                    break
                job.run()
        finally:
            if sys.getswitchinterval() == min(before, SWITCH_S):  # unless someone else changed it
                sys.setswitchinterval(before)


def submit(fn):
    """Run ``fn()`` on the background thread, before the loops waiting there (``pa.jit`` hands it the rest
    of a first call's pipeline: optimise, fuse, code). An exception warns (``fn`` can be run again, on
    the caller's thread, where it raises)."""
    state = _STATE

    def run():
        try:
            fn()
        except Exception as e:  # noqa: BLE001 -- the caller keeps what it ran before: right values
            warnings.warn(
                f"pa.jit's optimiser or fusion failed in the background ({type(e).__name__}: {e}); the "
                "function keeps running its graph as traced, unoptimised (the values are right)",
                RuntimeWarning,
                stacklevel=1,
            )
        finally:
            state.jobs.pop(job, None)

    job = _Job(run)
    with state.lock:
        state.jobs[job] = job
        state.queue.put((0, next(state.order), job))
        _start_worker(state)


def forget(key):
    """Drop the finished job of ``key`` (its loop), once no kernel needs it: the next ``ready(key, ...)``
    compiles it again (from Numba's disk cache where it is there). A job still running stays."""
    state = _STATE
    with state.lock:
        job = state.jobs.get(key)
        if job is not None and job.done.is_set():
            del state.jobs[key]


def compiling(key):
    """Whether the loop of ``key`` is being compiled (a job handed out and not finished)."""
    job = _STATE.jobs.get(key)
    return job is not None and not job.done.is_set()


def loops_held():
    """The sources of the loops (finished or pending jobs) this process holds."""
    return frozenset(k for k in list(_STATE.jobs) if not isinstance(k, _Job))


def pending():
    """The number of jobs handed to the background thread and not finished yet."""
    return sum(not j.done.is_set() for j in list(_STATE.jobs.values()))


class waiting:
    """Within it, this thread's fused loops compile on first use and run at once, as under "wait": a
    jitted graph that loops, or whose eager run would cost more than compiling, runs compiled from its
    first call (``polyad.api.jit``). Re-entrant; other threads keep their mode."""

    def __enter__(self):
        self.before = getattr(_LOCAL, "waiting", False)
        _LOCAL.waiting = True
        return self

    def __exit__(self, *exc):
        _LOCAL.waiting = self.before
        return False


def wait(timeout=None):
    """Block until every job handed out so far, and every one those hand out (a pipeline's loops), has
    finished; False if ``timeout`` seconds passed first."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        waiting = [j for j in list(_STATE.jobs.values()) if not j.done.is_set()]
        if not waiting:
            return True
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        if not waiting[0].done.wait(left):
            return False


__all__ = ["ENV_COMPILE", "MODES", "compiling", "mode", "pending", "ready", "submit", "wait", "waiting"]
