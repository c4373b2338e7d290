"""Chunks of vmap and of the Jacobians run as tasks on a Dask cluster (``distributed``, an optional extra:
``pip install 'polyad[distributed]'``; imported only when a client is used).

The driver pickles the function and the fixed arguments (cloudpickle, as Dask does: closures and
lambdas travel; an unpicklable function is an error here, before anything is sent; arrays as NumPy
arrays, their bytes out of band) and sends them to the cluster once: one copy in the cluster's memory,
which each worker fetches and unpickles the first time one of its tasks needs it, then keeps (the last
``KEEP``). A later call whose payload is the same (the same pickle stream and array bytes, compared with
the copy the driver kept) sends nothing again. The call's own arguments are a separate, smaller part that
travels inside the tasks (a payload of its own when large), so that a call at a new point does not send
the function's closed-over arrays again. The tasks name the payload but do not depend on it in
Dask's graph: a dependency would draw every task to the worker holding the copy (Dask's active memory
manager drops extra copies within seconds). A task turns the NumPy arrays into arrays of its worker's
default polyad backend (numpy, or cupy on a GPU worker: ``POLYAD_BACKEND`` in the worker's environment
or ``client.run(pa.set_backend, "cupy")``), runs the chunk with polyad there (with glibc's malloc
thresholds as they are outside Dask, ``_Malloc``) and hands NumPy arrays back. The driver then assembles
them in the library and on the device of the inputs (``output="array"``, the default), or returns a lazy
Dask array whose blocks are the tasks (``output="dask"``).

Failures: an exception raised by the function in a task is raised again on the driver as it is (the
error the function gives); a task whose worker dies is retried elsewhere by Dask, and when Dask gives up
(``distributed.scheduler.allowed-failures``) or the wait passes ``timeout``, a ``DistributedError``
names the transform, the chunk and the cause, and the remaining tasks are cancelled.
"""

import collections
import ctypes
import hashlib
import io
import os
import pickle
import sys
import threading
import time
import types
import uuid
import weakref
from typing import Any

import optree

import polyad.core.dispatch as dispatch
from polyad.backends.host import np
from polyad.core import Tensor, current_level
from polyad.core.avals import dtype_name
from polyad.graph.predispatch import rebuild_recipe

OUTPUTS = ("array", "dask")
_ACTIVE = threading.local()  # the stack of `with pa.distributed(...)` blocks of each thread


class DistributedError(RuntimeError):
    """A chunk sent to a Dask cluster failed for a reason of the cluster's: its worker died (Dask's
    ``KilledWorker``), the result did not come within ``timeout``, or the computation was cancelled."""


def _require(what):
    try:
        import dask  # noqa: F401
        import distributed
    except ImportError:
        raise ImportError(
            f"{what}: running on a Dask cluster needs dask and distributed: pip install 'polyad[distributed]'"
        ) from None
    return distributed


class Distributed:
    """Where and how a transform's chunks run on a Dask cluster; made by ``pa.distributed``. Use it as
    the ``client=`` argument of a transform, or as a context manager for every transform in the block."""

    __slots__ = ("client", "output", "timeout")

    def __init__(self, client: Any, output: str = "array", timeout: float | None = None) -> None:
        if not isinstance(output, str) or output not in OUTPUTS:
            raise ValueError(f"pa.distributed(output={output!r}): output must be 'array' or 'dask'")
        if timeout is not None and (
            not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0
        ):
            raise ValueError(
                f"pa.distributed(timeout={timeout!r}): timeout must be None or a positive number of seconds"
            )
        distributed = _require("pa.distributed(client)")
        if not isinstance(client, distributed.Client):
            raise TypeError(
                f"pa.distributed(client): client must be a distributed.Client, got {type(client).__name__}"
            )
        self.client, self.output, self.timeout = client, output, timeout

    @property
    def lazy(self):
        """Whether a call returns a lazy Dask array of the tasks (``output="dask"``), not arrays."""
        return self.output == "dask"

    def __enter__(self):
        _stack().append(self)
        return self

    def __exit__(self, *exc):
        stack = _stack()
        if self in stack:
            del stack[len(stack) - 1 - stack[::-1].index(self)]

    def __repr__(self):
        return f"pa.distributed({self.client!r}, output={self.output!r}, timeout={self.timeout!r})"


def _stack():
    stack = getattr(_ACTIVE, "stack", None)
    if stack is None:
        stack = _ACTIVE.stack = []
    return stack


def distributed(client: Any, *, output: str = "array", timeout: float | None = None) -> "Distributed":
    """Run the chunks of ``vmap``, ``jacrev``, ``jacfwd`` and ``hessian`` on a Dask cluster.

    Pass the result as a transform's ``client=`` (a plain ``distributed.Client`` there means the
    defaults), or use it as a context manager: every such transform called in the block, in this thread,
    runs there (except calls inside another transform, which run where that transform runs). The
    function must be picklable by cloudpickle (closures and lambdas are; a lock, an open file or a
    generator is not: a TypeError names it). Each worker computes with its own default polyad backend.

    Args:
        client: a ``distributed.Client``; Dask's scheduler decides which worker runs which chunk.
        output: ``"array"``: the call waits and returns arrays of the inputs' library and device, like the
            local transform. ``"dask"``: the call returns at once with lazy Dask arrays of NumPy blocks
            (one block per chunk); ``.compute()`` runs them on the default client (the last one made,
            as in Dask), ``client.compute(result)`` on this one. With ``has_aux`` the aux output is then
            a ``dask.delayed`` value.
        timeout: seconds to wait for an ``"array"`` result before a ``DistributedError`` (None: no limit).

    Returns:
        A ``Distributed`` setting (a context manager).

    Example:
        >>> import numpy as np, polyad as pa
        >>> from distributed import Client
        >>> with Client(processes=False, n_workers=1, dashboard_address=None) as client:
        ...     jac = pa.jacfwd(lambda x: pa.xp.sin(x), chunk_size=2, client=client)
        ...     J = jac(np.zeros(3))
        >>> J
        array([[1., 0., 0.],
               [0., 1., 0.],
               [0., 0., 1.]])
    """
    return Distributed(client, output, timeout)


def check_client(client, transform):
    """A transform's ``client=`` argument: None, a ``distributed.Client`` or ``pa.distributed(...)``."""
    if client is None or isinstance(client, Distributed):
        return client
    distributed = _require(f"{transform}(client=...)")
    if not isinstance(client, distributed.Client):
        raise TypeError(
            f"{transform}(client={client!r}): client must be a distributed.Client or pa.distributed(...), "
            f"got {type(client).__name__}"
        )
    return Distributed(client)


def resolve(client, arrays, what):
    """The Distributed setting of a call: the transform's own ``client``, else the innermost
    ``with pa.distributed(...)`` block's; None to run locally. A call inside another transform (a level is
    active, or ``arrays`` hold its tensors) cannot ship its work, whose derivatives or batches belong to
    that transform: an error with its own client, local with the block's."""
    inside = current_level() > 0 or any(isinstance(x, Tensor) for x in arrays)
    if client is not None:
        if inside:
            raise ValueError(
                f"{what} with client=...: it is called inside another transform, whose derivatives or "
                "batches cannot follow the work to Dask workers; give client= to the outermost transform"
            )
        return client
    stack = _stack()
    return stack[-1] if stack and not inside else None


def check_randomness(randomness, what):
    if randomness != "error":
        raise ValueError(
            f"{what} with client=...: randomness={randomness!r} cannot hold across Dask workers (each "
            "process has its own generators); draw the random values before the call and pass them in"
        )


_THREADS = weakref.WeakKeyDictionary()  # client -> (when asked, worker threads)
THREADS_FRESH = 2.0  # seconds a count of worker threads is used without asking the scheduler again


def n_threads(setting):
    """Worker threads in the cluster (at least 1): the default number of chunks. The count is the
    scheduler's of the last ``THREADS_FRESH`` seconds: asking costs a round trip (~1.3 ms) that a call
    would pay before its tasks go out, and a stale count only changes how the rows are split."""
    now = time.monotonic()
    asked = _THREADS.get(setting.client)
    if asked is None or now - asked[0] > THREADS_FRESH:
        asked = _THREADS[setting.client] = (now, max(1, sum(setting.client.nthreads().values())))
    return asked[1]


def runs(ranges, setting):
    """The chunks ``ranges`` (consecutive ``(start, stop)`` pairs) dealt out in contiguous runs, one per
    worker thread (as equal as whole chunks allow): the tasks of an array result. A task costs the call
    a few ms of Dask's messages and scheduling (and a jacrev task a forward pass): one task per thread
    pays that once per thread, not once per chunk (n = 1024, 8 chunks, 2 workers: jacfwd 192-211 ms in 8
    tasks, 176-194 ms in 2; ``scripts/bench_distributed.py``); each task still runs its chunks one at a
    time, so a chunk's memory is what the caller's chunk size says."""
    n = min(len(ranges), n_threads(setting))
    cuts = [len(ranges) * k // n for k in range(n + 1)]
    return [ranges[cuts[k] : cuts[k + 1]] for k in range(n)]


# ------------------------------------------------------------------------------ arrays across processes


def to_host(tree, copy=False):
    """Every backend array of ``tree`` as a NumPy array (what travels between processes); with ``copy``,
    arrays of their own (a lazy result's inputs: the caller may change its arrays before it computes)."""

    def conv(x):
        b = dispatch.backend_of_array(x)
        if b is None:
            return x
        return np.array(b.to_numpy(x), copy=True) if copy else b.to_numpy(x)

    return optree.tree_map(conv, tree, none_is_leaf=True)


def to_backend(tree, backend=None, device=None):
    """Every array of ``tree`` as an array of ``backend`` (default: this process's default backend)."""
    backend = backend or dispatch.default_backend()

    def conv(x):
        b = dispatch.backend_of_array(x)
        if b is None or (b is backend and device is None):
            return x
        return backend.xp.asarray(x) if device is None else backend.xp.asarray(x, device=device)

    return optree.tree_map(conv, tree, none_is_leaf=True)


def _rebuild(transform, func, targs, tkwargs):
    return transform(func, *targs, **tkwargs)


def _pickle(shared, what):
    """``shared`` pickled by cloudpickle: ``(stream, buffers)``, the arrays' data left out of the stream as
    buffers (pickle protocol 5), uncopied views of the arrays."""
    import cloudpickle

    class Pickler(cloudpickle.Pickler):
        # a polyad-transformed function (pa.grad(f), ...) closes over polyad's thread-local state: it
        # travels as its recipe, the public transform (by reference) applied to func again there
        def reducer_override(self, obj):
            recipe = rebuild_recipe(obj) if isinstance(obj, types.FunctionType) else None
            if recipe is not None:
                return _rebuild, recipe
            return super().reducer_override(obj)

    buffer, buffers = io.BytesIO(), []
    try:
        Pickler(buffer, protocol=5, buffer_callback=buffers.append).dump(shared)
        return buffer.getvalue(), [b.raw() for b in buffers]
    except Exception as exc:
        raise TypeError(
            f"{what} with client=...: the function or its arguments cannot be pickled to send to the Dask "
            f"workers ({type(exc).__name__}: {exc}); close over picklable values only (arrays, numbers, "
            "functions), or create the unpicklable object inside the function"
        ) from exc


def _digest(stream, buffers):
    """SHA-1 of a payload's pickle stream and its arrays' bytes."""
    h = hashlib.sha1(stream, usedforsecurity=False)
    for b in buffers:
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.digest()


def _same_bytes(a, b):
    """Whether two buffers hold the same bytes (NumPy's comparison of 8-byte words: 3.5 ms for 48 MiB,
    against 27-45 ms for SHA-1)."""
    a, b = memoryview(a).cast("B"), memoryview(b).cast("B")
    if a.nbytes != b.nbytes:
        return False
    n = a.nbytes - a.nbytes % 8
    words = [np.frombuffer(m[:n], dtype=np.uint64) for m in (a, b)]
    return bool(np.array_equal(*words)) and a[n:] == b[n:]


class _Payload:
    """What every chunk of a call shares (the function, the fixed arguments), pickled, as sent to the
    workers: the pickle stream and the arrays' bytes beside it (Dask sends those without copying them
    into one message). Owns its bytes: the caller's arrays may change after it is made."""

    __slots__ = ("stream", "buffers")

    def __init__(self, stream, buffers):
        self.stream, self.buffers = stream, buffers

    @classmethod
    def copied(cls, stream, buffers):
        """A payload of its own copies of ``buffers`` (the caller's arrays may change afterwards)."""
        return cls(stream, [bytes(b) for b in buffers])

    def __reduce_ex__(self, protocol):
        buffers = [pickle.PickleBuffer(b) for b in self.buffers] if protocol >= 5 else self.buffers
        return _Payload, (self.stream, buffers)

    def load(self):
        import cloudpickle  # noqa: F401 (what the stream refers to)

        # writable copies: the function may write into the arrays it closes over, as it can at home
        return pickle.loads(self.stream, buffers=[bytearray(b) for b in self.buffers])


class _Sent:
    """A payload sent to the cluster of a client: ``future`` (its one copy in the cluster's memory),
    ``token`` (its name in the workers' caches of unpickled payloads) and what it holds, to recognise it:
    the pickle stream, and a copy of the arrays' bytes or, for payloads over ``COMPARE_MAX``, their
    SHA-1."""

    __slots__ = ("copies", "count", "digest", "future", "stream", "token")

    def same(self, stream, buffers):
        if stream != self.stream or len(buffers) != self.count:
            return False
        if self.copies is not None:
            return all(_same_bytes(c, b) for c, b in zip(self.copies, buffers))
        return _digest(stream, buffers) == self.digest


class _Ref:
    """The key of a payload in the cluster's memory, as a task's argument: not a Dask dependency (the
    scheduler would draw every task to the one worker that holds it), fetched by the worker itself when
    its cache lacks it. Holds the Future here, so that a lazy result's graph keeps the payload alive; only
    the key and the timeout travel."""

    __slots__ = ("future", "key", "timeout")

    def __init__(self, key, timeout, future=None):
        self.key, self.timeout, self.future = key, timeout, future

    def __reduce__(self):
        return _Ref, (self.key, self.timeout)


class _Tasks(list):
    """The futures of one call's tasks, holding the payloads' futures until the results are in (a later
    call may drop them from the client's cache meanwhile)."""

    payloads = ()


_SENT = weakref.WeakKeyDictionary()  # client -> [_Sent]: payloads in its cluster, the last used last
_SENT_LOCK = threading.Lock()
KEEP = 3  # payloads kept in a cluster (the last used: a function's, and a call's large arguments)
INLINE_MAX = 2**20  # bytes of a call's arguments sent inside each task; larger ones are a payload
COMPARE_MAX = 256 * 2**20  # bytes of arrays up to which the caller keeps a copy to compare, not a hash


def _send(client, what, shared, timeout):
    """``(token, future)`` of ``shared`` in the memory of ``client``'s cluster: one copy, from which each
    worker fetches it when a task first needs it there (``_shared``). Sent once: a later call whose
    ``shared`` pickles to the same stream and the same array bytes (compared with the copy kept here, or
    by SHA-1 for large ones) reuses it and the workers' unpickled copies; sent again, under the same
    token, if its copy was lost (its worker died)."""
    return _send_pickled(client, *_pickle(shared, what), timeout)


def _send_pickled(client, stream, buffers, timeout):
    entry = None
    with _SENT_LOCK:
        sent = _SENT.setdefault(client, [])
        for e in reversed(sent):
            if e.same(stream, buffers):
                entry = e
                sent.remove(e)
                sent.append(e)
                if e.future.status == "finished":
                    return e.token, e.future
                break
    if entry is None:
        entry = _Sent()
        entry.stream, entry.count, entry.token = stream, len(buffers), uuid.uuid4().hex
        copies = [bytes(b) for b in buffers]  # the caller's arrays may change once this call returns
        small = sum(len(c) for c in copies) <= COMPARE_MAX
        entry.copies, entry.digest = (copies, None) if small else (None, _digest(stream, copies))
    else:
        copies = entry.copies or [bytes(b) for b in buffers]
    entry.future = client.scatter(_Payload(stream, copies), hash=False, timeout=timeout)
    with _SENT_LOCK:
        if entry not in sent:
            sent.append(entry)
        del sent[:-KEEP]
    return entry.token, entry.future


class _Loaded:
    __slots__ = ("lock", "value")

    def __init__(self):
        self.lock, self.value = threading.Lock(), None


_LOADED = collections.OrderedDict()  # on a worker: payload token -> _Loaded (the last KEEP used)
_LOADED_LOCK = threading.Lock()


def _shared(token, ref):
    """On a worker: the payload ``token`` unpickled, from the worker's cache, else fetched (from this
    worker's memory, or through its client from the worker that holds it) and unpickled, once per worker
    process whatever its threads."""
    with _LOADED_LOCK:
        loaded = _LOADED.get(token)
        if loaded is None:
            loaded = _LOADED[token] = _Loaded()
        _LOADED.move_to_end(token)
        while len(_LOADED) > KEEP:
            _LOADED.popitem(last=False)
    with loaded.lock:
        if loaded.value is None:
            loaded.value = _fetch(ref).load()
        return loaded.value


def _fetch(ref):
    import distributed

    try:
        worker = distributed.get_worker()
    except ValueError:  # not in a worker (dask.compute with another scheduler)
        worker = None
    if worker is not None and ref.key in worker.data:
        return worker.data[ref.key]
    try:
        # "memory": the key is in the cluster's memory (scattered), so result() fetches it from its worker
        future = distributed.Future(ref.key, distributed.get_client(), state="memory")
        try:
            return future.result(timeout=ref.timeout)
        finally:
            future.release()
    except Exception as exc:
        raise DistributedError(
            "the function and fixed arguments sent to the Dask cluster could not be fetched by a worker "
            f"({type(exc).__name__}: {exc}); their copy was lost (its worker died?): call again"
        ) from exc


def _run_task(task, token, ref, arguments, *part):
    """On a worker: what every chunk shares, unpickled once per worker (the worker's later tasks with the
    same payload reuse it, across calls), the call's arguments (in the task, or a payload of their own),
    then the chunk, with glibc's malloc tuned as it is at home."""
    shared = _shared(token, ref)
    arguments = arguments.load() if isinstance(arguments, _Payload) else _shared(*arguments)
    with _malloc_as_default():
        return task(shared, arguments, *part)


class _Malloc:
    """While polyad tasks run on a worker, glibc's malloc keeps freed memory for reuse as it does by
    default; once they stop, it gives memory back as Dask set it up.

    Dask's nanny starts workers with ``MALLOC_TRIM_THRESHOLD_=65536`` (to give memory back to the OS
    sooner). Setting a threshold turns off glibc's dynamic mmap threshold: every array over 128 KiB is
    then a fresh ``mmap`` whose pages fault in on first write, unmapped again when freed. A chunk
    allocates and frees many such temporaries: 26,000 page faults (100 MiB of zeroed pages) and 15-20%
    more CPU time for jacfwd of a 1024 x 1024 tanh network in 8 chunks. While polyad tasks run, the
    thresholds are glibc's dynamic maximum (arrays under 32 MiB reuse heap memory); ``RELEASE`` seconds
    after the last one ends (not between the tasks of a call) they are set back from the environment and
    ``malloc_trim(0)`` returns the free memory (under 1 ms). Nothing changes where the environment sets
    no threshold (glibc's dynamic thresholds are in effect) or off glibc."""

    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
    MMAP_MAX = 32 * 2**20  # glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit systems
    RELEASE = 0.5

    def __init__(self):
        self.cond, self.running, self.tuned, self.last, self.libc = threading.Condition(), 0, False, 0.0, None
        trim, mmap = (os.environ.get(f"MALLOC_{k}_THRESHOLD_") for k in ("TRIM", "MMAP"))
        if (trim is None and mmap is None) or not sys.platform.startswith("linux"):
            return
        try:
            self.home = (int(trim) if trim else 128 * 2**10, int(mmap) if mmap else 128 * 2**10)
            libc = ctypes.CDLL("libc.so.6")
            for name in ("mallopt", "malloc_trim", "gnu_get_libc_version"):  # glibc's
                getattr(libc, name)
        except (OSError, AttributeError, ValueError):
            return
        self.libc = libc
        threading.Thread(target=self._release_when_idle, name="polyad-malloc", daemon=True).start()

    def __enter__(self):
        if self.libc is not None:
            with self.cond:
                self.running += 1
                if not self.tuned:
                    self.libc.mallopt(self.M_MMAP_THRESHOLD, self.MMAP_MAX)
                    self.libc.mallopt(self.M_TRIM_THRESHOLD, 2 * self.MMAP_MAX)
                    self.tuned = True
        return self

    def __exit__(self, *exc):
        if self.libc is not None:
            with self.cond:
                self.running -= 1
                self.last = time.monotonic()
                self.cond.notify()

    def _release_when_idle(self):
        with self.cond:
            while True:
                if not self.tuned or self.running:
                    self.cond.wait()
                    continue
                left = self.last + self.RELEASE - time.monotonic()
                if left > 0:
                    self.cond.wait(left)
                    continue
                self.libc.mallopt(self.M_TRIM_THRESHOLD, self.home[0])
                self.libc.mallopt(self.M_MMAP_THRESHOLD, self.home[1])
                self.libc.malloc_trim(0)
                self.tuned = False


_MALLOC = []


def _malloc_as_default():
    with _LOADED_LOCK:
        if not _MALLOC:
            _MALLOC.append(_Malloc())
    return _MALLOC[0]


def submit(setting, what, task, shared, arguments, parts):
    """One Dask task per entry of ``parts``: ``task(shared, arguments, *part)`` on a worker (``task`` a
    module-level function, so that it travels by reference). ``shared`` (the function and what else stays
    the same from call to call) is pickled and sent to the cluster once (``_send``); each worker fetches
    and unpickles it once. ``arguments`` (the call's own) travel inside each task, a copy of their bytes
    (the caller may change them before a lazy result computes), or, over ``INLINE_MAX`` bytes, as a
    payload of their own: a call at a new point does not send the function's closed-over arrays again.
    Returns the tasks: Dask futures, submitted now, for ``output="array"`` (no graph to build and
    optimise), ``dask.delayed`` values for ``output="dask"``."""
    token, future = _send(setting.client, what, shared, setting.timeout)
    ref = _Ref(future.key, setting.timeout, future)
    futures = [future]
    stream, buffers = _pickle(arguments, what)
    if len(stream) + sum(len(b) for b in buffers) <= INLINE_MAX:
        arguments = _Payload.copied(stream, buffers)
    else:
        a_token, a_future = _send_pickled(setting.client, stream, buffers, setting.timeout)
        arguments = (a_token, _Ref(a_future.key, setting.timeout, a_future))
        futures.append(a_future)
    keys = [f"polyad-{what.split('(', 1)[0]}-{uuid.uuid4().hex[:12]}-{i}" for i in range(len(parts))]
    if setting.output == "array":
        n = len(parts)
        tasks = _Tasks(
            setting.client.map(
                _run_task,
                [task] * n,
                [token] * n,
                [ref] * n,
                [arguments] * n,
                *zip(*parts),
                key=keys,
                pure=False,
            )
        )
        tasks.payloads = futures
        return tasks
    import dask

    run = dask.delayed(_run_task, pure=False)
    return [run(task, token, ref, arguments, *part, dask_key_name=k) for k, part in zip(keys, parts)]


def gather(setting, what, tasks, labels, progress, on_result=None):
    """The results of ``tasks`` (from ``submit``), in order, each fetched as soon as its task ends and
    handed to ``on_result(i, result)`` then (the driver joins a result while other tasks still run: on a
    machine with as many cores as workers, the core of a finished worker is free for it).
    ``labels[i]`` names task i in errors ("rows 0:64"). Fails fast: the first failure cancels the rest."""
    distributed = _require(what)
    from distributed.scheduler import KilledWorker

    client = setting.client
    futures = [t if isinstance(t, distributed.Future) else None for t in tasks]
    if None in futures:
        futures = client.compute(tasks)
    index = {f.key: i for i, f in enumerate(futures)}
    results = [None] * len(futures)
    done, bar = False, None
    try:
        if progress:
            bar = _show_progress(distributed, futures)
        try:
            completed = distributed.as_completed(
                futures, timeout=setting.timeout, with_results=True, raise_errors=False
            )
            for fut, result in completed:
                if fut.status == "error":
                    fut.result()  # the task's own exception, raised here as the function raised it
                elif fut.status == "cancelled":
                    raise DistributedError(
                        f"{what}: the Dask task for {labels[index[fut.key]]} was cancelled (the client "
                        "closed, or the cluster restarted) before it finished"
                    )
                results[index[fut.key]] = result
                if on_result is not None:
                    on_result(index[fut.key], result)
        except KilledWorker as exc:
            worker = getattr(exc.last_worker, "address", exc.last_worker)
            raise DistributedError(
                f"{what}: a Dask worker died while computing {labels[index.get(exc.task, 0)]}: its process "
                f"ended (a crash, a kill, or out of memory; last worker {worker}), and Dask gave up after "
                f"{exc.allowed_failures} retries on other workers (KilledWorker; "
                "distributed.scheduler.allowed-failures sets how many)"
            ) from exc
        except (TimeoutError, distributed.TimeoutError) as exc:
            pending = [labels[i] for i, f in enumerate(futures) if not f.done()]
            raise DistributedError(
                f"{what}: no result from the Dask cluster within timeout={setting.timeout} s; "
                f"{len(pending)} of {len(futures)} chunks pending ({', '.join(pending[:4])}"
                f"{', ...' if len(pending) > 4 else ''}); workers: {len(client.nthreads())}"
            ) from exc
        done = True
        if bar is not None:
            bar.join(1.0)  # let the text bar draw its end before the caller prints
        return results
    finally:
        if not done:
            client.cancel(futures)


def _show_progress(distributed, futures):
    """Dask's progress bar: a widget in a notebook; on a console its text bar, drawn from a thread
    (``distributed.progress`` blocks until the end there), so the wait keeps its timeout."""
    from distributed.utils import is_kernel

    if is_kernel():
        from IPython.display import display

        display(distributed.progress(futures, notebook=True, multi=False))
        return None
    bar = threading.Thread(
        target=distributed.progress, args=(futures,), kwargs={"notebook": False, "multi": False}, daemon=True
    )
    bar.start()
    return bar


def item(task, *path):
    """Part ``path`` of a task's result, as a dask.delayed value."""
    for p in path:
        task = task[p]
    return task


def dask_array(task, shape, dtype):
    """A lazy Dask array of one task's result (a NumPy array of ``shape`` and ``dtype``)."""
    import dask.array as da

    return da.from_delayed(task, shape=tuple(shape), dtype=dtype_name(dtype))


def dask_concat(parts, axis):
    import dask.array as da

    return parts[0] if len(parts) == 1 else da.concatenate(parts, axis=axis)


__all__ = [
    "Distributed",
    "DistributedError",
    "OUTPUTS",
    "check_client",
    "check_randomness",
    "dask_array",
    "dask_concat",
    "distributed",
    "gather",
    "item",
    "n_threads",
    "resolve",
    "submit",
    "to_backend",
    "to_host",
]
