"""vmap: a batching level (batching.py) over the mapped inputs, or chunks of them, or a Python loop
over the examples (``chunk_size=1``); in_dims and out_dims may be pytree prefixes."""

import functools

import optree

from polyad import random
from polyad.api.arguments import (
    _check_callable,
    _check_chunk_size,
    _check_randomness,
    _fname,
    _is_array,
    _is_dim,
    _reconnect_tree,
)
from polyad.batching import BatchedTensor, BatchInterpreter, LoopLevel
from polyad.core import new_level
from polyad.core import plain as _plain
from polyad.ops.manipulation import broadcast_to, concat, expand_dims, moveaxis, stack, take_index
from polyad.predispatch import recorded


def _describe_call(func, in_dims, out_dims):
    return f"vmap({_fname(func)}, in_dims={in_dims!r}, out_dims={out_dims!r})(<inputs>)"


def _dims_leaves(dims, tree, n, what, call, noun):
    """One dim (int or None) per leaf of ``tree`` from ``dims``: an int, None, or a pytree prefix."""
    if dims is None or _is_dim(dims):
        return [dims] * n
    try:
        full = optree.tree_broadcast_prefix(dims, tree, none_is_leaf=True)
    except ValueError as exc:
        raise ValueError(f"{call}: {what}={dims!r} is not a pytree prefix of the {noun} ({exc})") from None
    leaves = optree.tree_leaves(full, none_is_leaf=True)
    for d in leaves:
        if d is not None and not _is_dim(d):
            raise TypeError(f"{call}: every entry of {what} must be an int or None, got {d!r}")
    return leaves


def _map_inputs(flat, dims, call):
    """Check the mapped inputs; returns (normalised dims, batch size)."""
    size, first, out = None, None, []
    for i, (x, d) in enumerate(zip(flat, dims)):
        if d is None or x is None:
            out.append(None)
            continue
        if not _is_array(x):
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
    out = _reconnect_tree(out)
    o_flat, o_tree = optree.tree_flatten(out, none_is_leaf=True)
    odims = _dims_leaves(out_dims, out, len(o_flat), "out_dims", call, "outputs")
    res = []
    for i, (o, d) in enumerate(zip(o_flat, odims)):
        if o is None:
            res.append(None)
            continue
        if not _is_array(o):
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


def _vmap_loop(func, flat, dims, tree, size, kwargs, out_dims, randomness, call):
    """chunk_size=1: call ``func`` on each example, unbatched, and stack (Python control flow works)."""
    snapshot = random._snapshot() if randomness == "same" else None
    per = []
    with new_level(LoopLevel, size, randomness):
        for i in range(size):
            if snapshot is not None and i:
                random._restore(snapshot)
            args = [x if d is None else take_index(x, i, axis=d) for x, d in zip(flat, dims)]
            out = _reconnect_tree(func(*optree.tree_unflatten(tree, args), **kwargs))
            for j, o in enumerate(optree.tree_leaves(out, none_is_leaf=True)):
                if o is not None and not _is_array(o):
                    raise TypeError(
                        f"{call}: func must return arrays (or pytrees of them), got a {type(o).__name__} at "
                        f"output leaf {j}"
                    )
            per.append(out)
    if not per:
        raise ValueError(f"{call}: chunk_size=1 cannot infer the output of an empty batch")
    return _join(per, out_dims, call, lambda xs, d, nd: _plain(stack(xs, axis=d % (nd + 1))))


@recorded("vmap")
def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
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
        chunk_size: run the batch in chunks of this many examples and concatenate (caps memory);
            1 calls ``func`` once per example, unbatched, in a Python loop.

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
    _check_callable(func, "vmap")
    _check_randomness(randomness, "vmap")
    _check_chunk_size(chunk_size, "vmap")
    if not (in_dims is None or _is_dim(in_dims) or isinstance(in_dims, tuple | list)):
        raise TypeError(
            f"vmap(in_dims={in_dims!r}): in_dims must be an int, None, or a tuple with one entry per "
            "positional argument"
        )

    @functools.wraps(func)
    def vmapped(*args, **kwargs):
        call = _describe_call(func, in_dims, out_dims)
        flat, tree = optree.tree_flatten(args, none_is_leaf=True)
        if isinstance(in_dims, tuple | list):
            if len(in_dims) != len(args):
                raise ValueError(
                    f"{call}: in_dims has {len(in_dims)} entries but func was called with {len(args)} "
                    "positional argument(s); give one in_dim per positional argument"
                )
            dims = _dims_leaves(tuple(in_dims), args, len(flat), "in_dims", call, "arguments")
        else:
            dims = [in_dims] * len(flat)
        dims, size = _map_inputs(flat, dims, call)
        if chunk_size == 1:
            return _vmap_loop(func, flat, dims, tree, size, kwargs, out_dims, randomness, call)
        if chunk_size is None or chunk_size >= size:
            return _vmap_call(func, flat, dims, tree, size, kwargs, out_dims, randomness, call)
        snapshot = random._snapshot() if randomness == "same" else None
        pieces = []
        for start in range(0, size, chunk_size):
            if snapshot is not None and start:
                random._restore(snapshot)  # every chunk sees the same draws (torch.func does the same)
            stop = min(start + chunk_size, size)
            part = [x if d is None else _slice_along(x, d, start, stop) for x, d in zip(flat, dims)]
            pieces.append(
                _vmap_call(func, part, dims, tree, stop - start, kwargs, out_dims, randomness, call)
            )
        return _join(pieces, out_dims, call, lambda xs, d, nd: _plain(concat(xs, axis=d % nd)))

    return vmapped


def _slice_along(x, d, start, stop):
    return x[(slice(None),) * d + (slice(start, stop), ...)]
