"""vmap: a batching level (batching.py) over the mapped inputs, or chunks of them (an int, or "auto"
from a memory budget: chunking.py), or a Python loop over the examples (``chunk_size=1``), or chunks as
tasks on a Dask cluster (cluster.py); in_dims and out_dims may be pytree prefixes."""

import functools
from collections.abc import Callable
from typing import Any

import optree

import polyad.core.dispatch as dispatch
import polyad.random as random
from polyad.api._arguments import (
    check_callable,
    check_has_aux,
    check_randomness,
    func_name,
    is_array,
    is_dim,
    reconnect_tree,
)
from polyad.core import new_level
from polyad.core import plain as _plain
from polyad.core.avals import ShapeDtype
from polyad.graph.predispatch import recorded
from polyad.ops.manipulation import broadcast_to, expand_dims, moveaxis, stack, take_index
from polyad.parallel import cluster
from polyad.parallel.plan import Joined, check_chunk_options, measure, nbytes, plan, progress_bar
from polyad.transforms.abstract import eval_abstract
from polyad.transforms.batching import BatchedTensor, BatchInterpreter, LoopLevel


def _describe_call(func, in_dims, out_dims):
    return f"vmap({func_name(func)}, in_dims={in_dims!r}, out_dims={out_dims!r})(<inputs>)"


def _dims_leaves(dims, tree, n, what, call, noun):
    """One dim (int or None) per leaf of ``tree`` from ``dims``: an int, None, or a pytree prefix."""
    if dims is None or is_dim(dims):
        return [dims] * n
    try:
        full = optree.tree_broadcast_prefix(dims, tree, none_is_leaf=True)
    except ValueError as exc:
        raise ValueError(f"{call}: {what}={dims!r} is not a pytree prefix of the {noun} ({exc})") from None
    leaves = optree.tree_leaves(full, none_is_leaf=True)
    for d in leaves:
        if d is not None and not is_dim(d):
            raise TypeError(f"{call}: every entry of {what} must be an int or None, got {d!r}")
    return leaves


def _map_inputs(flat, dims, call):
    """Check the mapped inputs; returns (normalised dims, batch size)."""
    size, first, out = None, None, []
    for i, (x, d) in enumerate(zip(flat, dims)):
        if d is None or x is None:
            out.append(None)
            continue
        if not is_array(x):
            raise ValueError(
                f"{call}: in_dim {d} maps input leaf {i}, a {type(x).__name__}, but only arrays can be "
                "mapped; give it in_dim None"
            )
        nd = len(x.shape)
        if not -nd <= d < nd:
            raise ValueError(
                f"{call}: in_dim {d} is out of range for input leaf {i} of shape {tuple(x.shape)} "
                f"(valid: {-nd} to {nd - 1})"
                if nd
                else f"{call}: input leaf {i} is 0-d: it has no dim {d} to map"
            )
        d %= nd
        if size is None:
            size, first = x.shape[d], (i, tuple(x.shape), d)
        elif x.shape[d] != size:
            raise ValueError(
                f"{call}: mapped dimensions have different sizes: input leaf {first[0]} (shape {first[1]}, "
                f"dim {first[2]}) has {size}, input leaf {i} (shape {tuple(x.shape)}, dim {d}) has "
                f"{x.shape[d]}"
            )
        out.append(d)
    if size is None:
        raise ValueError(f"{call}: no input is mapped: at least one in_dim must be an int for an array input")
    return out, size


def _move_out(out, interp, size, out_dims, call):
    """Outputs of the vmapped function with their batch dimension at ``out_dims`` (unbatched ones are
    broadcast along a new one)."""
    out = reconnect_tree(out)
    o_flat, o_tree = optree.tree_flatten(out, none_is_leaf=True)
    odims = _dims_leaves(out_dims, out, len(o_flat), "out_dims", call, "outputs")
    res = []
    for i, (o, d) in enumerate(zip(o_flat, odims)):
        if o is None:
            res.append(None)
            continue
        if not is_array(o):
            raise TypeError(
                f"{call}: func must return arrays (or pytrees of them), got a {type(o).__name__} at "
                f"output leaf {i}"
            )
        batched = isinstance(o, BatchedTensor) and o._interp is interp
        if d is None:
            if batched:
                raise ValueError(
                    f"{call}: output leaf {i} is batched (it depends on a mapped input) but its out_dim is "
                    "None; give it an int out_dim"
                )
            res.append(_plain(o))
            continue
        nd = len(o.shape) + 1
        if not -nd <= d < nd:
            raise ValueError(f"{call}: out_dim {d} is out of range for output leaf {i} of rank {nd - 1}")
        d %= nd
        if batched:
            v = o._value if o._aux == d else moveaxis(o._value, o._aux, d)
        else:
            shape = list(o.shape)
            shape.insert(d, size)
            v = broadcast_to(expand_dims(o, axis=d), tuple(shape))
        res.append(_plain(v))
    return optree.tree_unflatten(o_tree, res)


def _vmap_call(func, flat, dims, tree, size, kwargs, out_dims, randomness, call):
    with new_level(BatchInterpreter, size, randomness) as interp:
        args = [x if d is None else BatchedTensor(x, interp, d) for x, d in zip(flat, dims)]
        return _move_out(func(*optree.tree_unflatten(tree, args), **kwargs), interp, size, out_dims, call)


def _join(pieces, out_dims, call, combine):
    """Join per-chunk (or per-example) outputs leaf by leaf along their out_dims."""
    first, o_tree = optree.tree_flatten(pieces[0], none_is_leaf=True)
    cols = [optree.tree_leaves(p, none_is_leaf=True) for p in pieces]
    odims = _dims_leaves(out_dims, pieces[0], len(first), "out_dims", call, "outputs")
    res = []
    for k, (leaf, d) in enumerate(zip(first, odims)):
        if leaf is None or d is None:
            res.append(leaf)
        else:
            res.append(combine([c[k] for c in cols], d, len(leaf.shape)))
    return optree.tree_unflatten(o_tree, res)


def _vmap_loop(func, flat, dims, tree, size, kwargs, out_dims, randomness, call, bar):
    """chunk_size=1: call ``func`` on each example, unbatched, and stack (Python control flow works)."""
    snapshot = random.snapshot_states() if randomness == "same" else None
    per = []
    with new_level(LoopLevel, size, randomness):
        for i in range(size):
            if snapshot is not None and i:
                random.restore_states(snapshot)
            args = [x if d is None else take_index(x, i, axis=d) for x, d in zip(flat, dims)]
            out = reconnect_tree(func(*optree.tree_unflatten(tree, args), **kwargs))
            for j, o in enumerate(optree.tree_leaves(out, none_is_leaf=True)):
                if o is not None and not is_array(o):
                    raise TypeError(
                        f"{call}: func must return arrays (or pytrees of them), got a {type(o).__name__} at "
                        f"output leaf {j}"
                    )
            per.append(out)
            bar.update(1)
    if not per:
        raise ValueError(f"{call}: chunk_size=1 cannot infer the output of an empty batch")
    return _join(per, out_dims, call, lambda xs, d, nd: _plain(stack(xs, axis=d % (nd + 1))))


@recorded("vmap")
def vmap(
    func: Callable[..., Any],
    in_dims: Any = 0,
    out_dims: Any = 0,
    randomness: str = "error",
    *,
    chunk_size: int | str | None = None,
    max_memory: int | str | None = None,
    client: Any = None,
    progress: bool = False,
) -> Callable[..., Any]:
    """Vectorise ``func`` over a batch dimension of its inputs (torch.func.vmap's semantics).

    Args:
        func: a function of arrays written for one example; it may return a pytree of arrays.
        in_dims: the batch dimension of the positional arguments: an int (every array argument), None
            (unmapped), or a tuple with one entry per positional argument, each an int, None or a pytree
            prefix of that argument. Negative dims count from the end. Keyword arguments are never mapped.
        out_dims: where each output's batch dimension goes: an int or a pytree prefix of the output
            (None for an output that does not depend on a mapped input).
        randomness: how ``pa.random`` behaves inside: "error" (raise), "different" (independent draws per
            batch element) or "same" (one draw for the whole batch). See ``polyad.random``.
        chunk_size: run the batch in chunks of this many examples, written into a preallocated result
            (caps memory); 1 calls ``func`` once per example, unbatched, in a Python loop; "auto": the
            largest chunk whose estimated memory fits ``max_memory`` (see ``polyad.parallel.plan``;
            ``vmapped.chunk_plan(*args)`` reports the choice).
        max_memory: the memory budget of ``chunk_size="auto"`` (bytes, or a string like "512MiB";
            default ``polyad.config.max_memory``); implies "auto". With a client: per task.
        client: a ``distributed.Client`` or ``pa.distributed(client, ...)``: the chunks run as tasks on
            that Dask cluster (without ``chunk_size``: one chunk per worker thread); randomness must be
            "error" there. Default: the innermost ``with pa.distributed(...)`` block, if any.
        progress: show a progress bar over the examples (tqdm; Dask's own bar with a client).

    Returns:
        The batched function. Python control flow on a batched value (``bool``, ``int``, ``float``,
        ``item``: input validation such as ``if xp.any(x < 0): raise``) works where every example agrees,
        with their common value; where they differ it raises, naming the conversion. Arrays created inside
        ``func`` (``xp.zeros``...) may be updated in place with batched values (``x[0] = y``): the update is
        functionalised and ``x`` becomes batched.

    Example:
        >>> import numpy as np, polyad as pa
        >>> pa.vmap(lambda x, y: pa.xp.sum(x * y), in_dims=(0, None))(np.ones((3, 2)), np.arange(2.0))
        array([1., 1., 1.])
    """
    check_callable(func, "vmap")
    check_randomness(randomness, "vmap")
    chunk_size = check_chunk_options(chunk_size, max_memory, "vmap")
    check_has_aux(progress, "vmap", "progress")
    client = cluster.check_client(client, "vmap")
    if not (in_dims is None or is_dim(in_dims) or isinstance(in_dims, tuple | list)):
        raise TypeError(
            f"vmap(in_dims={in_dims!r}): in_dims must be an int, None, or a tuple with one entry per "
            "positional argument"
        )
    config = (func, in_dims, out_dims, randomness, chunk_size, max_memory, client, progress)

    @functools.wraps(func)
    def vmapped(*args, **kwargs):
        call = _Call(config, args, kwargs)
        setting = cluster.resolve(client, call.flat + optree.tree_leaves(kwargs), call.what)
        if setting is not None and call.size > 0:  # no examples: no task to send, the result is here
            return _on_cluster(call, setting)
        if chunk_size == 1:
            bar = progress_bar(progress, call.size, call.what, "example")
            try:
                return _vmap_loop(func, *call.loop_args, bar)
            finally:
                bar.close()
        chunks = call.plan(None)
        if chunks.n_chunks == 0 or (chunks.n_chunks == 1 and not progress):
            return _vmap_call(func, *call.loop_args)
        return _chunked(call, chunks)

    def chunk_plan(*args, **kwargs):
        """The ChunkPlan this vmap would use for these arguments (nothing is computed)."""
        call = _Call(config, args, kwargs)
        return call.plan(cluster.resolve(client, call.flat + optree.tree_leaves(kwargs), call.what))

    vmapped.chunk_plan = chunk_plan  # type: ignore[attr-defined]
    return vmapped


class _Call:
    """One call of a vmapped function: its inputs checked and their mapped dims and batch size found."""

    def __init__(self, config, args, kwargs):
        func, in_dims, out_dims, randomness, self.chunk_size, self.max_memory, _, self.progress = config
        self.func, self.out_dims, self.randomness, self.kwargs = func, out_dims, randomness, kwargs
        self.what = _describe_call(func, in_dims, out_dims)
        self.flat, self.tree = optree.tree_flatten(args, none_is_leaf=True)
        if isinstance(in_dims, tuple | list):
            if len(in_dims) != len(args):
                raise ValueError(
                    f"{self.what}: in_dims has {len(in_dims)} entries but func was called with {len(args)} "
                    "positional argument(s); give one in_dim per positional argument"
                )
            dims = _dims_leaves(tuple(in_dims), args, len(self.flat), "in_dims", self.what, "arguments")
        else:
            dims = [in_dims] * len(self.flat)
        self.dims, self.size = _map_inputs(self.flat, dims, self.what)

    @property
    def loop_args(self):
        return (
            self.flat,
            self.dims,
            self.tree,
            self.size,
            self.kwargs,
            self.out_dims,
            self.randomness,
            self.what,
        )

    def run(self, flat, size):
        """The vmapped function on ``flat`` (the inputs, mapped ones with ``size`` examples)."""
        return _vmap_call(
            self.func,
            flat,
            self.dims,
            self.tree,
            size,
            self.kwargs,
            self.out_dims,
            self.randomness,
            self.what,
        )

    def avals(self, size):
        """The inputs as ShapeDtypes, mapped ones with ``size`` examples (None: one example, no dim)."""
        res = []
        for x, d in zip(self.flat, self.dims):
            if d is None:
                res.append(x)
                continue
            shape = list(x.shape)
            if size is None:
                del shape[d]
            else:
                shape[d] = size
            res.append(ShapeDtype(tuple(shape), x.dtype, getattr(x, "device", None)))
        return res

    def plan(self, setting):
        """The ChunkPlan: "auto" measures ``func`` on one abstract example (a row: its intermediates,
        inputs and outputs; fixed: the preallocated result, or nothing per task on a cluster)."""
        per_row = fixed = 0
        if self.chunk_size == "auto":
            one = optree.tree_unflatten(self.tree, self.avals(None))
            out, inter, xp = measure(lambda *a: self.func(*a, **self.kwargs), one, self.what)
            mapped = [a for a, d in zip(self.avals(None), self.dims) if d is not None]
            out_bytes = nbytes([o for o in optree.tree_leaves(out) if isinstance(o, ShapeDtype)], xp)
            per_row = inter + nbytes(mapped, xp) + out_bytes
            fixed = 0 if setting else self.size * out_bytes
        split = cluster.n_threads(setting) if setting is not None else 1
        return plan(self.chunk_size, self.size, per_row, fixed, self.max_memory, self.what, split)

    def chunk(self, start, stop):
        return [x if d is None else _slice_along(x, d, start, stop) for x, d in zip(self.flat, self.dims)]

    def out_axes(self, first_tree):
        """Each output leaf's batch axis (None: unbatched, kept from the first chunk)."""
        leaves = optree.tree_leaves(first_tree, none_is_leaf=True)
        odims = _dims_leaves(self.out_dims, first_tree, len(leaves), "out_dims", self.what, "outputs")
        return [None if d is None or o is None else d % len(o.shape) for o, d in zip(leaves, odims)]


def _chunked(call, chunks):
    """The batch in chunks, joined into a preallocated result; with randomness="same" every chunk sees
    the same draws (torch.func does the same)."""
    snapshot = random.snapshot_states() if call.randomness == "same" else None
    joined, tree = None, None
    bar = progress_bar(call.progress, call.size, call.what, "example")
    try:
        for start in range(0, call.size, chunks.chunk_size):
            if snapshot is not None and start:
                random.restore_states(snapshot)
            stop = min(start + chunks.chunk_size, call.size)
            piece = call.run(call.chunk(start, stop), stop - start)
            leaves, tree = optree.tree_flatten(piece, none_is_leaf=True)
            if joined is None:
                joined = Joined(call.size, lambda _, first=piece: call.out_axes(first))
            joined.add(start, stop, leaves)
            bar.update(stop - start)
    finally:
        bar.close()
    return optree.tree_unflatten(tree, joined.result())


def _slice_along(x, d, start, stop):
    return x[(slice(None),) * d + (slice(start, stop), ...)]


# ------------------------------------------------------------------------------ on a Dask cluster


def _vmap_task(shared, arguments, part, sizes):
    """On a Dask worker: the vmapped function on consecutive chunks of ``sizes`` examples (``part``: the
    mapped inputs' slices covering them), one chunk at a time; a list of the chunks' results."""
    func, dims, tree, out_dims, randomness, what = shared
    part, (flat, kwargs) = cluster.to_backend((part, arguments))
    pieces, start = [], 0
    for size in sizes:
        it = iter(part)
        chunk = [
            x if d is None else _slice_along(next(it), d, start, start + size) for x, d in zip(flat, dims)
        ]
        pieces.append(
            cluster.to_host(_vmap_call(func, chunk, dims, tree, size, kwargs, out_dims, randomness, what))
        )
        start += size
    return pieces


def _on_cluster(call, setting):
    cluster.check_randomness(call.randomness, call.what)
    chunks = call.plan(setting)
    ranges = [(s, min(s + chunks.chunk_size, call.size)) for s in range(0, call.size, chunks.chunk_size)]
    fixed = [None if d is not None else x for x, d in zip(call.flat, call.dims)]
    shared = (call.func, call.dims, call.tree, call.out_dims, call.randomness, call.what)
    arguments = (cluster.to_host(fixed), cluster.to_host(call.kwargs))
    # a lazy result: a task per chunk (its blocks); an array: the chunks in one run per worker thread
    runs = [[r] for r in ranges] if setting.lazy else cluster.runs(ranges, setting)
    parts = []
    for run in runs:
        a, b = run[0][0], run[-1][1]
        mapped = [x for x, d in zip(call.chunk(a, b), call.dims) if d is not None]
        parts.append((cluster.to_host(mapped, copy=setting.lazy), [hi - lo for lo, hi in run]))
    tasks = cluster.submit(setting, call.what, _vmap_task, shared, arguments, parts)
    if setting.lazy:
        return _dask_result(call, [cluster.item(t, 0) for t in tasks], ranges)
    ref = next(x for x, d in zip(call.flat, call.dims) if d is not None)
    backend = dispatch.backend_of_array(ref)
    o_tree = []  # the output's tree, from the first result in
    joined = Joined(call.size, lambda leaves: call.out_axes(optree.tree_unflatten(o_tree[0], leaves)))

    def join(i, result):  # as each task ends, while the others still run
        for (a, b), piece in zip(runs[i], result):
            leaves, tree = optree.tree_flatten(
                cluster.to_backend(piece, backend, ref.device), none_is_leaf=True
            )
            o_tree[:] = o_tree or [tree]
            joined.add(a, b, leaves)

    labels = [f"examples {run[0][0]}:{run[-1][1]}" for run in runs]
    cluster.gather(setting, call.what, tasks, labels, call.progress, join)
    return optree.tree_unflatten(o_tree[0], joined.result())


def _dask_result(call, tasks, ranges):
    """Lazy Dask arrays, one block per task; shapes and dtypes from eval_shape of one chunk."""
    shapes = {}
    for k in {b - a for a, b in ranges}:
        shapes[k] = eval_abstract(lambda *flat, k=k: call.run(list(flat), k), *call.avals(k))
    first = shapes[ranges[0][1] - ranges[0][0]]
    leaves, o_tree = optree.tree_flatten(first, none_is_leaf=True)
    paths = optree.tree_paths(first, none_is_leaf=True)
    axes = call.out_axes(first)
    res = []
    for j, (leaf, path, axis) in enumerate(zip(leaves, paths, axes)):
        if leaf is None:
            res.append(None)
            continue
        parts = []
        for t, (a, b) in zip(tasks if axis is not None else tasks[:1], ranges):
            aval = optree.tree_leaves(shapes[b - a], none_is_leaf=True)[j]
            parts.append(cluster.dask_array(cluster.item(t, *path), aval.shape, aval.dtype))
        res.append(parts[0] if axis is None else cluster.dask_concat(parts, axis))
    return optree.tree_unflatten(o_tree, res)
