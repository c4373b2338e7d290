"""Jacobians and vmap on a Dask cluster: a LocalCluster of two worker processes (started once for the
module, shut down after it) computes jacrev, jacfwd, hessian and vmap in chunks; every result is checked
against the single-process transform. Failures: an unpicklable function, an error in the function, a
worker that dies (killed by the function, or from outside mid-run) and a timeout each give their error,
never a hang (every wait has a timeout)."""

import os
import signal
import sys
import threading
import time

import numpy as np
import pytest
from helpers import assert_close

import polyad as pa
from polyad import core
from polyad import xp as pxp
from polyad.core import dispatch

distributed = pytest.importorskip("distributed")
dask = pytest.importorskip("dask")
cloudpickle = pytest.importorskip("cloudpickle")

WAIT = 120  # seconds: the most any test waits on the cluster


@pytest.fixture(scope="module")
def client():
    # the workers cannot import this test module: its functions travel by value
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    # one death of a task's worker is a failure (the default retries on 3 more workers, which are
    # restarted one by one: slow for a test)
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        cluster = distributed.LocalCluster(
            n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None
        )
    c = distributed.Client(cluster, timeout=WAIT)
    try:
        yield c
    finally:
        c.close(timeout=WAIT)
        cluster.close(timeout=WAIT)
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


@pytest.fixture
def cl(client):
    """The shared client, with both workers up (a test that kills one waits for its restart)."""
    client.wait_for_workers(2, timeout=WAIT)
    yield pa.distributed(client, timeout=WAIT)
    assert core.current_level() == 0


@pytest.fixture
def A():
    xp = dispatch.default_backend().xp
    return lambda x: xp.asarray(np.asarray(x), dtype=xp.float64)


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape) / np.sqrt(shape[-1])


def model(A, n=12, m=10):
    W, b = A(rand(m, n, seed=1)), A(rand(m, seed=2))

    def f(p, x):
        h = pxp.tanh(W @ x * p["s"] + b)
        return {"h": h, "e": pxp.sum(pxp.exp(-h) * p["w"])}, pxp.max(h)

    return f


def test_jacobians_match_one_process(A, cl):
    f = model(A)
    p, x = {"s": A(1.3), "w": A(rand(10, seed=3))}, A(rand(12, seed=4))
    for transform in (pa.jacrev, pa.jacfwd):
        for chunk in (None, 4, "auto"):
            ref = transform(f, argnums=(0, 1), has_aux=True)(p, x)
            got = transform(f, argnums=(0, 1), has_aux=True, chunk_size=chunk, client=cl)(p, x)
            assert_close(got[1], ref[1])
            for key in ("h", "e"):
                for g, r in zip(got[0][key], ref[0][key]):
                    if isinstance(r, dict):
                        for k in r:
                            assert_close(g[k], r[k], rtol=1e-12, atol=1e-14)
                    else:
                        assert_close(g, r, rtol=1e-12, atol=1e-14)
    loss = lambda x: pxp.sum(f(p, x)[0]["h"] ** 2)  # noqa: E731
    assert_close(pa.hessian(loss, chunk_size=5, client=cl)(x), pa.hessian(loss)(x), rtol=1e-12, atol=1e-14)


def test_vmap_matches_one_process(A, cl):
    f = model(A)
    p, xs = {"s": A(0.7), "w": A(rand(10, seed=5))}, A(rand(12, 9, seed=6))
    per_example = pa.grad(lambda p, x: f(p, x)[0]["e"])
    ref = pa.vmap(per_example, in_dims=(None, 1))(p, xs)
    for chunk in (None, 2, 1):
        got = pa.vmap(per_example, in_dims=(None, 1), chunk_size=chunk, client=cl)(p, xs)
        assert_close(got["s"], ref["s"], rtol=1e-12)
        assert_close(got["w"], ref["w"], rtol=1e-12)
    g = pa.vmap(lambda x: (f(p, x)[0], x[0]), in_dims=1, out_dims=({"h": 1, "e": 0}, 0), client=cl)(xs)
    r = pa.vmap(lambda x: (f(p, x)[0], x[0]), in_dims=1, out_dims=({"h": 1, "e": 0}, 0))(xs)
    assert_close(g[0]["h"], r[0]["h"], rtol=1e-12)
    assert_close(g[0]["e"], r[0]["e"], rtol=1e-12)
    assert_close(g[1], r[1])
    # no examples: nothing to send, the (empty) result as in one process (it raised IndexError)
    empty = A(rand(12, 0, seed=7))
    got = pa.vmap(per_example, in_dims=(None, 1), client=cl)(p, empty)
    want = pa.vmap(per_example, in_dims=(None, 1))(p, empty)
    assert got["w"].shape == want["w"].shape == (0, 10)


def test_context_block_and_lazy_dask_output(A, client, cl):
    da = pytest.importorskip("dask.array")
    f = model(A)
    p, x = {"s": A(1.1), "w": A(rand(10, seed=7))}, A(rand(12, seed=8))
    h = lambda x: f(p, x)[0]["h"]  # noqa: E731
    with pa.distributed(client, output="dask"):
        lazy = pa.jacfwd(h, chunk_size=5)(x)
        lazy_v = pa.vmap(h, chunk_size=4)(A(rand(11, 12, seed=9)))
        # inside another transform the work stays here: the inner jacrev runs locally, under vmap
        nested = pa.vmap(pa.jacrev(h), chunk_size=3)(A(rand(5, 12, seed=10)))
    assert isinstance(lazy, da.Array) and lazy.shape == (10, 12) and lazy.chunks[1] == (5, 5, 2)
    assert isinstance(nested, da.Array) and nested.shape == (5, 10, 12)
    assert_close(client.compute(lazy).result(timeout=WAIT), pa.jacfwd(h)(x), rtol=1e-12)
    assert_close(lazy_v.compute(), pa.vmap(h)(A(rand(11, 12, seed=9))), rtol=1e-12)
    ref = pa.vmap(pa.jacrev(h))(A(rand(5, 12, seed=10)))
    assert_close(nested.compute(), ref, rtol=1e-12)
    with pa.distributed(client):  # output="array": the inputs' own library
        got = pa.jacrev(h)(x)
        # an inner transform whose function closes over the outer one's traced value stays here
        w = A(rand(12, seed=11))
        g = pa.grad(lambda w: pxp.sum(pa.jacfwd(lambda v: pxp.sin(v * w))(x)))(w)
    assert type(got) is type(x)
    assert_close(got, pa.jacrev(h)(x), rtol=1e-12)
    xn, wn = np.asarray(rand(12, seed=8)), np.asarray(rand(12, seed=11))
    assert_close(g, np.cos(xn * wn) - xn * wn * np.sin(xn * wn), rtol=1e-12)  # d/dw of sum_i w_i cos(x_i w_i)


def test_complex_layouts_and_transformed_functions_travel(A, cl):
    xp = dispatch.default_backend().xp
    z = xp.asarray(np.array([1 + 2j, -0.3 + 0.5j, 2 - 1j]), dtype=xp.complex128)
    f = lambda v: v * pxp.conj(v) + pxp.exp(v)  # noqa: E731
    for layout in ("real", "wirtinger"):
        got = pa.jacrev(f, complex_layout=layout, chunk_size=2, client=cl)(z)
        ref = pa.jacrev(f, complex_layout=layout)(z)
        for g, r in zip(got if layout == "wirtinger" else [got], ref if layout == "wirtinger" else [ref]):
            assert_close(g, r, rtol=1e-12)
    assert_close(pa.jacfwd(pxp.exp, holomorphic=True, client=cl)(z), pa.jacfwd(pxp.exp, holomorphic=True)(z))
    # a polyad-transformed function is rebuilt on the workers from its recipe
    g = pa.grad(lambda x: pxp.sum(pxp.sin(x) ** 2))
    x = A(rand(7))
    assert_close(pa.jacfwd(g, client=cl)(x), pa.hessian(lambda x: pxp.sum(pxp.sin(x) ** 2))(x), rtol=1e-12)


def test_unpicklable_function_is_refused_before_sending(A, cl):
    lock = threading.Lock()
    x = A(rand(4))
    for call in (
        lambda: pa.jacfwd(lambda v: v * (2.0 if lock else 1.0), client=cl)(x),
        lambda: pa.vmap(lambda v: v * (2.0 if lock else 1.0), client=cl)(A(rand(3, 4))),
    ):
        with pytest.raises(
            TypeError, match=r"cannot be pickled to send to the Dask workers \(TypeError: .*lock"
        ):
            call()
    assert not cl.client.processing() or not any(cl.client.processing().values())


def test_errors_of_the_function_come_back_as_they_are(A, cl):
    def bad(v):
        if float(pxp.sum(v)) > -1e9:
            raise KeyError("a key the function lacks")
        return v

    with pytest.raises(KeyError, match="a key the function lacks"):
        pa.jacfwd(bad, client=cl)(A(rand(4)))
    with pytest.raises(KeyError, match="a key the function lacks"):
        pa.vmap(bad, chunk_size=1, client=cl)(A(rand(3, 4)))


def test_wrong_uses_of_client(A, client, cl):
    x = A(rand(4))
    with pytest.raises(ValueError, match="called inside another transform"):
        pa.vmap(pa.jacrev(pxp.sin, client=cl))(A(rand(2, 4)))
    with pytest.raises(ValueError, match="randomness='different' cannot hold across Dask workers"):
        pa.vmap(lambda v: v + pa.random.normal(), randomness="different", client=cl)(A(rand(3)))
    with pytest.raises(TypeError, match="client must be a distributed.Client or pa.distributed"):
        pa.jacrev(pxp.sin, client="tcp://127.0.0.1:8786")
    with pytest.raises(ValueError, match="output must be 'array' or 'dask'"):
        pa.distributed(client, output="numpy")
    with pytest.raises(ValueError, match="timeout must be None or a positive number"):
        pa.distributed(client, timeout=0)
    assert_close(pa.jacrev(pxp.sin, client=client)(x), pa.jacrev(pxp.sin)(x))  # a bare Client works too


def _on_a_worker():
    try:
        distributed.get_worker()
        return True
    except ValueError:
        return False


def test_a_worker_killed_by_the_function_is_an_error_not_a_hang(A, cl):
    def dies(v):
        if _on_a_worker():
            os.kill(os.getpid(), signal.SIGKILL)
        return v

    start = time.monotonic()
    with pytest.raises(
        pa.DistributedError, match=r"jacfwd\(dies, argnums=0\): a Dask worker died while computing rows"
    ):
        pa.jacfwd(dies, chunk_size=4, client=cl)(A(rand(4)))  # one task: one death
    assert time.monotonic() - start < WAIT


def test_a_worker_killed_mid_run_is_an_error_not_a_hang(A, client, cl):
    def slow(v):
        if _on_a_worker():
            time.sleep(30)  # longer than the test: the kill comes first
        return v * 2.0

    pids = client.run(os.getpid, wait=True)  # worker address -> its process
    result = {}

    def run():
        try:
            pa.vmap(slow, chunk_size=1, client=cl)(A(rand(4, 3)))
        except Exception as exc:  # noqa: BLE001  (the test below names what it expects)
            result["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + WAIT
    busy = []
    while time.monotonic() < deadline and not busy:
        time.sleep(0.1)
        running = client.run(lambda dask_worker: dask_worker.state.executing_count)
        busy = [address for address, n in running.items() if n]
    os.kill(pids[busy[0]], signal.SIGKILL)
    thread.join(WAIT)
    assert not thread.is_alive(), "the call hung after a worker died"
    assert isinstance(result.get("error"), pa.DistributedError), result
    assert "a Dask worker died while computing examples" in str(result["error"])
    client.restart(timeout=WAIT)  # the other worker is still sleeping in its task


def test_timeout(A, client):
    def slow(v):
        if _on_a_worker():
            time.sleep(6)
        return v

    client.wait_for_workers(2, timeout=WAIT)
    start = time.monotonic()
    with pytest.raises(
        pa.DistributedError, match=r"no result from the Dask cluster within timeout=0.5 s; 2 of 2"
    ):
        pa.jacrev(slow, client=pa.distributed(client, timeout=0.5))(A(rand(4)))
    # it gave up long before the tasks' 6 s (with room for a loaded machine: 4.1 s was seen at a load of 6)
    assert time.monotonic() - start < 5


def test_dask_progress_bar(A, cl, capsys):
    f = model(A)
    p, x = {"s": A(1.0), "w": A(rand(10))}, A(rand(12))
    pa.jacfwd(lambda x: f(p, x)[0]["h"], chunk_size=3, client=cl, progress=True)(x)
    assert "100% Completed" in capsys.readouterr().out


def test_workers_compute_on_their_own_default_backend(A, client, cl):
    here = pa.get_backend()
    there = "numpy" if here == "array_api_strict" else "array_api_strict"
    marker = "array_api_strict" if there == "array_api_strict" else "dtype"  # how each library prints a dtype

    def f(v):  # doubles where the arrays are the workers' backend's
        return v * (2.0 if marker in repr(v.dtype) else 1.0)

    x = A(rand(3))
    client.run(pa.set_backend, there)
    try:
        got = pa.jacfwd(f, client=cl)(x)
    finally:
        client.run(pa.set_backend, here)
    assert type(got) is type(x)  # back in the caller's library
    assert_close(got, 2 * np.eye(3))
    assert_close(pa.jacfwd(f)(x), np.eye(3))


@pytest.mark.parametrize("compare_max", [None, 0])  # the arrays compared with a copy, or by SHA-1
def test_the_payload_travels_once_and_follows_changes(A, client, cl, compare_max, monkeypatch):
    """The function and its fixed arguments reach each worker once: a second call with the same ones
    reuses the copies there; an array the function closes over, changed in place, is sent again."""
    from polyad.parallel import cluster

    if compare_max is not None:
        monkeypatch.setattr(cluster, "COMPARE_MAX", compare_max)
    W = A(rand(6, 6, seed=12 if compare_max is None else 14))  # not the other case's payload
    f = lambda v: pxp.tanh(W @ v)  # noqa: E731
    x = A(rand(6, seed=13))
    jac = pa.jacfwd(f, chunk_size=2, client=cl)
    assert_close(jac(x), pa.jacfwd(f)(x), rtol=1e-12)
    sent = cluster._SENT[client][-1]
    assert (sent.copies is None) == (compare_max == 0)
    assert_close(jac(x), pa.jacfwd(f)(x), rtol=1e-12)
    assert cluster._SENT[client][-1] is sent  # the same copies on the workers
    W[0, 0] += 1.0  # in place: the same objects, other bytes
    assert_close(jac(x), pa.jacfwd(f)(x), rtol=1e-12)
    assert cluster._SENT[client][-1] is not sent
    assert len(cluster._SENT[client]) <= cluster.KEEP


def test_a_call_at_a_new_point_sends_only_its_arguments(A, client, cl, monkeypatch):
    """The function's closed-over arrays are sent once; a call's own arguments travel inside its tasks
    (small) or as a payload of their own (over INLINE_MAX bytes), so a call at a new point, or with another
    large fixed argument, does not send the function again. Arguments changed in place after a lazy call
    do not reach its result."""
    from polyad.parallel import cluster

    W = A(rand(6, 6, seed=19))
    f = lambda v, c: pxp.tanh(W @ v) * c  # noqa: E731
    jac = pa.jacfwd(f, chunk_size=2, client=cl)
    x, c = A(rand(6, seed=20)), A(rand(6, seed=21))
    assert_close(jac(x, c), pa.jacfwd(f)(x, c), rtol=1e-12)
    function = cluster._SENT[client][-1]
    for k in range(2):  # new points: inline arguments
        x2 = x + (k + 1) * 0.25
        assert_close(jac(x2, c), pa.jacfwd(f)(x2, c), rtol=1e-12)
        assert cluster._SENT[client][-1] is function
    monkeypatch.setattr(cluster, "INLINE_MAX", 0)  # arguments as a payload of their own
    got = jac(x, c)
    assert_close(got, pa.jacfwd(f)(x, c), rtol=1e-12)
    assert function in cluster._SENT[client] and cluster._SENT[client][-1] is not function
    g = pa.vmap(f, in_dims=(0, None), client=cl, chunk_size=2)
    xs = A(rand(5, 6, seed=22))
    assert_close(g(xs, c), pa.vmap(f, in_dims=(0, None))(xs, c), rtol=1e-12)
    monkeypatch.setattr(cluster, "INLINE_MAX", 2**20)
    lazy = pa.jacfwd(f, chunk_size=2, client=pa.distributed(client, output="dask"))(x, c)
    expected = pa.jacfwd(f)(x, c)
    lazy_rows = pa.vmap(f, in_dims=(0, None), client=pa.distributed(client, output="dask"), chunk_size=2)
    rows, expected_rows = lazy_rows(xs, c), pa.vmap(f, in_dims=(0, None))(xs, c)
    x[0] += 1.0  # in place, before the lazy results compute
    xs[...] = 0.0
    c[...] = 0.0
    assert_close(np.asarray(lazy.compute()), expected, rtol=1e-12)
    assert_close(np.asarray(rows.compute()), expected_rows, rtol=1e-12)


def test_malloc_thresholds_are_tuned_while_tasks_run_and_set_back_after():
    """Workers started by Dask's nanny have MALLOC_TRIM_THRESHOLD_ set, which turns off glibc's dynamic
    mmap threshold; a polyad task raises the thresholds while tasks run and sets them back after."""
    from polyad.parallel import cluster

    calls = []

    class Libc:
        def mallopt(self, param, value):
            calls.append((param, value))

        def malloc_trim(self, pad):
            calls.append(("trim", pad))

    malloc = object.__new__(cluster._Malloc)
    malloc.cond, malloc.running, malloc.tuned, malloc.last = threading.Condition(), 0, False, 0.0
    malloc.libc, malloc.home, malloc.RELEASE = Libc(), (65536, 131072), 0.2
    threading.Thread(target=malloc._release_when_idle, daemon=True).start()
    big = (-3, 32 * 2**20), (-1, 64 * 2**20)
    with malloc:
        with malloc:  # a second task in another thread
            assert calls == list(big)
        assert malloc.tuned
    with malloc:  # the next task (within RELEASE seconds: nothing changes)
        assert malloc.tuned
    deadline = time.monotonic() + WAIT
    while malloc.tuned and time.monotonic() < deadline:
        time.sleep(0.01)
    assert calls[:2] == list(big) and calls[-3:] == [(-1, 65536), (-3, 131072), ("trim", 0)]
    assert len(calls) in (5, 7)  # 7: the machine was so slow that the pause between tasks passed RELEASE


def _scaled(shared, k):
    return shared["a"] * k


def _inline(value):
    """``value`` as a task carries a call's small arguments."""
    from polyad.parallel import cluster

    return cluster._Payload.copied(*cluster._pickle(value, "test"))


def test_a_worker_without_the_payload_fetches_it_once(client, cl):
    """The payload is one copy in the cluster's memory, not a dependency of the tasks (Dask's scheduler
    would draw every task to its worker; its active memory manager drops extra copies): a worker whose
    cache lacks it fetches it from the worker that holds it, once. A payload whose copy is gone is a
    DistributedError."""
    from polyad.parallel import cluster

    shared = {"a": np.arange(5.0)}
    token, future = cluster._send(client, "test", shared, WAIT)
    ref = cluster._Ref(future.key, WAIT, future)
    holder = set(client.who_has([future])[future.key])
    for worker in client.nthreads():  # the one holding it, and the other
        got = client.submit(
            cluster._run_task, _scaled, token, ref, _inline(2.0), workers=[worker], pure=False
        )
        assert_close(got.result(timeout=WAIT), 2.0 * np.arange(5.0))
    loaded = client.run(lambda: token in cluster._LOADED)
    assert all(loaded.values()) and len(loaded) == 2
    assert set(client.who_has([future])[future.key]) == holder  # fetched, not stored as a replica
    key, other = future.key, [w for w in client.nthreads() if w not in holder]
    del ref, future
    cluster._SENT[client].clear()
    deadline = time.monotonic() + WAIT
    while client.who_has([key]).get(key) and time.monotonic() < deadline:
        time.sleep(0.05)  # until the scheduler forgets the key
    lost = client.submit(
        cluster._run_task,
        _scaled,
        "another-token",
        cluster._Ref(key, WAIT),
        _inline(1.0),
        workers=other,
        pure=False,
    )
    with pytest.raises(pa.DistributedError, match="could not be fetched by a worker"):
        lost.result(timeout=WAIT)


def test_auto_chunks_on_a_cluster_are_a_multiple_of_the_worker_threads(A, cl):
    """chunk_size="auto" with a client: the fewest chunks that fit the budget, rounded up to a multiple
    of the worker threads (2 here), equal in size; an int chunk_size is rows per chunk, as given."""
    from polyad.parallel.plan import plan

    assert plan("auto", 1024, 1, 0, 600, "t", split=2)[:2] == (512, 2)
    assert plan("auto", 1024, 1, 0, 400, "t", split=2)[:2] == (256, 4)
    assert plan("auto", 1000, 1, 0, 300, "t", split=3)[:2] == (167, 6)
    assert plan("auto", 1000, 1, 0, 300, "t")[:2] == (300, 4)  # in this process: as large as fits
    W = A(rand(40, 40, seed=15))
    f = lambda v: pxp.tanh(W @ v)  # noqa: E731
    x = A(rand(40, seed=16))
    local = pa.jacfwd(f, max_memory="60KiB").chunk_plan(x)
    here = pa.jacfwd(f, max_memory="60KiB", client=cl).chunk_plan(x)
    assert here.n_chunks % 2 == 0 and here.n_chunks >= local.n_chunks
    assert pa.jacfwd(f, chunk_size=7, client=cl).chunk_plan(x)[:2] == (7, 6)
    assert_close(pa.jacfwd(f, max_memory="60KiB", client=cl)(x), pa.jacfwd(f)(x), rtol=1e-12)


def test_chunks_go_out_as_one_task_per_worker_thread(A, client, cl, monkeypatch):
    """An array result: the chunks dealt out in contiguous runs, one task per worker thread (2 here), each
    task computing its chunks chunk_size rows (examples) at a time; the result is the one computed here.
    A lazy result keeps one task (one block) per chunk."""
    from polyad.parallel import cluster

    sent = []
    submit = cluster.submit
    monkeypatch.setattr(cluster, "submit", lambda *a: sent.append(a[5]) or submit(*a))
    W = A(rand(30, 30, seed=17))
    f = lambda v: pxp.tanh(W @ v)  # noqa: E731
    x = A(rand(30, seed=18))
    for n_rows, chunk in [(30, 7), (30, 30), (30, 1)]:
        got = pa.jacfwd(f, chunk_size=chunk, client=cl)(x)
        assert_close(got, pa.jacfwd(f)(x), rtol=1e-12)
        starts = list(range(0, n_rows, chunk))
        parts = sent.pop()
        assert [p[2] for p in parts] == [chunk] * len(parts)
        assert len(parts) == min(2, len(starts)) and parts[0][0] == 0 and parts[-1][1] == n_rows
        assert all(p[0] in starts for p in parts)  # whole chunks
    lazy = pa.jacfwd(f, chunk_size=7, client=pa.distributed(client, output="dask"))(x)
    assert len(sent.pop()) == 5
    assert_close(np.asarray(lazy.compute()), pa.jacfwd(f)(x), rtol=1e-12)
    # vmap: the same runs of chunks, each task's chunks one at a time (a task's sizes: its chunks)
    xs = A(rand(11, 30, seed=19))
    got = pa.vmap(f, chunk_size=3, client=cl)(xs)
    assert_close(got, pa.vmap(f)(xs), rtol=1e-12)
    assert [p[1] for p in sent.pop()] == [[3, 3], [3, 2]]
    lazy = pa.vmap(f, chunk_size=3, client=pa.distributed(client, output="dask"))(xs)
    assert [p[1] for p in sent.pop()] == [[3], [3], [3], [2]]
    assert_close(np.asarray(lazy.compute()), pa.vmap(f)(xs), rtol=1e-12)
