"""``checkpoint``: a function whose intermediates reverse mode does not keep; its backward pass runs it
again (recorded) and pulls the cotangent back, as ``jax.checkpoint``.

The function is traced once (``polyad.control.closure``) and its call is one op, ``CHECKPOINT``. Reverse
mode's primal pass replays the trace's graph at the levels below (``Replay``: nothing recorded at this
level, one op to them, and the user's function not called again: under ``grad`` it runs twice, traced
and recomputed) and keeps only its inputs and the random generators' state; the backward pass restores
that state, so random draws inside replay the same numbers, runs the function recorded and pulls back.
jvp and vmap transform the function as a whole; ``pa.jit`` holds the call as one node (an optimisation
does not merge the recomputed ops with the forward's: the forward is that one node).
"""

import functools

import optree

import polyad.random as random
from polyad.control.bodies import BatchedBody, DualBody, recorded
from polyad.control.closure import Body, own_copy, trace
from polyad.control.loops import as_array, as_arrays, func_name
from polyad.core import Op, bind, transform_active
from polyad.core.avals import ShapeDtype, dtype_kind, is_floating
from polyad.ops.fills import zeros_like

POLICIES = (None, "everything")


def _kernel(xp_, *args, body, **params):
    return tuple(body(*args))


def _abstract(xp_, *avals, body, **params):
    device = next((a.device for a in avals if isinstance(a, ShapeDtype)), None)
    return tuple(ShapeDtype(a.shape, a.dtype, device) for a in body.out_avals)


def _batch(info, dims, *values, body, **params):
    inner = BatchedBody(body, dims, info.batch_size, info.randomness)
    outs = bind(CHECKPOINT, *values, body=inner, **params)
    return outs, (0,) * len(outs)


def _jvp(tangents, out, *primals, body, **params):
    given = [k for k, t in enumerate(tangents) if t is not None]
    floats = [k for k, a in enumerate(body.out_avals) if dtype_kind(a.dtype) in "fc"]
    inner = DualBody(body, len(primals), given, floats)
    outs = bind(CHECKPOINT, *primals, *[tangents[k] for k in given], body=inner, **params)
    n = len(body.out_avals)
    t_out = [None] * n
    for k, t in zip(floats, outs[n:]):
        t_out[k] = t
    return tuple(outs[:n]), tuple(t_out)


_jvp.computes_primal = True


class Replay:
    """A traced body run from its graph (``Body.graph``, the abstract trace's record of its ops) rather
    than by calling the user's function: the primal pass of a checkpoint under reverse mode, so that ``f``
    runs twice in all under ``grad``, its trace and its recomputation in the backward pass (not a third
    time on values that trace already describes). A body the graph cannot stand for (no graph; random
    draws, which the trace records as placeholders) is called as it is."""

    closures = ()

    def __init__(self, body):
        self.body, self.graph = body, body.graph
        self.out_avals, self.where, self.draws_random = body.out_avals, body.where, body.draws_random

    def __call__(self, *args):
        if self.graph is None or self.draws_random:
            return self.body(*args)
        return optree.tree_leaves(self.graph.run(list(args), {}), none_is_leaf=False)

    def compile_with(self, compile_fn):  # pa.jit: the same graph compiled, as the body's
        return self.body.compile_with(compile_fn)


def _vjp_forward(*primals, body, policy=None, **params):
    state = random.snapshot_states()
    if policy == "everything":  # keep the recording: no recomputation (a switch for comparisons)
        out, pullback = recorded(body, list(primals), keep=True)
        return tuple(out), (state, pullback)
    forward = Replay(body) if isinstance(body, Body) else body
    return bind(CHECKPOINT, *primals, body=forward, policy=policy, **params), (state, None)


def _vjp(g, out, *primals, body, residuals, policy=None, **params):
    state, pullback = residuals
    if pullback is None:
        now = random.snapshot_states()
        random.restore_states(state)  # the same draws as the primal pass
        try:
            _, pullback = recorded(body, list(primals))
        finally:
            random.restore_states(now)
    cts = pullback(list(g))
    return tuple(None if not (hasattr(p, "dtype") and is_floating(p)) else zeros_like(p) if c is None else c
                 for c, p in zip(cts, primals))  # fmt: skip


_vjp.forward = _vjp_forward

CHECKPOINT = Op(
    "checkpoint",
    _kernel,
    multiple_results=True,
    higher_order=lambda *args, body, **params: tuple(body(*args)),
    abstract_eval=_abstract,
    batch=_batch,
    jvp=_jvp,
    vjp=_vjp,
)


def checkpoint(f, *, policy=None):
    """``f`` with its intermediates recomputed in reverse mode instead of stored, as ``jax.checkpoint``.

    Args:
        f: a function of arrays (pytrees allowed); it may close over any value.
        policy: None (store nothing of ``f`` but its inputs; its backward pass runs it again) or
            "everything" (store its recording as any function's: no recomputation).

    Returns:
        A function with ``f``'s signature and values. Random draws inside ``f`` (``pa.random``) replay the
        same numbers when it runs again.

    Example:
        >>> import numpy as np, polyad as pa
        >>> layer = pa.checkpoint(lambda x: pa.xp.tanh(x) * 2.0)
        >>> pa.grad(lambda x: pa.xp.sum(layer(x)))(np.zeros(2))
        array([2., 2.])
    """
    where = f"pa.checkpoint({func_name(f)})"
    if not callable(f):
        raise TypeError(f"{where}: f must be callable, got {type(f).__name__}")
    if policy not in POLICIES:
        raise ValueError(f"{where}: policy must be one of {POLICIES}, got {policy!r}")

    @functools.wraps(f)
    def checkpointed(*args):
        if not transform_active():  # f's arguments its own, as under a transform: writes stay inside
            return f(*optree.tree_map(own_copy, args, none_is_leaf=False))
        flat, tree = optree.tree_flatten(args, none_is_leaf=False)
        flat = as_arrays(flat, where, "its arguments")
        out_tree = []

        def flat_f(*leaves):
            out = f(*optree.tree_unflatten(tree, list(leaves)))
            o_flat, o_tree = optree.tree_flatten(out, none_is_leaf=False)
            out_tree.append(o_tree)
            return tuple(as_array(o, where, "its output") for o in o_flat)

        body = trace(flat_f, flat, where)
        outs = bind(CHECKPOINT, *flat, *body.closures, body=body, policy=policy)
        return optree.tree_unflatten(out_tree[0], list(outs))

    return checkpointed
