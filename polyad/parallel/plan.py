"""Chunked evaluation, shared by vmap and the Jacobians: ``chunk_size="auto"`` (the chunk sized from a
memory budget by abstract evaluation of the function), the joining of chunk results into one
preallocated result, and progress bars (tqdm, an optional extra).

The memory model of a chunk of ``k`` rows (basis rows of a Jacobian, examples of a vmap) is
``fixed + k * per_row``: ``fixed`` is what does not grow with ``k`` (the result, preallocated, and for
jacrev the recorded forward pass), ``per_row`` what one more row adds (its basis row and result row, and
a batched copy of every intermediate value the function computes: an upper bound, since values are freed
as the computation goes). The intermediates are measured by running the function once on abstract
arrays (``eval_shape``'s interpreter), which computes no data.
"""

from typing import NamedTuple

import optree

import polyad.config as config
import polyad.control.schedules as schedules
import polyad.core.dispatch as dispatch
from polyad.core import Tensor, new_level
from polyad.core.avals import ShapeDtype, bottom, itemsize, nbytes
from polyad.ops.manipulation import concat
from polyad.transforms.abstract import AbstractInterpreter, AbstractTensor


def parse_bytes(value, what):
    """A memory size in bytes from an int or a string such as ``"512MiB"``, ``"2 GB"``, ``"1e9"``
    (``schedules.parse_memory``, the one parser), the error naming ``what``."""
    try:
        return schedules.parse_memory(value)
    except ValueError as e:
        raise ValueError(f"{what}: {e}") from None


def format_bytes(n):
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


class ChunkPlan(NamedTuple):
    """How a chunked transform splits its work, as ``transformed.chunk_plan(*args)`` reports it.

    ``chunk_size``: rows per chunk; ``n_chunks``; ``rows``: basis rows (Jacobians) or examples (vmap);
    ``bytes_per_row`` and ``fixed_bytes``: the memory estimate ``fixed + chunk_size * per_row`` (see
    ``polyad.parallel.plan``); ``max_memory``: the budget in bytes with ``chunk_size="auto"``, else None.
    With a Dask client the estimate is that of one task on a worker.
    """

    chunk_size: int
    n_chunks: int
    rows: int
    bytes_per_row: int
    fixed_bytes: int
    max_memory: int | None

    @property
    def estimated_bytes(self) -> int:
        return self.fixed_bytes + self.chunk_size * self.bytes_per_row


def check_chunk_options(chunk_size, max_memory, transform):
    """``chunk_size`` is None, a positive int or "auto"; ``max_memory`` (which implies "auto") goes with
    None or "auto" only. Returns the chunk size to use ("auto" when max_memory is given)."""
    if chunk_size == "auto" or chunk_size is None:
        pass
    elif not isinstance(chunk_size, int) or isinstance(chunk_size, bool) or chunk_size <= 0:
        raise ValueError(
            f"{transform}(chunk_size={chunk_size!r}): chunk_size must be None, a positive int or 'auto'"
        )
    if max_memory is None:
        return chunk_size
    parse_bytes(max_memory, f"{transform}(max_memory={max_memory!r})")
    if chunk_size not in (None, "auto"):
        raise ValueError(
            f"{transform}(chunk_size={chunk_size!r}, max_memory={max_memory!r}): max_memory sizes the "
            "chunks of chunk_size='auto'; give one or the other"
        )
    return "auto"


def plan(chunk_size, rows, per_row, fixed, max_memory, what, split=1):
    """The ChunkPlan for ``rows`` rows: ``chunk_size`` None (one chunk, or ``split`` equal chunks: one per
    Dask worker thread), an int (rows per chunk, as given: what one vmap holds), or "auto" (the
    largest chunk whose estimate fits ``max_memory``, None meaning ``polyad.config.max_memory``; on a
    cluster, ``split`` > 1, the count of chunks then rounded up to a multiple of ``split`` and the rows
    shared equally, so that every worker thread gets as many equal tasks and none waits on a last short
    one).

    Why no more tasks than that on a cluster: a task costs about 1 ms of the worker's time beyond its
    chunk and a call 15-40 ms (sending, scheduling, fetching the results; LocalCluster on 2 cores,
    ``scripts/bench_distributed.py``), so fewer, larger tasks are faster as long as the threads share
    them equally."""
    budget = None
    if chunk_size == "auto":
        source = "max_memory" if max_memory is not None else "polyad.config.max_memory"
        budget = parse_bytes(config.max_memory if max_memory is None else max_memory, f"{what}: {source}")
        room = budget - fixed
        if room < per_row:
            raise MemoryError(
                f"{what} with chunk_size='auto': one row needs about {format_bytes(fixed + per_row)} "
                f"({format_bytes(fixed)} whatever the chunk size, then {format_bytes(per_row)} per row), "
                f"more than {source}={format_bytes(budget)}; raise it, or give an int chunk_size"
            )
        size = min(rows, room // max(per_row, 1))
        if split > 1 and rows and size > 0:
            tasks = -(-rows // size)  # the fewest chunks that fit
            tasks = -(-tasks // split) * split
            size = -(-rows // tasks)
    elif chunk_size is None:
        size = -(-rows // max(split, 1))
    else:
        size = min(chunk_size, rows)
    size = max(size, 1)
    return ChunkPlan(size, -(-rows // size) if rows else 0, rows, per_row, fixed, budget)


class _Measuring(AbstractInterpreter):
    """eval_shape's interpreter, adding up the bytes of every value an op computes."""

    def __init__(self, level, backend):
        super().__init__(level, backend)
        self.bytes = 0

    def process(self, op, args, params):
        out = super().process(op, args, params)
        self.bytes += nbytes(out if isinstance(out, tuple) else (out,), self.backend.xp)
        return out


def abstract(x):
    """``x`` (an array, a transform's tensor or a ShapeDtype) as a ShapeDtype; other values as they are."""
    if isinstance(x, ShapeDtype):
        return x
    if isinstance(x, Tensor) or dispatch.backend_of_array(x) is not None:
        return ShapeDtype.of(x)
    return x


def measure(func, args, what):
    """Run ``func(*args)`` on abstract arrays: ``(output, intermediate_bytes, xp)``, the output's leaves as
    ShapeDtypes, the bytes of every value computed on the way, and the backend namespace.

    Raises a ValueError naming ``what`` when ``func`` cannot run without data (a Python branch on a
    value, an op with no abstract rule).
    """
    flat, tree = optree.tree_flatten(args, none_is_leaf=False)
    avals = [abstract(x) for x in flat]
    backend = dispatch.backend_of([bottom(x) for x in flat if not isinstance(x, ShapeDtype)])
    try:
        with new_level(_Measuring, backend) as interp:
            ins = [AbstractTensor(a, interp) if isinstance(a, ShapeDtype) else a for a in avals]
            out = func(*optree.tree_unflatten(tree, ins))
            out = optree.tree_map(lambda o: abstract(o._value if isinstance(o, AbstractTensor) else o), out)
    except Exception as exc:
        raise ValueError(
            f"{what}: chunk_size='auto' sizes chunks by running the function on shapes alone, and that "
            f"failed ({type(exc).__name__}: {exc}); give an int chunk_size"
        ) from exc
    return out, interp.bytes, backend.xp


class Joined:
    """The rows of a chunked computation joined leaf by leaf: raw arrays are copied into a result
    allocated at the first chunk (peak memory: the result plus one chunk); transform tensors (the
    computation runs inside another transform) are concatenated at the end.

    ``axes(first_leaves)`` gives each leaf's row axis (None: a leaf without rows, taken from the first
    chunk).
    """

    def __init__(self, total, axes):
        self.total, self.axes_of = total, axes
        self.axes = self.buffers = None
        self.pieces = []

    @staticmethod
    def _at(axis, start, stop):
        return (slice(None),) * axis + (slice(start, stop), ...)

    def add(self, start, stop, leaves):
        """Rows ``start:stop`` (positions in the result) of every leaf."""
        if self.axes is None:
            self.axes = self.axes_of(leaves)
            if stop - start < self.total and not any(isinstance(p, Tensor) for p in leaves):
                self.buffers = [self._empty(p, a) for p, a in zip(leaves, self.axes)]
        if self.buffers is not None and any(isinstance(p, Tensor) for p in leaves):
            # a chunk of tensors after raw ones: what is filled so far becomes the first piece
            self.pieces = [
                [b if a is None else b[self._at(a, 0, start)] for b, a in zip(self.buffers, self.axes)]
            ]
            self.buffers = None
        if self.buffers is None:
            self.pieces.append(leaves)
            return
        for b, p, a in zip(self.buffers, leaves, self.axes):
            if a is not None:
                b[self._at(a, start, stop)] = p

    def _empty(self, piece, axis):
        if axis is None or piece is None:
            return piece
        shape = list(piece.shape)
        shape[axis] = self.total
        xp = dispatch.backend_of_array(piece).xp
        return xp.empty(tuple(shape), dtype=piece.dtype, device=piece.device)

    def result(self):
        if self.buffers is not None:
            return self.buffers
        first = self.pieces[0]
        if len(self.pieces) == 1:  # one chunk: it is the result
            return first
        return [
            p if a is None or p is None else concat([c[k] for c in self.pieces], axis=a)
            for k, (p, a) in enumerate(zip(first, self.axes))
        ]


class _NoBar:
    def update(self, n):
        pass

    def close(self):
        pass


def progress_bar(enabled, total, desc, unit):
    """A tqdm bar over ``total`` rows when ``enabled`` (tqdm.auto: a widget in notebooks), else a no-op."""
    if not enabled:
        return _NoBar()
    try:
        from tqdm.auto import tqdm
    except ImportError:
        raise ImportError(
            f"{desc}: progress=True shows a tqdm progress bar, and tqdm is not installed: "
            "pip install 'polyad[progress]' (or pip install tqdm)"
        ) from None
    return tqdm(total=total, desc=desc, unit=unit)


__all__ = [
    "ChunkPlan",
    "Joined",
    "abstract",
    "check_chunk_options",
    "format_bytes",
    "itemsize",
    "measure",
    "nbytes",
    "parse_bytes",
    "plan",
    "progress_bar",
]
