"""Compiled loop steps replayed from device graphs (``polyad.control.graph_steps``), k steps per launch.

No GPU here: the control logic runs against a recording fake of the backend's ``graph_capture`` field,
set on the lane's own backend, whose capture runs the step's calls once (as CuPy's warm-up does, so that
inputs the loop did not write again after the capture would show) and whose launch runs them again.
Values are checked against the same jitted function without graphs, the unrolled Python loop and central
differences; the counts against the rule (``length // k`` launches of k steps, then one per binary digit
of the rest, each size captured once per signature). The cuda-marked test runs the real capture on CuPy.
"""

import numpy as np
import pytest
from helpers import to_numpy

import polyad as pa
from polyad.control import graph_steps
from polyad.control.closure import CompiledBody
from polyad.core import dispatch

xp = pa.xp
K = 4  # steps per launch in these tests (32 in use)


class FakeCapture:
    """``graph_capture`` on the CPU: ``capture(record)`` runs ``record`` once and keeps it; a launch runs
    it again. Counts the compiled steps run in each phase."""

    def __init__(self, fail_at=None):
        self.captures = self.launches = 0
        self.steps = {"capture": 0, "launch": 0, "plain": 0}
        self.phase, self.open = "plain", False
        self.fail_at = fail_at  # raise at this step of a capture (a step that synchronises, say)

    def capture(self, record):
        self.captures += 1
        self.phase, self.open = "capture", True
        try:
            record()
        finally:  # as CuPy's: the capture is ended whatever happened inside
            self.phase, self.open = "plain", False
        fake = self

        class Replay:
            def launch(self):
                fake.launches += 1
                fake.phase = "launch"
                try:
                    record()
                finally:
                    fake.phase = "plain"

        return Replay()

    def count(self):
        self.steps[self.phase] += 1
        if self.phase == "capture" and self.fail_at == self.steps["capture"]:
            raise RuntimeError("operation not permitted when stream is capturing")


@pytest.fixture
def fake(monkeypatch):
    capture = FakeCapture()
    monkeypatch.setattr(dispatch.default_backend(), "graph_capture", capture, raising=False)
    monkeypatch.setattr(graph_steps, "STEPS_PER_LAUNCH", K)
    monkeypatch.setenv("POLYAD_CUDA_GRAPHS", "1")
    init = CompiledBody.__init__

    def counting_init(self, *args, **kwargs):  # every compiled step counts its runs
        init(self, *args, **kwargs)
        fn = self.fn

        def counted(*a):
            capture.count()
            return fn(*a)

        self.fn = counted

    monkeypatch.setattr(CompiledBody, "__init__", counting_init)
    return capture


def diffusion(u, k):
    return u + 0.2 * k * (xp.roll(u, 1) - 2.0 * u + xp.roll(u, -1)) - 0.01 * u * u * u


def scan_fn(reverse):
    def f(u0, k, xs):
        def body(u, x):
            u = diffusion(u, k) + 0.01 * x
            return u, xp.sum(u * u)

        return pa.scan(body, u0, xs, reverse=reverse)

    return f


def unrolled(u0, k, xs, reverse):
    u, ys = u0, [None] * xs.shape[0]
    order = range(xs.shape[0] - 1, -1, -1) if reverse else range(xs.shape[0])
    for t in order:
        u = diffusion(u, k) + 0.01 * xs[t]
        ys[t] = xp.sum(u * u)
    return u, xp.stack(ys)


def inputs(n=16, length=10):
    u0 = xp.sin(xp.linspace(0.0, 6.0, n, dtype=xp.float64))
    return u0, xp.asarray(0.7, dtype=xp.float64), xp.linspace(0.0, 1.0, length, dtype=xp.float64)


def close(a, b, tol=1e-12):
    np.testing.assert_allclose(to_numpy(a), to_numpy(b), rtol=tol, atol=tol)


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_replays_k_steps_per_launch(fake, monkeypatch, reverse):
    u0, k, xs = inputs(length=10)
    jitted = pa.jit(scan_fn(reverse))  # a graph with a loop compiles before its first call
    u, ys = jitted(u0, k, xs)
    assert graph_steps.rungs(10) == [K, K, 2]  # the third launch's capture comes after the carry is in
    assert (fake.captures, fake.launches) == (2, 3)  # the buffers: it must not step on it
    assert fake.steps == {"capture": K + 2, "launch": 10, "plain": 0}
    k2 = xp.asarray(1.4, dtype=xp.float64)
    u2, ys2 = jitted(u0, k2, xs)  # same signature, new closure value: no new capture
    assert (fake.captures, fake.launches, fake.steps["plain"]) == (2, 6, 0)
    monkeypatch.setenv("POLYAD_CUDA_GRAPHS", "0")
    plain = pa.jit(scan_fn(reverse))
    for got, expected in zip((u, ys, u2, ys2), (*plain(u0, k, xs), *plain(u0, k2, xs))):
        np.testing.assert_array_equal(to_numpy(got), to_numpy(expected))  # the same compiled step
    for got, expected in zip((u, ys), unrolled(u0, k, xs, reverse)):
        close(got, expected)


def test_fori_loop(fake):
    u0, k, _ = inputs()

    def f(u0, k):
        return pa.fori_loop(0, 11, lambda i, u: diffusion(u, k) + 0.001 * xp.astype(i, u.dtype), u0)

    got = pa.jit(f)(u0, k)
    assert graph_steps.rungs(11) == [K, K, 2, 1]
    assert (fake.captures, fake.launches, fake.steps["plain"]) == (3, 4, 0)
    u = u0
    for i in range(11):
        u = diffusion(u, k) + 0.001 * i
    close(got, u)


def test_grad_through_a_checkpointed_scan(fake, monkeypatch):
    u0, k, xs = inputs(length=20)

    def loss(k, u0, checkpoints=3):
        u, _ = pa.scan(lambda u, x: (diffusion(u, k) + 0.01 * x, None), u0, xs, checkpoints=checkpoints)
        return xp.sum(u * u)

    got = pa.jit(pa.grad(loss))(k, u0)
    # the primal pass's scan launches between the checkpoints it stores, the sweep's advances too: no
    # step of the compiled body runs by itself
    assert fake.launches >= 3 and fake.steps["plain"] == 0
    assert fake.captures <= 6  # rungs of K, 2 and 1 steps for each of 2 signatures at most

    def by_hand(k):
        u = u0
        for t in range(20):
            u = diffusion(u, k) + 0.01 * xs[t]
        return xp.sum(u * u)

    close(got, pa.grad(by_hand)(k))
    h = 1e-6
    central = (by_hand(k + h) - by_hand(k - h)) / (2 * h)
    close(got, central, tol=1e-6)
    monkeypatch.setenv("POLYAD_CUDA_GRAPHS", "0")
    close(got, pa.jit(pa.grad(loss))(k, u0), tol=1e-14)


@pytest.mark.parametrize("steps", [0, 5, 8])
def test_while_loop_masks_the_steps_past_its_end(fake, monkeypatch, steps):
    monkeypatch.setattr(graph_steps, "WHILE_STEPS_PER_LAUNCH", K)
    u0, k, _ = inputs()

    def f(u0, k, n):
        def body(carry):
            i, u = carry
            return i + 1, diffusion(u, k)

        return pa.while_loop(lambda carry: carry[0] < n, body, (xp.asarray(0), u0))

    jitted = pa.jit(f)
    i, u = jitted(u0, k, xp.asarray(steps))
    # the condition checked once per launch on the host: steps // K + 1 launches, none step by step
    assert (fake.captures, fake.launches, fake.steps["plain"]) == (1, steps // K + 1, 0)
    i3, u3 = jitted(u0, k, xp.asarray(steps + 3))  # the closure's new value reaches the captured steps
    assert (fake.captures, fake.steps["plain"]) == (1, 0)
    for got_i, got_u, n in ((i, u, steps), (i3, u3, steps + 3)):
        expected = u0
        for _ in range(n):
            expected = diffusion(expected, k)
        assert int(got_i) == n
        close(got_u, expected)


def test_no_capture_on_a_transforms_tensors(fake):
    u0, k, xs = inputs()
    f = scan_fn(False)
    batch = xp.stack([u0, 2 * u0])
    got = pa.vmap(pa.jit(f), (0, None, None))(batch, k, xs)  # the batched body is not compiled
    eager_grad = pa.grad(lambda k: xp.sum(f(u0, k, xs)[0]))(k)  # eager: the body is no CompiledBody
    assert (fake.captures, fake.launches) == (0, 0)
    for row in range(2):
        close(got[0][row, ...], unrolled(batch[row, ...], k, xs, False)[0])
    h = 1e-6
    central = (xp.sum(f(u0, k + h, xs)[0]) - xp.sum(f(u0, k - h, xs)[0])) / (2 * h)
    close(eager_grad, central, tol=1e-6)


def test_a_failed_capture_warns_once_and_runs_step_by_step(fake):
    fake.fail_at = 2  # the second step of the capture fails
    u0, k, xs = inputs(length=10)
    jitted = pa.jit(scan_fn(False))
    with pytest.warns(graph_steps.GraphCaptureWarning, match=r"pa.scan\(body\).*could not be captured"):
        u, ys = jitted(u0, k, xs)
    assert not fake.open and not graph_steps.capturing()  # the capture ended, the flag restored
    assert fake.launches == 0 and fake.steps["plain"] == 10
    for got, expected in zip((u, ys), unrolled(u0, k, xs, False)):
        close(got, expected)
    jitted(u0, k, xs)  # the signature is remembered: no second attempt, no second warning
    assert fake.captures == 1 and fake.steps["plain"] == 20


def test_the_default_runs_step_by_step(fake, monkeypatch):
    monkeypatch.delenv("POLYAD_CUDA_GRAPHS")
    pa.jit(scan_fn(False))(*inputs(length=10))
    assert (fake.captures, fake.launches, fake.steps["plain"]) == (0, 0, 10)


def test_rungs_cover_every_step_with_few_launches(monkeypatch):
    monkeypatch.setattr(graph_steps, "STEPS_PER_LAUNCH", 32)
    for steps in range(200):
        sizes = graph_steps.rungs(steps)
        assert sum(sizes) == steps and sizes == sorted(sizes, reverse=True)
        assert set(sizes) <= {32, 16, 8, 4, 2, 1} and len(sizes) == steps // 32 + bin(steps % 32).count("1")


def test_a_bad_setting_is_named(monkeypatch):
    monkeypatch.setenv("POLYAD_CUDA_GRAPHS", "yes")
    with pytest.raises(ValueError, match=r"\$POLYAD_CUDA_GRAPHS must be one of '', '0', '1'.*got 'yes'"):
        graph_steps.enabled()


@pytest.mark.cuda
def test_cuda_graphs_on_cupy(monkeypatch):
    import cupy

    u0 = cupy.sin(cupy.linspace(0.0, 6.0, 4096))
    k, xs = cupy.asarray(0.7), cupy.linspace(0.0, 1.0, 70)
    results = {}
    for setting in ("0", "1"):
        monkeypatch.setenv("POLYAD_CUDA_GRAPHS", setting)
        jitted = pa.jit(scan_fn(False))
        grad = pa.jit(pa.grad(lambda k: xp.sum(scan_fn(False)(u0, k, xs)[0] ** 2)))
        results[setting] = [*jitted(u0, k, xs), *jitted(u0, cupy.asarray(1.4), xs), grad(k)]
    for got, expected in zip(results["1"], results["0"]):
        close(got, expected, tol=1e-13)
