"""Levels, dispatch modes and captures are per thread: transforms running at the same time in several
threads do not see each other's levels."""

import threading

import numpy as np
from helpers import to_numpy

import polyad as pa
from polyad import core, dispatch, xp


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
    assert core._pre_dispatch is None
