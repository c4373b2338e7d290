"""Threads for the fused CPU loop (``fusion.py``): when a call is large enough, its elements are split into
one chunk per usable core and the compiled loop (``nogil``) runs on each chunk at once, on a small thread
pool plus the calling thread.

Whether a call is large enough is measured, not guessed:
- once per machine and day, ``calibrate()`` times a calibration loop (vectorised ``sin(x) * exp(-x)``)
  serially and in chunks at growing sizes and keeps the serial time above which the chunked run was
  faster at that size and every larger one (``threshold_s``; infinite if it never was, as on a loaded
  machine with two cores). The result is cached on disk next to the kernels
  (``$POLYAD_CACHE_DIR/fusion/threads.json``, keyed by the thread count, the CPU and Numba's version, with
  the load average it was measured under), so later processes read it until it is a day old;
  ``python -m polyad.backends.numpy.compiler.fusion_threads`` measures again and prints the figures;
- each kernel times its own serial calls (the fastest seen, per element), so a call goes parallel when
  its expected serial time, elements times that cost, reaches the threshold: a loop of one addition needs
  many more elements than the gradient of a model with ten transcendental functions.

Usable threads: ``$POLYAD_FUSION_THREADS`` if set (1 turns threads off, and calibration with them), else
the cores this process may run on (``os.sched_getaffinity``), no more than Numba's thread count
(``numba.get_num_threads()``, which ``NUMBA_NUM_THREADS`` and ``numba.set_num_threads`` lower). A call
that finds another parallel call in flight (from another thread) runs serially rather than queueing
behind it.
"""

import json
import os
import platform
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

ENV_THREADS = "POLYAD_FUSION_THREADS"
PROBE = 1 << 14  # calls from this many elements time themselves (below, threads never pay)
ALIGN = 64  # chunk boundaries are multiples of this many elements (whole cache lines and vectors)
CALIBRATION_SIZES = [1 << k for k in range(10, 23)]
CALIBRATION_TTL_S = 86400.0  # a calibration is trusted for a day (the machine's load changes)
FORCE = None  # None: measured; "serial" or "parallel": forced (benchmarks and tests)
_POOL = [None, 0]  # (executor, its worker count)
_BUSY = threading.Lock()  # held by the parallel call in flight
_STATE = {}  # "threshold_s": the calibrated serial time above which chunks win
_LOCK = threading.Lock()  # guards _STATE (calibration runs under it)
_POOL_LOCK = threading.Lock()  # guards _POOL


def _after_fork_in_child():
    """A forked child has none of the pool's threads: start a new pool when it needs one (the old one
    would queue chunks that no thread runs)."""
    global _BUSY, _POOL_LOCK
    _POOL[0], _POOL[1] = None, 0
    _BUSY, _POOL_LOCK = threading.Lock(), threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def usable_threads():
    """The number of threads a fused loop may use: ``$POLYAD_FUSION_THREADS``, else this process's cores
    (at most Numba's thread count)."""
    value = os.environ.get(ENV_THREADS)
    if value is not None:
        try:
            n = int(value)
        except ValueError:
            n = 0
        if n < 1:
            raise ValueError(
                f"${ENV_THREADS} must be a positive integer (the threads of a fused loop), got {value!r}"
            )
        return n
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return min(cores, _numba_threads())


def _numba_threads():
    """Numba's thread count: ``numba.get_num_threads()`` once its thread pool runs (the call would start
    it), else ``NUMBA_NUM_THREADS`` (its default, the cores)."""
    numba = sys.modules.get("numba")  # imported by the kernels that call this
    if numba is None:
        return os.cpu_count() or 1
    parallel = sys.modules.get("numba.np.ufunc.parallel")
    if parallel is not None and getattr(parallel, "_is_initialized", False):
        return numba.get_num_threads()
    return numba.config.NUMBA_NUM_THREADS


def _pool(workers):
    with _POOL_LOCK:
        if _POOL[0] is None or _POOL[1] != workers:
            if _POOL[0] is not None:
                _POOL[0].shutdown(wait=False)
            _POOL[0] = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="polyad-fusion")
            _POOL[1] = workers
        return _POOL[0]


def chunks(n, parts):
    """``parts`` ranges ``(start, stop)`` covering ``range(n)``, their boundaries multiples of ``ALIGN``."""
    step = -(-n // parts)
    step = -(-step // ALIGN) * ALIGN
    return [(start, min(start + step, n)) for start in range(0, n, step)]


def run_chunked(loop, n, threads):
    """``loop(start, stop)`` over ``range(n)`` in ``threads`` chunks at once; the sum of what they return."""
    parts = chunks(n, threads)
    pool = _pool(threads - 1)
    futures = [pool.submit(loop, start, stop) for start, stop in parts[1:]]
    total = loop(*parts[0])
    for future in futures:
        total += future.result()
    return total


class Runner:
    """How one kernel runs its calls: serially, or in chunks when the measured cost says it pays.
    ``cost`` is the kernel's fastest serial time per element seen so far (None until timed)."""

    __slots__ = ("cost",)

    def __init__(self):
        self.cost = None

    def __call__(self, loop, n, timeable=True):
        """``loop(start, stop)`` over ``range(n)``; returns the sum of what it returned. ``timeable``:
        whether a serial run may be timed (False while the kernel may still be compiling)."""
        threads = usable_threads() if n >= PROBE else 1
        if threads > 1 and self._parallel(n) and _BUSY.acquire(blocking=False):
            try:
                return run_chunked(loop, n, threads)
            finally:
                _BUSY.release()
        if n < PROBE or not timeable:
            return loop(0, n)
        start = time.perf_counter()
        result = loop(0, n)
        cost = (time.perf_counter() - start) / n
        if self.cost is None or cost < self.cost:
            self.cost = cost
        return result

    def _parallel(self, n):
        if FORCE is not None:
            return FORCE == "parallel"
        if self.cost is None:
            return False
        return n * self.cost >= threshold_s()


def threshold_s():
    """The serial time (seconds) from which a chunked run is faster here: calibrated once per machine."""
    value = _STATE.get("threshold_s")
    if value is None:
        with _LOCK:
            value = _STATE.get("threshold_s")
            if value is None:
                value = _STATE["threshold_s"] = _load_or_calibrate()["threshold_s"]
    return value


def _cache_path():
    root = os.environ.get("POLYAD_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "polyad")
    return os.path.join(root, "fusion", "threads.json")


def _key(threads):
    import numba

    return {"threads": threads, "cpu": _cpu_name(), "numba": numba.__version__}


def _cpu_name():
    """The CPU's model name (Linux), else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _load_or_calibrate(force=False):
    threads = usable_threads()
    key = _key(threads)
    path = _cache_path()
    try:
        with open(path) as f:
            cached = json.load(f)
        if not force and cached.get("key") == key and time.time() - cached.get("when", 0) < CALIBRATION_TTL_S:
            return cached
    except (OSError, ValueError):
        pass
    result = calibrate(threads)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(f"{path}.{os.getpid()}.tmp", "w") as f:
            json.dump(result, f, indent=1)
        os.replace(f"{path}.{os.getpid()}.tmp", path)
    except OSError:
        pass
    return result


def calibrate(threads=None, sizes=None, repeats=5):
    """Time the calibration loop serially and in ``threads`` chunks at each size (fastest of
    ``repeats``); returns ``{"key", "threshold_s", "crossover_n", "rows": [(n, serial_s, chunked_s)],
    "when", "load"}``: the serial time at the smallest size from which the chunked run was at least 5%
    faster at every size (the sizes stop after three such in a row)."""
    from polyad.backends.numpy.compiler import vecmath

    threads = usable_threads() if threads is None else threads
    rows = []
    if threads > 1:
        x = np.linspace(-3.0, 3.0, max(sizes or CALIBRATION_SIZES))
        out = np.empty_like(x)
        loop = vecmath.calibration_loop()
        loop(64, x, out)  # compile, or load from Numba's cache
        chunk = lambda a, b: loop(b - a, x[a:b], out[a:b])  # noqa: E731
        for n in sizes or CALIBRATION_SIZES:
            serial = _fastest(loop, (n, x, out), repeats)
            chunked = _fastest(run_chunked, (chunk, n, threads), repeats)
            rows.append((n, serial, chunked))
            if len(rows) >= 3 and all(c < 0.95 * s for _, s, c in rows[-3:]):
                break
    crossover = None
    for i in range(len(rows)):
        if all(c < 0.95 * s for _, s, c in rows[i:]):
            crossover = i
            break
    return {
        "key": _key(threads),
        "threshold_s": rows[crossover][1] if crossover is not None else float("inf"),
        "crossover_n": rows[crossover][0] if crossover is not None else None,
        "rows": rows,
        "when": time.time(),
        "load": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
    }


def _fastest(fn, args, repeats):
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args)
        best = min(best, time.perf_counter() - start)
    return best


def main():
    """Calibrate now (the cache is not read, and is rewritten) and print the measurement."""
    report = _load_or_calibrate(force=True)
    _STATE["threshold_s"] = report["threshold_s"]
    threads, crossover = report["key"]["threads"], report["crossover_n"]
    print(f"{threads} threads: chunks pay from {crossover} elements of the calibration loop (None: never)")
    print(f"threshold: {report['threshold_s'] * 1e6:.0f} us of serial work (load average {report['load']})")
    for n, serial, chunked in report["rows"]:
        ratio = serial / chunked
        print(f"  n={n:>8}  serial {serial * 1e6:9.1f} us  chunked {chunked * 1e6:9.1f} us  {ratio:5.2f}x")


if __name__ == "__main__":
    main()
