"""Levels, dispatch modes and captures are per thread: transforms running at the same time in several
threads do not see each other's levels."""

import threading

import numpy as np
from helpers import to_numpy

import polyad as pa
from polyad import core, xp
from polyad.core import dispatch


def _run_threads(target, n=4):
    errors = []

    def wrapped(k):
        try:
            target(k)
        except BaseException as exc:  # reported below, with the thread's number
            errors.append((k, exc))

    threads = [threading.Thread(target=wrapped, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_concurrent_transforms_in_threads():
    bx = dispatch.default_backend().xp

    def work(k):
        x = bx.asarray([0.1 * (k + 1), 0.2, 0.3], dtype=bx.float64)
        for _ in range(30):
            g = pa.grad(lambda v: xp.sum(xp.sin(v) * (k + 1)))(x)
            np.testing.assert_allclose(to_numpy(g), np.cos(to_numpy(x)) * (k + 1), rtol=1e-12)
            h = pa.vmap(pa.grad(lambda v: xp.sum(v**3)))(bx.stack([x, 2 * x]))
            np.testing.assert_allclose(to_numpy(h), 3 * np.stack([to_numpy(x), 2 * to_numpy(x)]) ** 2)
        assert core.current_level() == 0

    _run_threads(work)


def test_pre_dispatch_capture_in_one_thread_leaves_others_alone():
    bx = dispatch.default_backend().xp
    started, done = threading.Event(), threading.Event()
    graphs = []

    def capture(k):
        if k == 0:

            def f(v):
                started.set()
                done.wait(5)  # another thread computes while this capture is open
                return pa.grad(lambda u: xp.sum(u * u))(v)

            graphs.append(pa.make_graph(f, bx.ones(2, dtype=bx.float64), pre_dispatch=True))
        else:
            started.wait(5)
            g = pa.grad(lambda u: xp.sum(xp.exp(u)))(bx.zeros(2, dtype=bx.float64))
            np.testing.assert_allclose(to_numpy(g), [1.0, 1.0])
            done.set()

    _run_threads(capture, n=2)
    (graph,) = graphs
    assert [n.kind for n in graph.nodes] == ["grad"]
    np.testing.assert_allclose(to_numpy(graph(bx.asarray([1.0, 2.0], dtype=bx.float64))), [2.0, 4.0])


def test_two_pre_dispatch_captures_at_once():
    bx = dispatch.default_backend().xp
    barrier = threading.Barrier(2, timeout=5)
    graphs = {}

    def capture(k):
        def f(v):
            barrier.wait()  # both captures open
            out = xp.sin(v) * (k + 1)
            barrier.wait()  # both have recorded their first op; one may now finish first
            if k == 1:
                barrier.wait()  # thread 0 has finished its capture: this one must still record
            return out + 1.0

        graphs[k] = pa.make_graph(f, bx.zeros(2, dtype=bx.float64), pre_dispatch=True)
        if k == 0:
            barrier.wait()

    _run_threads(capture, n=2)
    for k, graph in graphs.items():
        assert [n.op.name for n in graph.nodes] == ["sin", "multiply", "add"]
        x = bx.asarray([0.5, 1.0], dtype=bx.float64)
        np.testing.assert_allclose(to_numpy(graph(x)), np.sin([0.5, 1.0]) * (k + 1) + 1.0)
    assert core.pre_dispatch_hook() is None


# ------------------------------------------------------------------------------ the default backend


def _other_backend():
    return "array_api_strict" if pa.get_backend() == "numpy" else "numpy"


def _created_on():
    return dispatch.backend_of_array(xp.zeros(2)).name  # where a creation with no input lands


def test_set_backend_in_a_worker_is_the_default_of_every_thread():
    """set_backend is process-wide: threads already running, threads started later and the main thread
    all see it (its docstring and the README say so)."""
    default, other = pa.get_backend(), _other_backend()
    ready, switched, seen = threading.Event(), threading.Event(), {}

    def running():
        seen["before"] = pa.get_backend()
        ready.set()
        switched.wait(5)
        seen["running"], seen["running creates on"] = pa.get_backend(), _created_on()

    t = threading.Thread(target=running)
    t.start()
    try:
        ready.wait(5)
        _run_threads(lambda k: pa.set_backend(other), n=1)
        switched.set()
        t.join()
        later = []
        _run_threads(lambda k: later.append(pa.get_backend()), n=1)
        assert (pa.get_backend(), _created_on(), later) == (other, other, [other])
    finally:
        pa.set_backend(default)
    assert seen == {"before": default, "running": other, "running creates on": other}
    assert pa.get_backend() == default


def test_backend_block_chooses_for_its_own_thread_only():
    default, other = pa.get_backend(), _other_backend()
    inside, looked = threading.Event(), threading.Event()
    seen = {}

    def work(k):
        if k == 0:
            with pa.backend(other):
                inside.set()
                looked.wait(5)
                seen["in block"], seen["block creates on"] = pa.get_backend(), _created_on()
            seen["after block"] = pa.get_backend()
        else:
            inside.wait(5)
            seen["other thread"], seen["other creates on"] = pa.get_backend(), _created_on()
            looked.set()

    _run_threads(work, n=2)
    assert seen == {
        "in block": other,
        "block creates on": other,
        "after block": default,
        "other thread": default,
        "other creates on": default,
    }


def test_set_backend_inside_a_block_takes_effect_when_the_block_ends():
    default, other = pa.get_backend(), _other_backend()
    try:
        with pa.backend(default):
            pa.set_backend(other)
            assert pa.get_backend() == default  # the block's choice holds in its thread
        assert pa.get_backend() == other
    finally:
        pa.set_backend(default)
